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

func reservationConfig(c *accCluster, name, agent, role, body string) string {
	return c.providerConfig() + fmt.Sprintf(`
resource "allot_reservation" "test" {
  name  = %q
  agent = %q
  role  = %q
  %s
}
`, name, agent, role, body)
}

func checkReservation(c *accCluster, name, role string, resources api.Resources, status string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		res, err := c.client.Reservation(context.Background(), name, api.ReadOptions{})
		if err != nil {
			return fmt.Errorf("reservation %s: %w", name, err)
		}
		if res.Role != role || !equalResources(res.Resources, resources) || res.Status != status {
			return fmt.Errorf("reservation %s: role %s resources %v status %s in the cluster, want role %s resources %v status %s",
				name, res.Role, res.Resources, res.Status, role, resources, status)
		}
		return nil
	}
}

func checkNoReservation(c *accCluster, names ...string) resource.TestCheckFunc {
	return func(*terraform.State) error {
		for _, name := range names {
			if _, err := c.client.Reservation(context.Background(), name, api.ReadOptions{}); !api.IsNotFound(err) {
				return fmt.Errorf("reservation %s: still there after destroy (err %v)", name, err)
			}
		}
		return nil
	}
}

func TestAccReservationResource(t *testing.T) {
	c := sharedCluster(t)
	const agent, name = "acc-res-node", "acc-res-lifecycle"
	c.admitAgent(t, agent, api.Resources{"cpus": 16, "mem": 32768})
	addr := "allot_reservation.test"
	ctx := context.Background()
	config := reservationConfig(c, name, agent, "db", `resources = { cpus = 4, mem = 4096 }`)

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		CheckDestroy:             checkNoReservation(c, name),
		Steps: []resource.TestStep{
			{
				Config: reservationConfig(c, name, agent, "db", `resources = { cpus = 2, mem = 1024 }`),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("id"), knownvalue.StringExact(name)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("status"), knownvalue.StringExact(api.ReservationActive)),
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("force"), knownvalue.Bool(false)),
				},
				Check: checkReservation(c, name, "db", api.Resources{"cpus": 2, "mem": 1024}, api.ReservationActive),
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
				Check: checkReservation(c, name, "db", api.Resources{"cpus": 4, "mem": 4096}, api.ReservationActive),
			},
			{
				PreConfig: func() {
					if _, err := c.client.PutReservation(ctx, name, api.ReservationRequest{
						Agent: agent, Role: "db", Resources: api.Resources{"cpus": 1},
					}, api.WriteOptions{}); err != nil {
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
			{Config: config, Check: checkReservation(c, name, "db", api.Resources{"cpus": 4, "mem": 4096}, api.ReservationActive)},
			{
				PreConfig: func() {
					if err := c.client.DeleteReservation(ctx, name, api.WriteOptions{}); err != nil {
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
			{Config: config, Check: checkReservation(c, name, "db", api.Resources{"cpus": 4, "mem": 4096}, api.ReservationActive)},
			{
				// Another role is another reservation.
				Config: reservationConfig(c, name, agent, "cache", `resources = { cpus = 4, mem = 4096 }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{
					PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionReplace)},
				},
				Check: checkReservation(c, name, "cache", api.Resources{"cpus": 4, "mem": 4096}, api.ReservationActive),
			},
		},
	})
}

// TestAccReservationResource_planErrors: a reservation that does not fit its
// agent, or names an agent the cluster does not know, fails at plan time.
func TestAccReservationResource_planErrors(t *testing.T) {
	c := sharedCluster(t)
	const agent, name = "acc-res-small-node", "acc-res-errors"
	c.admitAgent(t, agent, api.Resources{"cpus": 4, "mem": 4096})
	addr := "allot_reservation.test"

	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		CheckDestroy:             checkNoReservation(c, name),
		Steps: []resource.TestStep{
			{
				Config: reservationConfig(c, name, agent, "db", `resources = { cpus = 6 }`),
				ExpectError: wordsInOrder("Apply would fail: not enough capacity",
					"cpus: 6 requested by this change, capacity 4: short by 2", "Set force = true to apply it anyway"),
			},
			{
				Config:      reservationConfig(c, name, "acc-no-such-agent", "db", `resources = { cpus = 1 }`),
				ExpectError: words("agent acc-no-such-agent is not admitted"),
			},
			{
				Config:      reservationConfig(c, name, agent, "db", `resources = { cpus = 0 }`),
				ExpectError: words("Reservation reserves nothing"),
			},
			{
				Config:      reservationConfig(c, name, agent, "db", `resources = { cpus = 1, "Mem" = 1 }`),
				ExpectError: words("Invalid resource name"),
			},
			{
				// Forced: stored, pending until the agent has room.
				Config: reservationConfig(c, name, agent, "db", `resources = { cpus = 6 }`+"\n  force = true"),
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue(addr, tfjsonpath.New("status"), knownvalue.StringExact(api.ReservationPending)),
				},
				Check: checkReservation(c, name, "db", api.Resources{"cpus": 6}, api.ReservationPending),
			},
		},
	})
}
