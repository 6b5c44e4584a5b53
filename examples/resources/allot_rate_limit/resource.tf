resource "allot_rate_limit" "spark" {
  principal = "spark"
  qps       = 55.5
  burst     = 10
  capacity  = 1000
}

# Spark's frameworks that subscribe with label "batch": at most 5 calls a
# second, and together with spark's other frameworks within spark's 55.5.
resource "allot_rate_limit" "spark_batch" {
  principal = "spark"
  label     = "batch"
  qps       = 5
}

# Counted in the metrics, never throttled.
resource "allot_rate_limit" "monitoring" {
  principal = "monitoring"
}
