"""The serving tier: datamap answers computed in-process by DuckDB over the datamap's
Parquet segments, and a result cache (docs/serving.md).

  translate.py  rewritten Spark AST -> DuckDB SQL with Spark's result types (allow-list)
  engine.py     the DuckDB database, its worker pool, timeouts, Spark's decimal division
  cache.py      the result cache, keyed on the files read
  tier.py       ServingTier: plan (decision path) and answer (the statement)
  mirror.py     local copies of segments on storage the proxy cannot open (mirror_disk.py:
                their directories)
"""
from proxy.serving.tier import Served, ServingTier
from proxy.serving.translate import ALLOWED, NotServable, Plan

__all__ = ["ALLOWED", "NotServable", "Plan", "Served", "ServingTier"]
