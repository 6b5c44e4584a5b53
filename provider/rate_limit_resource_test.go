package provider

import (
	"context"
	"fmt"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/allot/allot/masterd/api"
)

func rateLimitConfig(c *accCluster, principal, body string) string {
	return c.providerConfig() + fmt.Sprintf(`
resource "allot_rate_limit" "test" {
  principal = %q
  %s
}
`, principal, body)
}

// checkRateLimit compares the cluster's limit of principal; qps 0 means none.
func checkRateLimit(c *accCluster, principal string, qps float64, burst, capacity int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		rl, err := c.client.RateLimit(context.Background(), principal, api.ReadOptions{})
		if err != nil {
			return fmt.Errorf("rate limit %s: %w", principal, err)
		}
		gotQPS := 0.0
		if rl.QPS != nil {
			gotQPS = *rl.QPS
		}
		if gotQPS != qps || rl.Burst != burst || rl.Capacity != capacity {
			return fmt.Errorf("rate limit %s: qps %v burst %d capacity %d in the cluster, want %v %d %d",
				principal, gotQPS, rl.Burst, rl.Capacity, qps, burst, capacity)
		}
		return nil
	}
}

func checkNoRateLimit(c *accCluster, principals ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, p := range principals {
			if _, err := c.client.RateLimit(context.Background(), p, api.ReadOptions{}); !api.IsNotFound(err) {
				return fmt.Errorf("rate limit %s: still there after destroy (err %v)", p, err)
			}
		}
		return nil
	}
}

func TestAccRateLimitResource(t *testing.T) {
	c := sharedCluster(t)
	const principal, renamed = "acc-rl-lifecycle", "acc-rl-renamed"
	addr := "allot_rate_limit.test"
	ctx := context.Background()
	config := rateLimitConfig(c, principal, `qps = 10
  burst = 20`)

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		CheckDestroy:             checkNoRateLimit(c, principal, renamed),
		Steps: []resource.TestStep{
			{
				// Burst and capacity left to their defaults, shown in the plan.
				Config: rateLimitConfig(c, principal, `qps = 55.5`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectKnownValue(addr, tfjsonpath.New("burst"), knownvalue.Int64Exact(56)),
						plancheck.ExpectKnownValue(addr, tfjsonpath.New("capacity"), knownvalue.Int64Exact(1000)),
					},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(principal)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("qps"), knownvalue.Float64Exact(55.5)),
				},
				Check: checkRateLimit(c, principal, 55.5, 56, 1000),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: checkRateLimit(c, principal, 10, 20, 1000),
			},
			{
				// Burst removed from the configuration: back to its default.
				Config: rateLimitConfig(c, principal, `qps = 10
  capacity = 0`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue(addr, tfjsonpath.New("burst"), knownvalue.Int64Exact(10)),
					},
				},
				Check: checkRateLimit(c, principal, 10, 10, 0),
			},
			{
				// Without qps the principal is counted, not throttled.
				Config: rateLimitConfig(c, principal, ``),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("qps"), knownvalue.Null()),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("burst"), knownvalue.Int64Exact(0)),
				},
				Check: checkRateLimit(c, principal, 0, 0, 1000),
			},
			{Config: config, Check: checkRateLimit(c, principal, 10, 20, 1000)},
			{
				PreConfig: func() {
					qps := 99.0
					if _, err := c.client.PutRateLimit(ctx, principal, api.RateLimitRequest{QPS: &qps}, api.WriteOptions{}); err != nil {
						t.Fatalf("change behind Terraform's back: %v", err)
					}
				},
				Config:             config,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
			},
			{Config: config, Check: checkRateLimit(c, principal, 10, 20, 1000)},
			{
				PreConfig: func() {
					if err := c.client.DeleteRateLimit(ctx, principal, api.WriteOptions{}); err != nil {
						t.Fatalf("delete behind Terraform's back: %v", err)
					}
				},
				Config:             config,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
			},
			{Config: config, Check: checkRateLimit(c, principal, 10, 20, 1000)},
			{
				Config: rateLimitConfig(c, renamed, `qps = 10
  burst = 20`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(checkNoRateLimit(c, principal), checkRateLimit(c, renamed, 10, 20, 1000)),
			},
		},
	})
}

func TestAccRateLimitResource_validation(t *testing.T) {
	skipUnlessAcc(t)
	provider := `
provider "allot" {
  addresses = ["http://127.0.0.1:1"]
  timeout   = "1s"
}
`
	cases := map[string]struct {
		body string
		want string
	}{
		"zero qps":       {`principal = "p"` + "\n" + `qps = 0`, "Invalid value"},
		"zero burst":     {`principal = "p"` + "\n" + `qps = 1` + "\n" + `burst = 0`, "Invalid burst"},
		"capacity":       {`principal = "p"` + "\n" + `capacity = -1`, "capacity"},
		"bad principal":  {`principal = "sp ark"`, "Invalid principal"},
		"huge capacity":  {`principal = "p"` + "\n" + `capacity = 20000000`, "capacity"},
		"infinite qps":   {`principal = "p"` + "\n" + `qps = 1/0`, "qps"},
		"bad timeout":    {`principal = "p"`, "Invalid duration"},
		"bad address":    {`principal = "p"`, "Invalid allot server address"},
		"empty identity": {`principal = ""`, "Invalid principal"},
	}
	var steps []resource.TestStep
	for name, tc := range cases {
		p := provider
		switch name {
		case "bad timeout":
			p = `provider "allot" { timeout = "soon" }`
		case "bad address":
			p = `provider "allot" { addresses = ["127.0.0.1:5050"] }`
		}
		steps = append(steps, resource.TestStep{
			Config:      p + fmt.Sprintf("\nresource \"allot_rate_limit\" \"test\" {\n  %s\n}\n", tc.body),
			PlanOnly:    true,
			ExpectError: words(tc.want),
		})
	}
	resource.ParallelTest(t, resource.TestCase{ProtoV6ProviderFactories: providerFactories(nil), Steps: steps})
}
