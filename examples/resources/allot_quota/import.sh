# A quota is imported by its role.
terraform import allot_quota.ml eng/ml
