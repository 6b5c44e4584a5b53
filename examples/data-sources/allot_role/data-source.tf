data "allot_role" "ml" {
  name = "eng/ml"
}

output "ml_cpus_in_use" {
  value = lookup(data.allot_role.ml.allocated, "cpus", 0)
}
