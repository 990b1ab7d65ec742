"""Online audits of datamap answers: sampled and AUDIT DATAMAP runs against Spark."""
