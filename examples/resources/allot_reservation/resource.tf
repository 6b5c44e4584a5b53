resource "allot_reservation" "db" {
  name      = "db-node-1"
  agent     = "node-1"
  role      = "db"
  resources = { cpus = 4, mem = 8192 }
}
