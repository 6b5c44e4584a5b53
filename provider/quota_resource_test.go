package provider

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/allot/allot/masterd/api"
)

func quotaConfig(c *accCluster, role, body string) string {
	return c.providerConfig() + fmt.Sprintf(`
resource "allot_quota" "test" {
  role = %q
  %s
}
`, role, body)
}

// checkQuota compares the cluster's quota of role with the wanted limits.
func checkQuota(c *accCluster, role string, limits api.Resources) resource.TestCheckFunc {
	return checkQuotaValues(c, role, nil, limits)
}

// checkQuotaValues compares the cluster's quota of role with the wanted
// guarantees (nil: any) and limits.
func checkQuotaValues(c *accCluster, role string, guarantees, limits api.Resources) resource.TestCheckFunc {
	return func(*terraform.State) error {
		q, err := c.client.Quota(context.Background(), role, api.ReadOptions{})
		if err != nil {
			return fmt.Errorf("quota %s: %w", role, err)
		}
		if !equalResources(q.Limits, limits) {
			return fmt.Errorf("quota %s: limits %v in the cluster, want %v", role, q.Limits, limits)
		}
		if guarantees != nil && !equalResources(q.Guarantees, guarantees) {
			return fmt.Errorf("quota %s: guarantees %v in the cluster, want %v", role, q.Guarantees, guarantees)
		}
		return nil
	}
}

func checkNoQuota(c *accCluster, roles ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, role := range roles {
			if _, err := c.client.Quota(context.Background(), role, api.ReadOptions{}); !api.IsNotFound(err) {
				return fmt.Errorf("quota %s: still there after destroy (err %v)", role, err)
			}
		}
		return nil
	}
}

func TestAccQuotaResource(t *testing.T) {
	c := sharedCluster(t)
	c.admitAgent(t, "acc-quota-node", api.Resources{"cpus": 64, "mem": 65536})
	const role, renamed = "acc-quota/lifecycle", "acc-quota/renamed"
	addr := "allot_quota.test"
	ctx := context.Background()

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		CheckDestroy:             checkNoQuota(c, role, renamed),
		Steps: []resource.TestStep{
			{
				Config: quotaConfig(c, role, `
  guarantees = { cpus = 2, mem = 1024 }
  limits     = { cpus = 4, mem = 2048 }`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(role)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("limits").AtMapKey("cpus"), knownvalue.Float64Exact(4)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("force"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("version"), knownvalue.NotNull()),
				},
				Check: checkQuota(c, role, api.Resources{"cpus": 4, "mem": 2048}),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
			},
			{
				// In place: the same role with a new limit.
				Config: quotaConfig(c, role, `
  guarantees = { cpus = 2, mem = 1024 }
  limits     = { cpus = 8, mem = 2048 }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: checkQuota(c, role, api.Resources{"cpus": 8, "mem": 2048}),
			},
			{
				// Changed behind Terraform's back: the plan puts it back.
				PreConfig: func() {
					if _, err := c.client.PutQuota(ctx, role, api.QuotaRequest{
						Guarantees: api.Resources{"cpus": 2, "mem": 1024}, Limits: api.Resources{"cpus": 16, "mem": 2048},
					}, api.WriteOptions{}); err != nil {
						t.Fatalf("change behind Terraform's back: %v", err)
					}
				},
				Config: quotaConfig(c, role, `
  guarantees = { cpus = 2, mem = 1024 }
  limits     = { cpus = 8, mem = 2048 }`),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{
						plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate),
						plancheck.ExpectKnownValue(addr, tfjsonpath.New("limits").AtMapKey("cpus"), knownvalue.Float64Exact(8)),
					},
				},
			},
			{
				Config: quotaConfig(c, role, `
  guarantees = { cpus = 2, mem = 1024 }
  limits     = { cpus = 8, mem = 2048 }`),
				Check: checkQuota(c, role, api.Resources{"cpus": 8, "mem": 2048}),
			},
			{
				// Deleted behind Terraform's back: planned for re-creation.
				PreConfig: func() {
					if err := c.client.DeleteQuota(ctx, role, api.WriteOptions{}); err != nil {
						t.Fatalf("delete behind Terraform's back: %v", err)
					}
				},
				Config: quotaConfig(c, role, `
  guarantees = { cpus = 2, mem = 1024 }
  limits     = { cpus = 8, mem = 2048 }`),
				PlanOnly:           true,
				ExpectNonEmptyPlan: true,
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PostApplyPostRefresh: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)},
				},
			},
			{
				Config: quotaConfig(c, role, `
  guarantees = { cpus = 2, mem = 1024 }
  limits     = { cpus = 8, mem = 2048 }`),
				Check: checkQuota(c, role, api.Resources{"cpus": 8, "mem": 2048}),
			},
			{
				// A new role is a new quota.
				Config: quotaConfig(c, renamed, `
  guarantees = { cpus = 2, mem = 1024 }
  limits     = { cpus = 8, mem = 2048 }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace)},
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					checkNoQuota(c, role),
					checkQuota(c, renamed, api.Resources{"cpus": 8, "mem": 2048}),
				),
			},
		},
	})
}

