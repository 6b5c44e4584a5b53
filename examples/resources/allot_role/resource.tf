resource "allot_role" "ml" {
  name          = "eng/ml"
  weight        = 2
  lending_limit = { cpus = 8, mem = 16384 }
}
