"""The datamap advisor's pure planning: candidates, extensions, profiles, workload."""
