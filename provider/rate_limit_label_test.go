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

// TestAccRateLimitResource_Labels: a labeled limit lives beside the
// principal's own, is imported as principal/label, and a new label replaces
// it; the principal's own limit is left alone throughout.
func TestAccRateLimitResource_Labels(t *testing.T) {
	c := sharedCluster(t)
	ctx := context.Background()
	const principal = "acc-rl-labels"
	config := func(label string, qps int) string {
		return c.providerConfig() + fmt.Sprintf(`
resource "allot_rate_limit" "principal" {
  principal = %[1]q
  qps       = 50
}
resource "allot_rate_limit" "labeled" {
  principal = %[1]q
  label     = %[2]q
  qps       = %[3]d
}
`, principal, label, qps)
	}
	checkLabeled := func(label string, qps float64) resource.TestCheckFunc {
		return func(*terraform.State) error {
			rl, err := c.client.LabeledRateLimit(ctx, principal, label, api.ReadOptions{})
			if err != nil {
				return fmt.Errorf("labeled limit %s/%s: %w", principal, label, err)
			}
			if rl.QPS == nil || *rl.QPS != qps || rl.Label != label || rl.Principal != principal {
				return fmt.Errorf("labeled limit %s/%s: %+v, want qps %v", principal, label, rl, qps)
			}
			return checkRateLimit(c, principal, 50, 50, 1000)(nil)
		}
	}
	addr := "allot_rate_limit.labeled"
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		CheckDestroy: func(*terraform.State) error {
			for _, label := range []string{"batch", "stream"} {
				if _, err := c.client.LabeledRateLimit(ctx, principal, label, api.ReadOptions{}); !api.IsNotFound(err) {
					return fmt.Errorf("labeled limit %s/%s still there after destroy (err %v)", principal, label, err)
				}
			}
			return checkNoRateLimit(c, principal)(nil)
		},
		Steps: []resource.TestStep{
			{
				Config: config("batch", 5),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(principal+"/batch")),
					statecheck.ExpectKnownValue("allot_rate_limit.principal", tfjsonpath.New("label"), knownvalue.Null()),
				},
				Check: checkLabeled("batch", 5),
			},
			{ResourceName: addr, ImportState: true, ImportStateVerify: true},
			{
				Config: config("batch", 7),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: checkLabeled("batch", 7),
			},
			{
				Config: config("stream", 7),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(checkLabeled("stream", 7), func(*terraform.State) error {
					if _, err := c.client.LabeledRateLimit(ctx, principal, "batch", api.ReadOptions{}); !api.IsNotFound(err) {
						return fmt.Errorf("the replaced labeled limit is still there (err %v)", err)
					}
					return nil
				}),
			},
			{
				// A labeled limit deleted behind Terraform's back is planned
				// for re-creation; the principal's is not touched.
				PreConfig: func() {
					if err := c.client.DeleteLabeledRateLimit(ctx, principal, "stream", api.WriteOptions{}); err != nil {
						t.Fatalf("delete behind Terraform's back: %v", err)
					}
				},
				Config:             config("stream", 7),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate),
						plancheck.ExpectResourceAction("allot_rate_limit.principal", plancheck.ResourceActionNoop),
					},
				},
			},
			{Config: config("stream", 7), Check: checkLabeled("stream", 7)},
		},
	})
}
