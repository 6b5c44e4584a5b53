# An ACL token is imported by its accessor. The cluster keeps only a hash of
# the secret, so an imported token's secret attribute stays null.
terraform import allot_acl_token.spark spark-prod
