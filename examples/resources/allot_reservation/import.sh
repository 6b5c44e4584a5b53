# A reservation is imported by its name.
terraform import allot_reservation.db db-node-1
