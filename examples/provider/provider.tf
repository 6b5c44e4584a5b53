terraform {
  required_providers {
    allot = {
      source = "allot/allot"
    }
  }
}

variable "allot_token" {
  type      = string
  sensitive = true
}

# Any server of the cluster will do; list them all so that the provider keeps
# working while one is down or the leader changes.
provider "allot" {
  addresses = ["http://10.0.0.1:5050", "http://10.0.0.2:5050", "http://10.0.0.3:5050"]
  token     = var.allot_token
  timeout   = "30s"
}
