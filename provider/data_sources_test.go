package provider

import (
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/knownvalue"
	"github.com/hashicorp/terraform-plugin-testing/statecheck"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"

	"github.com/allot/allot/masterd/api"
)

func TestAccDataSources(t *testing.T) {
	c := sharedCluster(t)
	const agent = "acc-ds-node"
	c.admitAgent(t, agent, api.Resources{"cpus": 6, "mem": 8192})
	config := c.providerConfig() + `
resource "allot_role" "ds" {
  name   = "acc-ds/role"
  weight = 2.5
}
resource "allot_quota" "ds" {
  role       = allot_role.ds.name
  guarantees = { cpus = 1 }
  limits     = { cpus = 3, mem = 2048 }
}
resource "allot_reservation" "ds" {
  name      = "acc-ds-reservation"
  agent     = "acc-ds-node"
  role      = allot_role.ds.name
  resources = { cpus = 2 }
}
data "allot_cluster" "this" {}
data "allot_agents" "all" {
  depends_on = [allot_reservation.ds]
}
data "allot_role" "ds" {
  name       = allot_role.ds.name
  depends_on = [allot_quota.ds, allot_reservation.ds]
}
data "allot_role" "unconfigured" {
  name = "acc-ds/never-configured"
}
`
	resource.ParallelTest(t, resource.TestCase{
		ProtoV6ProviderFactories: providerFactories(nil),
		Steps: []resource.TestStep{
			{
				Config: config,
				ConfigStateChecks: []statecheck.StateCheck{
					statecheck.ExpectKnownValue("data.allot_cluster.this", tfjsonpath.New("servers"), knownvalue.ListSizeExact(3)),
					statecheck.ExpectKnownValue("data.allot_cluster.this", tfjsonpath.New("leader").AtMapKey("leader"), knownvalue.Bool(true)),
					statecheck.ExpectKnownValue("data.allot_cluster.this", tfjsonpath.New("recovery").AtMapKey("active"), knownvalue.Bool(false)),
					statecheck.ExpectKnownValue("data.allot_role.ds", tfjsonpath.New("weight"), knownvalue.Float64Exact(2.5)),
					statecheck.ExpectKnownValue("data.allot_role.ds", tfjsonpath.New("quota").AtMapKey("limits").AtMapKey("cpus"), knownvalue.Float64Exact(3)),
					statecheck.ExpectKnownValue("data.allot_role.ds", tfjsonpath.New("quota").AtMapKey("guarantees").AtMapKey("cpus"), knownvalue.Float64Exact(1)),
					statecheck.ExpectKnownValue("data.allot_role.ds", tfjsonpath.New("reserved").AtMapKey("cpus"), knownvalue.Float64Exact(2)),
					statecheck.ExpectKnownValue("data.allot_role.ds", tfjsonpath.New("frameworks"), knownvalue.ListSizeExact(0)),
					statecheck.ExpectKnownValue("data.allot_role.unconfigured", tfjsonpath.New("version"), knownvalue.Int64Exact(0)),
					statecheck.ExpectKnownValue("data.allot_role.unconfigured", tfjsonpath.New("weight"), knownvalue.Float64Exact(1)),
					statecheck.ExpectKnownValue("data.allot_role.unconfigured", tfjsonpath.New("quota"), knownvalue.Null()),
				},
				Check: resource.ComposeAggregateTestCheckFunc(
					resource.TestCheckTypeSetElemNestedAttrs("data.allot_agents.all", "agents.*", map[string]string{
						"name":           agent,
						"hostname":       agent + ".test",
						"resources.cpus": "6",
						"resources.mem":  "8192",
						"reserved.cpus":  "2",
					}),
					resource.TestCheckResourceAttrSet("data.allot_cluster.this", "leader.api_address"),
				),
			},
		},
	})
}
