resource "allot_rate_limit" "spark" {
  principal = "spark"
  qps       = 55.5
  burst     = 10
  capacity  = 1000
}

# Counted in the metrics, never throttled.
resource "allot_rate_limit" "monitoring" {
  principal = "monitoring"
}
