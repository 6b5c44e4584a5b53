# An ACL policy is imported by its name.
terraform import allot_acl_policy.eng_frameworks eng-frameworks
