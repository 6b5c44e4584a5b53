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

func rateLimitDefaultConfig(c *accCluster, body string) string {
	return c.providerConfig() + fmt.Sprintf(`
resource "allot_rate_limit_default" "test" {
  %s
}
`, body)
}

func checkRateLimitDefault(c *accCluster, qps float64, burst, capacity int) resource.TestCheckFunc {
	return func(*terraform.State) error {
		rl, err := c.client.RateLimitDefault(context.Background(), api.ReadOptions{})
		if err != nil {
			return fmt.Errorf("default rate limit: %w", err)
		}
		if rl.QPS == nil || *rl.QPS != qps || rl.Burst != burst || rl.Capacity != capacity {
			return fmt.Errorf("default rate limit: %+v in the cluster, want qps %v burst %d capacity %d", rl, qps, burst, capacity)
		}
		return nil
	}
}

func checkNoRateLimitDefault(c *accCluster) resource.TestCheckFunc {
	return func(*terraform.State) error {
		if _, err := c.client.RateLimitDefault(context.Background(), api.ReadOptions{}); !api.IsNotFound(err) {
			return fmt.Errorf("default rate limit: still there after destroy (err %v)", err)
		}
		return nil
	}
}

// TestAccRateLimitDefaultResource uses a cluster of its own: a cluster has
// one default limit.
func TestAccRateLimitDefaultResource(t *testing.T) {
	c := ownCluster(t, 1)
	addr := "allot_rate_limit_default.test"
	ctx := context.Background()
	config := rateLimitDefaultConfig(c, `qps = 20
  capacity = 50`)

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		CheckDestroy:             checkNoRateLimitDefault(c),
		Steps: []resource.TestStep{
			{
				Config: rateLimitDefaultConfig(c, `qps = 33.3`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact("default")),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("burst"), knownvalue.Int64Exact(34)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("capacity"), knownvalue.Int64Exact(1000)),
				},
				Check: checkRateLimitDefault(c, 33.3, 34, 1000),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateId:     "default",
				ImportStateVerify: true,
			},
			{
				ResourceName:  addr,
				ImportState:   true,
				ImportStateId: "aggregate",
				ExpectError:   words(`The import ID of allot_rate_limit_default is always "default"`),
			},
			{
				Config: config,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: checkRateLimitDefault(c, 20, 20, 50),
			},
			{
				PreConfig: func() {
					qps := 1.0
					if _, err := c.client.PutRateLimitDefault(ctx, api.RateLimitRequest{QPS: &qps}, api.WriteOptions{}); err != nil {
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
			{Config: config, Check: checkRateLimitDefault(c, 20, 20, 50)},
			{
				PreConfig: func() {
					if err := c.client.DeleteRateLimitDefault(ctx, api.WriteOptions{}); err != nil {
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
			{Config: config, Check: checkRateLimitDefault(c, 20, 20, 50)},
		},
	})
}
