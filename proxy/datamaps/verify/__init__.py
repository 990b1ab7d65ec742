"""Online audits of datamap answers: sampled and AUDIT DATAMAP runs compared with Spark's."""
