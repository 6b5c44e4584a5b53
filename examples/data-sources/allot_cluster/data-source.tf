data "allot_cluster" "this" {}

output "leader" {
  value = try(data.allot_cluster.this.leader.api_address, "no leader")
}

output "free_cpus" {
  value = data.allot_cluster.this.total["cpus"] - lookup(data.allot_cluster.this.allocated, "cpus", 0)
}
