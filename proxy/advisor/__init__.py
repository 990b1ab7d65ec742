"""The datamap advisor: suggestions from the logged workload, what-if replay, their answers."""
