"""The proxy's side of query rewrite: candidates, isolated rewrites, Spark SQL."""
