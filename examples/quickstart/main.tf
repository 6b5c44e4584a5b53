# The allot quickstart: cluster policy for a masterd started with
#
#   masterd -dev
#
# which serves the API on http://127.0.0.1:5050 with no token. Apply it with
# `make demo`, or see docs/guides/quickstart.md to do it by hand.

terraform {
  required_providers {
    allot = {
      source = "allot/allot"
    }
  }
}

# addresses defaults to ALLOT_ADDR, else http://127.0.0.1:5050.
provider "allot" {}

# Weighted fair sharing: eng is offered three times the share of analytics.
resource "allot_role" "eng" {
  name   = "eng"
  weight = 3
}

resource "allot_role" "ml" {
  name   = "eng/ml"
  weight = 2
}

resource "allot_role" "analytics" {
  name = "analytics" # weight 1, the default
}

# Limits cap what a role may use. Guarantees must fit the resources of the
# admitted agents, and a -dev cluster has none until agents register, so this
# quickstart sets limits only; the plan would show the shortfall otherwise.
resource "allot_quota" "eng" {
  role   = allot_role.eng.name
  limits = { cpus = 32, mem = 65536 }
}

# A child role stays within its parent's limits.
resource "allot_quota" "ml" {
  role   = allot_role.ml.name
  limits = { cpus = 16, mem = 32768 }

  depends_on = [allot_quota.eng]
}

resource "allot_quota" "analytics" {
  role   = allot_role.analytics.name
  limits = { cpus = 8, mem = 16384 }
}

# The spark framework may make 55.5 scheduler calls per second, 10 at once.
resource "allot_rate_limit" "spark" {
  principal = "spark"
  qps       = 55.5
  burst     = 10
}

# Every other framework shares one aggregate limit.
resource "allot_rate_limit_default" "this" {
  qps = 33.3
}

data "allot_cluster" "this" {}

output "leader" {
  value = try(data.allot_cluster.this.leader.api_address, "no leader yet")
}

output "spark_burst" {
  value = allot_rate_limit.spark.burst
}
