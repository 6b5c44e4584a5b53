resource "allot_rate_limit_default" "this" {
  qps = 33.3
}
