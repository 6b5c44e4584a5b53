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

func roleConfig(c *accCluster, name, body string) string {
	return c.providerConfig() + fmt.Sprintf(`
resource "allot_role" "test" {
  name = %q
  %s
}
`, name, body)
}

func checkRole(c *accCluster, name string, weight float64, lending api.Resources) resource.TestCheckFunc {
	return func(*terraform.State) error {
		role, err := c.client.Role(context.Background(), name, api.ReadOptions{})
		if err != nil {
			return fmt.Errorf("role %s: %w", name, err)
		}
		if role.Version == 0 || role.Weight != weight || !equalResources(role.LendingLimit, lending) {
			return fmt.Errorf("role %s: version %d weight %v lending limit %v in the cluster, want weight %v lending limit %v",
				name, role.Version, role.Weight, role.LendingLimit, weight, lending)
		}
		return nil
	}
}

// checkRoleReset checks that destroying allot_role reset the roles.
func checkRoleReset(c *accCluster, names ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, name := range names {
			role, err := c.client.Role(context.Background(), name, api.ReadOptions{})
			if err != nil {
				return fmt.Errorf("role %s: %w", name, err)
			}
			if role.Version != 0 || role.Weight != api.DefaultWeight {
				return fmt.Errorf("role %s: version %d weight %v after destroy, want a reset role", name, role.Version, role.Weight)
			}
		}
		return nil
	}
}

func TestAccRoleResource(t *testing.T) {
	c := sharedCluster(t)
	const name, renamed = "acc-role/lifecycle", "acc-role/renamed"
	addr := "allot_role.test"
	ctx := context.Background()
	config := roleConfig(c, name, `weight = 3
  lending_limit = { cpus = 8 }`)

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		CheckDestroy:             checkRoleReset(c, name, renamed),
		Steps: []resource.TestStep{
			{
				// Weight left out: the default.
				Config: roleConfig(c, name, `lending_limit = { cpus = 8 }`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(name)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("weight"), knownvalue.Float64Exact(1)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("version"), knownvalue.NotNull()),
				},
				Check: checkRole(c, name, 1, api.Resources{"cpus": 8}),
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
				Check: checkRole(c, name, 3, api.Resources{"cpus": 8}),
			},
			{
				PreConfig: func() {
					weight := 5.0
					if _, err := c.client.PutRole(ctx, name, api.RoleRequest{Weight: &weight}, api.WriteOptions{}); err != nil {
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
			{Config: config, Check: checkRole(c, name, 3, api.Resources{"cpus": 8})},
			{
				// Reset behind Terraform's back: the role reads as never
				// configured, and the plan configures it again.
				PreConfig: func() {
					if err := c.client.DeleteRole(ctx, name, api.WriteOptions{}); err != nil {
						t.Fatalf("reset behind Terraform's back: %v", err)
					}
				},
				Config:             config,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
			},
			{Config: config, Check: checkRole(c, name, 3, api.Resources{"cpus": 8})},
			{
				Config: roleConfig(c, renamed, `weight = 3`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(checkRoleReset(c, name), checkRole(c, renamed, 3, nil)),
			},
		},
	})
}

func TestAccRoleResource_validation(t *testing.T) {
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
		"zero weight":       {`name = "r"` + "\n" + `weight = 0`, "Invalid value"},
		"huge weight":       {`name = "r"` + "\n" + `weight = 2e6`, "Invalid value"},
		"bad role":          {`name = "/r"`, "Invalid role name"},
		"negative lending":  {`name = "r"` + "\n" + `lending_limit = { cpus = -2 }`, "must not be negative"},
		"bad resource name": {`name = "r"` + "\n" + `lending_limit = { "9cpus" = 2 }`, "Invalid resource name"},
	}
	var steps []resource.TestStep
	for _, tc := range cases {
		steps = append(steps, resource.TestStep{
			Config:      provider + fmt.Sprintf("resource \"allot_role\" \"test\" {\n  %s\n}\n", tc.body),
			PlanOnly:    true,
			ExpectError: words(tc.want),
		})
	}
	resource.ParallelTest(t, resource.TestCase{ProtoV6ProviderFactories: providerFactories(nil), Steps: steps})
}

// checkLendingLimit checks the role's lending limit in the cluster, where nil
// (no cap) and empty (lend nothing) differ.
func checkLendingLimit(c *accCluster, name string, want api.Resources) resource.TestCheckFunc {
	return func(*terraform.State) error {
		role, err := c.client.Role(context.Background(), name, api.ReadOptions{})
		if err != nil {
			return fmt.Errorf("role %s: %w", name, err)
		}
		if !sameLendingLimit(role.LendingLimit, want) {
			return fmt.Errorf("role %s: lending limit %#v in the cluster, want %#v", name, role.LendingLimit, want)
		}
		return nil
	}
}

// TestAccRoleResource_lendNothing: lending_limit = {} lends nothing, and
// stays apart from no lending limit (no cap) in the cluster, the state, an
// import and drift.
func TestAccRoleResource_lendNothing(t *testing.T) {
	c := sharedCluster(t)
	const name = "acc-role/lend-nothing"
	addr := "allot_role.test"
	ctx := context.Background()
	nothing := roleConfig(c, name, `lending_limit = {}`)
	uncapped := roleConfig(c, name, `weight = 1`)

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		CheckDestroy:             checkRoleReset(c, name),
		Steps: []resource.TestStep{
			{
				Config: nothing,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("lending_limit"), knownvalue.MapSizeExact(0)),
				},
				Check: checkLendingLimit(c, name, api.Resources{}),
			},
			{ResourceName: addr, ImportState: true, ImportStateVerify: true},
			{Config: nothing, PlanOnly: true},
			{
				Config: uncapped,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("lending_limit"), knownvalue.Null()),
				},
				Check: checkLendingLimit(c, name, nil),
			},
			{Config: uncapped, PlanOnly: true},
			{
				// {} set behind Terraform's back is drift from no cap.
				PreConfig: func() {
					role, err := c.client.Role(ctx, name, api.ReadOptions{})
					if err != nil {
						t.Fatalf("read role: %v", err)
					}
					weight := 1.0
					if _, err := c.client.PutRole(ctx, name, api.RoleRequest{Weight: &weight, LendingLimit: api.Resources{}},
						api.WriteOptions{IfMatch: role.Version}); err != nil {
						t.Fatalf("change behind Terraform's back: %v", err)
					}
				},
				Config:             uncapped,
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
			},
			{Config: uncapped, Check: checkLendingLimit(c, name, nil)},
		},
	})
}
