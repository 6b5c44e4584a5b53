resource "allot_role" "ml" {
  name   = "eng/ml"
  weight = 2
}

# Guarantees must fit the admitted agents; the plan fails, saying what is
# short and by how much, when they do not.
resource "allot_quota" "ml" {
  role       = allot_role.ml.name
  guarantees = { cpus = 12, mem = 6144 }
  limits     = { cpus = 24, mem = 12288 }
}

# A parent role bounds its children: eng/ml's limits must stay within eng's,
# and eng's guarantees must cover the sum of its children's.
resource "allot_quota" "eng" {
  role       = "eng"
  guarantees = { cpus = 16, mem = 8192 }
  limits     = { cpus = 48, mem = 65536 }
}
