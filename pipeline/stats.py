"""Sampled statistics for the datamap advisor: a table's row count and the estimated number
of distinct combinations of some expressions over it (the rows a datamap grouping by them
would have).

`TableSample(spark, table, alias, sample_rows)` counts the table once and keeps a Bernoulli
sample of about `sample_rows` rows (persisted until `close()`); `distinct(exprs)` groups the
sample by the expressions and scales the sample's distinct count up to the table with the
GEE estimator (Charikar, Chaudhuri, Motwani, Narasayya 2000): values seen once in a sample
of n out of N rows stand for sqrt(N/n) values each, values seen more often for themselves.
Its error is bounded by a factor of about sqrt(N/n) on any data, which is what an advisor
comparing a grouping's rows with its table's needs (order of magnitude, never zero). A
sample that is the whole table gives the exact count. Blocking; no proxy import.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Iterable

from pipeline.files import quote_table

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SEED = 17


def gee(distinct_in_sample: int, singletons: int, sample_rows: int, table_rows: int) -> int:
    """Distinct values of the table estimated from its sample (GEE), within [d, N]."""
    if sample_rows <= 0 or table_rows <= 0:
        return 0
    if sample_rows >= table_rows:
        return distinct_in_sample
    est = math.sqrt(table_rows / sample_rows) * singletons + (distinct_in_sample - singletons)
    return int(min(table_rows, max(distinct_in_sample, round(est))))


class TableSample:
    def __init__(self, spark: "SparkSession", table: str, alias: str, sample_rows: int):
        self.table = table
        df = spark.table(quote_table(table))
        self.rows = df.count()
        fraction = 1.0 if self.rows <= sample_rows else sample_rows / self.rows
        sample = df if fraction >= 1.0 else df.sample(False, fraction, SEED)
        self._df = sample.alias(alias).persist()
        self.sample_rows = self._df.count()

    def distinct(self, exprs: Iterable[str]) -> int:
        from pyspark.sql import functions as F
        exprs = sorted(exprs)
        if not exprs or self.rows == 0:
            return min(1, self.rows)
        names = [f"e{i}" for i in range(len(exprs))]
        groups = self._df.selectExpr(*(f"{e} AS {n}" for e, n in zip(exprs, names))) \
            .groupBy(*names).count()
        row = groups.agg(F.count(F.lit(1)).alias("d"),
                         F.sum(F.when(F.col("count") == 1, 1).otherwise(0)).alias("f1")).first()
        return gee(int(row["d"] or 0), int(row["f1"] or 0), self.sample_rows, self.rows)

    def close(self) -> None:
        self._df.unpersist()
