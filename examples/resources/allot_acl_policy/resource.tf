# Frameworks of the eng roles: subscribe with any role under eng/.
resource "allot_acl_policy" "eng_frameworks" {
  name        = "eng-frameworks"
  description = "Schedulers of the eng teams"
  rules = [
    { object = "framework", access = "register", roles = ["eng/*"] },
  ]
}

# The agents of the cluster.
resource "allot_acl_policy" "agents" {
  name  = "agents"
  rules = [{ object = "agent", access = "register" }]
}

# An eng operator: manages the eng quotas and roles, reads the cluster.
resource "allot_acl_policy" "eng_operators" {
  name = "eng-operators"
  rules = [
    { object = "quota", access = "write", roles = ["eng", "eng/*"] },
    { object = "role", access = "write", roles = ["eng", "eng/*"] },
    { object = "cluster", access = "read" },
  ]
}
