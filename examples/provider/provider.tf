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
  addresses = ["https://10.0.0.1:5050", "https://10.0.0.2:5050", "https://10.0.0.3:5050"]
  token     = var.allot_token
  timeout   = "30s"

  # The CA that signed the servers' certificates (masterd tls ca), and the
  # client certificate the servers ask for with -tls-verify-incoming. Leave
  # these out for http:// servers; ALLOT_CACERT, ALLOT_CLIENT_CERT and
  # ALLOT_CLIENT_KEY set them from the environment.
  ca_file     = "/etc/allot/tls/ca.pem"
  client_cert = "/etc/allot/tls/terraform.pem"
  client_key  = "/etc/allot/tls/terraform-key.pem"
}
