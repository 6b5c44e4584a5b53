# A role is imported by its name.
terraform import allot_role.ml eng/ml
