"""The proxy's side of query rewrite: the rewriter's datamap index, rewrites in a process of their own, timeseries() as Spark SQL."""
