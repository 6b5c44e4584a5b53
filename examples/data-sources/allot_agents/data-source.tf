data "allot_agents" "all" {}

# One reservation for the "db" role on every agent.
resource "allot_reservation" "db" {
  for_each  = { for a in data.allot_agents.all.agents : a.name => a }
  name      = "db-${each.key}"
  agent     = each.key
  role      = "db"
  resources = { cpus = 2, mem = 4096 }
}
