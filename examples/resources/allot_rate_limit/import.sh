# A rate limit is imported by its principal, a labeled one by principal/label.
terraform import allot_rate_limit.spark spark
terraform import allot_rate_limit.spark_batch spark/batch
