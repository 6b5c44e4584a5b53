# A rate limit is imported by its principal.
terraform import allot_rate_limit.spark spark
