"""The advisor's planning tests' schema and sizes: a star join (`J`) over s.sales and its
dimensions, with fixed row counts and distinct counts."""
from __future__ import annotations

from rewriter.advise.candidates import FixedSizes


ADVISE_SCHEMAS = {"s": {
    "sales": {"k": "int", "store": "int", "d": "date", "amt": "double", "q": "int",
              "txn": "string"},
    "dim": {"k": "int", "region": "string", "cat": "string", "brand": "string"},
    "stores": {"store": "int", "city": "string"}}}


J = "FROM s.sales JOIN s.dim ON sales.k = dim.k"


def Sizes(ndv=None):
    return FixedSizes(ROWS, dict(NDV, **(ndv or {})))


ROWS = {"s.sales": 1_000_000, "s.dim": 1000, "s.stores": 50}


NDV = {"dim.region": 10, "dim.cat": 20, "dim.brand": 300, "stores.city": 30,
       "sales.txn": 1_000_000, "sales.d": 1000}
