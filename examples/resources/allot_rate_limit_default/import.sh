# A cluster has one default limit; its import ID is always "default".
terraform import allot_rate_limit_default.this default
