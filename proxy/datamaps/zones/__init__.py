"""The session time zone datamaps are computed under: policy and alignment."""
