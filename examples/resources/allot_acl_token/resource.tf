# The token of the Spark scheduler: it subscribes as principal "spark", with
# roles under eng/ only.
resource "allot_acl_token" "spark" {
  accessor    = "spark-prod"
  description = "Spark on the prod cluster"
  principal   = "spark"
  policies    = [allot_acl_policy.eng_frameworks.name]
}

# The secret is in the state only (protect it as such). Hand it to the
# scheduler through a file or a secret store, never on a command line:
#   terraform output -raw spark_token > /etc/spark/allot-token
output "spark_token" {
  value     = allot_acl_token.spark.secret
  sensitive = true
}