// TestAccQuotaResource_normalization: values below the cluster's precision
// neither drift after apply nor after import.
func TestAccQuotaResource_normalization(t *testing.T) {
	c := sharedCluster(t)
	const role = "acc-quota-normalization"
	addr := "allot_quota.test"
	config := quotaConfig(c, role, `limits = { cpus = 0.5004, mem = 1024.0001 }`)

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		CheckDestroy:             checkNoQuota(c, role),
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					// The configured spelling stays in the state...
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("limits").AtMapKey("cpus"), knownvalue.Float64Exact(0.5004)),
				},
				// ...while the cluster stores the rounded value.
				Check: checkQuota(c, role, api.Resources{"cpus": 0.5, "mem": 1024}),
			},
			{
				// Forget it without destroying it...
				Config: c.providerConfig() + `
removed {
  from = allot_quota.test
  lifecycle { destroy = false }
}
`,
				Check: checkQuota(c, role, api.Resources{"cpus": 0.5, "mem": 1024}),
			},
			{
				// ...and import it: the state holds 0.5 and the config 0.5004,
				// and the import changes nothing.
				Config: config + fmt.Sprintf(`
import {
  to = allot_quota.test
  id = %q
}
`, role),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionNoop)},
				},
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("limits").AtMapKey("cpus"), knownvalue.Float64Exact(0.5)),
				},
			},
			{
				// A real change at the cluster's precision is still a change.
				Config: quotaConfig(c, role, `limits = { cpus = 0.501, mem = 1024.0001 }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)},
				},
				Check: checkQuota(c, role, api.Resources{"cpus": 0.501, "mem": 1024}),
			},
		},
	})
}

// TestAccQuotaResource_validation: mistakes caught at plan time without the
// cluster.
func TestAccQuotaResource_validation(t *testing.T) {
	skipUnlessAcc(t)
	// Nothing listens here: validation must not need the cluster.
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
		"guarantee above limit": {`role = "r"
  guarantees = { cpus = 4 }
  limits     = { cpus = 2 }`, "Guarantee above limit"},
		"negative value":    {`role = "r"` + "\n" + `limits = { cpus = -1 }`, "must not be negative"},
		"bad resource name": {`role = "r"` + "\n" + `limits = { CPUs = 1 }`, "Invalid resource name"},
		"bad role":          {`role = "eng//ml"`, "Invalid role name"},
		"default role":      {`role = "*"`, "Invalid role name"},
		"infinite value":    {`role = "r"` + "\n" + `limits = { cpus = 1/0 }`, "cpus"},
		"null resource":     {`role = "r"` + "\n" + `limits = { cpus = null }`, "Missing resource value"},
	}
	steps := make([]resource.TestStep, 0, len(cases))
	for _, tc := range cases {
		steps = append(steps, resource.TestStep{
			Config:      provider + fmt.Sprintf("resource \"allot_quota\" \"test\" {\n  %s\n}\n", tc.body),
			PlanOnly:    true,
			ExpectError: words(tc.want),
		})
	}
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		Steps:                    steps,
	})
}

// TestAccQuotaResource_planErrors: a quota apply would refuse is an error at
// plan time that says what is short and how to override it.
func TestAccQuotaResource_planErrors(t *testing.T) {
	// Its own cluster: the capacity arithmetic needs to know every guarantee.
	c := ownCluster(t, 1)
	c.admitAgent(t, "node-1", api.Resources{"cpus": 8, "mem": 16384})
	config := func(mlLimit float64, batch string) string {
		return c.providerConfig() + fmt.Sprintf(`
resource "allot_quota" "eng" {
  role   = "eng"
  limits = { cpus = 10 }
}
resource "allot_quota" "ml" {
  role       = "eng/ml"
  limits     = { cpus = %g }
  depends_on = [allot_quota.eng]
}
resource "allot_quota" "batch" {
  role = "batch"
  %s
}
`, mlLimit, batch)
	}

	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		CheckDestroy:             checkNoQuota(c, "eng", "eng/ml", "batch"),
		Steps: []resource.TestStep{
			{
				Config: config(4, `guarantees = { cpus = 2 }`),
				Check:  checkQuotaValues(c, "batch", api.Resources{"cpus": 2}, nil),
			},
			{
				// Beyond the admitted agents' capacity: says what is short, by
				// how much, and how to override it.
				Config:      config(4, `guarantees = { cpus = 12 }`),
				ExpectError: wordsInOrder("Apply would fail: not enough capacity", "cpus: 12 requested by this change, capacity 8: short by 4", "Set force = true to apply it anyway"),
			},
			{
				// A child above its parent's limit: force does not help, so
				// the error does not suggest it.
				Config:      config(20, `guarantees = { cpus = 2 }`),
				ExpectError: wordsInOrder("Apply would fail: invalid change", "limit of cpus (20) exceeds the limit of role eng above it"),
			},
			{
				// Forced past the capacity heuristic.
				Config: config(4, `guarantees = { cpus = 12 }`+"\n  force = true"),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("allot_quota.batch", plancheck.ResourceActionUpdate)},
				},
				Check: checkQuotaValues(c, "batch", api.Resources{"cpus": 12}, nil),
			},
		},
	})
}

// TestAccQuotaResource_capacityErrorsInPlainNumbers: a capacity error, at
// apply time or at plan time, says per resource what the change asks for,
// what the other guarantees hold and what the agents have, in the numbers
// the configuration uses (1008192, never 1.008192e+06).
func TestAccQuotaResource_capacityErrorsInPlainNumbers(t *testing.T) {
	// Its own cluster: the capacity arithmetic needs to know every guarantee.
	c := ownCluster(t, 1)
	c.admitAgent(t, "node-1", api.Resources{"cpus": 8, "mem": 1008192})
	// Another operator guarantees role web most of the memory after the plan
	// checked batch and before apply writes it.
	var once sync.Once
	hooks := protocolHooks{beforeApply: func(string) {
		once.Do(func() {
			_, err := c.client.PutQuota(context.Background(), "web", api.QuotaRequest{Guarantees: api.Resources{"mem": 600000}}, api.WriteOptions{})
			if err != nil {
				t.Errorf("guarantee web its memory: %v", err)
			}
		})
	}}
	config := c.providerConfig() + `
resource "allot_quota" "batch" {
  role       = "batch"
  guarantees = { cpus = 2, mem = 500000 }
}
`
	line := "mem: 500000 requested by this change + 600000 already held by others = 1100000, capacity 1008192: short by 91808"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: hookedFactories(hooks),
		CheckDestroy:             checkNoQuota(c, "batch"),
		Steps: []resource.TestStep{
			{
				Config:      config,
				ExpectError: wordsInOrder(`Unable to create quota`, `Creating the quota of role "batch" failed`, line, "set force = true"),
			},
			{
				// With web's guarantee stored, the plan says so.
				Config:      config,
				ExpectError: wordsInOrder("Apply would fail: not enough capacity", line, "Set force = true to apply it anyway"),
			},
		},
	})
}

// TestAccQuotaResource_ifMatch: a change made after Terraform's last read is
// never overwritten; the error says to refresh.
func TestAccQuotaResource_ifMatch(t *testing.T) {
	c := sharedCluster(t)
	const role = "acc-quota-ifmatch"

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		// Plans without refreshing, as `terraform apply` of a saved plan does.
		AdditionalCLIOptions: &resource.AdditionalCLIOptions{Plan: resource.PlanOptions{NoRefresh: true}},
		CheckDestroy:         checkNoQuota(c, role),
		Steps: []resource.TestStep{
			{Config: quotaConfig(c, role, `limits = { cpus = 4 }`)},
			{
				PreConfig: func() {
					if _, err := c.client.PutQuota(context.Background(), role,
						api.QuotaRequest{Limits: api.Resources{"cpus": 6}}, api.WriteOptions{}); err != nil {
						t.Fatalf("change behind Terraform's back: %v", err)
					}
				},
				Config:      quotaConfig(c, role, `limits = { cpus = 5 }`),
				ExpectError: words("was changed outside this Terraform run after Terraform last read it"),
				Check:       checkQuota(c, role, api.Resources{"cpus": 6}),
			},
			{
				// The cluster kept the other change.
				PreConfig: func() {
					if err := checkQuota(c, role, api.Resources{"cpus": 6})(nil); err != nil {
						t.Fatal(err)
					}
				},
				RefreshState:       true,
				ExpectNonEmptyPlan: true,
			},
			{Config: quotaConfig(c, role, `limits = { cpus = 5 }`), Check: checkQuota(c, role, api.Resources{"cpus": 5})},
		},
	})
}

// TestAccQuotaResource_overLimitWarning: forcing a limit below what a role
// consumes is a plan warning, and without force a plan error.
func TestAccQuotaResource_overLimitWarning(t *testing.T) {
	c := ownCluster(t, 1)
	c.admitAgent(t, "node-1", api.Resources{"cpus": 8, "mem": 16384})
	ctx := context.Background()
	if _, err := c.client.PutReservation(ctx, "db-1", api.ReservationRequest{
		Agent: "node-1", Role: "db", Resources: api.Resources{"cpus": 4},
	}, api.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Reserved resources count toward a role's consumption.
	if _, err := c.client.DryRun(ctx, http.MethodPut, api.QuotaPath("db"), api.QuotaRequest{Limits: api.Resources{"cpus": 2}}); !api.IsConflict(err) {
		t.Fatalf("dry run of a limit below the reservation: %v, want conflict", err)
	}
	rec := &diagRecorder{}
	config := func(force bool) string {
		return c.providerConfig() + fmt.Sprintf(`
resource "allot_quota" "db" {
  role   = "db"
  limits = { cpus = 2 }
  force  = %t
}
`, force)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(rec),
		Steps: []resource.TestStep{
			{
				Config:      config(false),
				ExpectError: words("Set force = true to apply it anyway"),
			},
			{
				PreConfig: rec.reset,
				Config:    config(true),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{
						expectPlanWarning(rec, "allot_quota", "Role will be over its limit", words(`role "db" consumes more than its limit allows (over by cpus 2)`)),
					},
				},
			},
		},
	})
}
