"""Distinct-count error and time (docs/distinct.md), measured in one run of a local Spark
(a script, not a test).

    python bench/distinct.py [--cardinalities 1000,10000,100000,1000000] [--groups 8]
                             [--segments 4] [--lgk 12] [--copies 2]

For each cardinality N a base table of N * copies rows is written to Parquet: value
`v = id % N` (each value `copies` times), group `(id div 3) % groups` (a value falls in
several groups), segment `id % segments` (a value's copies fall in several segments, so
segment sketches overlap, as an incremental datamap's do). Per group it compares with the
exact count(DISTINCT v):
  spark    approx_count_distinct(v) on the base table (HLL++, relativeSD 0.05)
  sketch   a datamap of hll_sketch_agg(v, lgk) per (segment, group), queried with
           hll_sketch_estimate(hll_union_agg(s)) per group: what the rewrite sends
           with SET datamap.rewrite.approximate=true
and prints the median and max relative error over the groups and the total, and the median
time of --reps runs of each query (the sketch build is timed once: the datamap refresh).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path


def timed(spark, sql: str, reps: int):
    """(rows of the last run, median seconds)."""
    times, rows = [], None
    for _ in range(reps):
        t0 = time.perf_counter()
        rows = spark.sql(sql).collect()
        times.append(time.perf_counter() - t0)
    return rows, statistics.median(times)


def errors(est: dict, exact: dict) -> tuple[float, float]:
    rel = [abs(est[g] - exact[g]) / exact[g] for g in exact]
    return statistics.median(rel), max(rel)


def one(spark, root: Path, n: int, args) -> dict:
    path = str(root / f"base_{n}")
    spark.range(n * args.copies).selectExpr(
        f"id % {n} AS v", f"CAST((id DIV 3) % {args.groups} AS INT) AS g",
        f"CAST(id % {args.segments} AS INT) AS seg").write.mode("overwrite").parquet(path)
    spark.read.parquet(path).createOrReplaceTempView("base")
    q = "SELECT g, {agg} AS c FROM base GROUP BY g UNION ALL SELECT -1, {agg} FROM base"
    exact, t_exact = timed(spark, q.format(agg="count(DISTINCT v)"), args.reps)
    approx, t_spark = timed(spark, q.format(agg="approx_count_distinct(v)"), args.reps)
    t0 = time.perf_counter()
    spark.sql(f"SELECT seg, g, hll_sketch_agg(v, {args.lgk}) AS s FROM base GROUP BY seg, g") \
        .write.mode("overwrite").parquet(str(root / f"dm_{n}"))
    t_build = time.perf_counter() - t0
    spark.read.parquet(str(root / f"dm_{n}")).createOrReplaceTempView("dm")
    sketch, t_sketch = timed(
        spark, "SELECT g, hll_sketch_estimate(hll_union_agg(s)) AS c FROM dm GROUP BY g "
               "UNION ALL SELECT -1, hll_sketch_estimate(hll_union_agg(s)) FROM dm", args.reps)
    ex = {r[0]: r[1] for r in exact}
    sp_med, sp_max = errors({r[0]: r[1] for r in approx}, ex)
    sk_med, sk_max = errors({r[0]: r[1] for r in sketch}, ex)
    return dict(n=n, per_group=statistics.median(v for g, v in ex.items() if g >= 0),
                sp_med=sp_med, sp_max=sp_max, sk_med=sk_med, sk_max=sk_max,
                t_exact=t_exact, t_spark=t_spark, t_sketch=t_sketch, t_build=t_build)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cardinalities", default="1000,10000,100000,1000000")
    p.add_argument("--groups", type=int, default=8)
    p.add_argument("--segments", type=int, default=4)
    p.add_argument("--copies", type=int, default=2)
    p.add_argument("--lgk", type=int, default=12)
    p.add_argument("--reps", type=int, default=3)
    args = p.parse_args(argv)
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("bench-distinct")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    print(f"groups={args.groups} segments={args.segments} copies={args.copies} "
          f"lgConfigK={args.lgk}; relative error over the groups and the total "
          "(median / max), query time median of "
          f"{args.reps} in ms")
    print(f"{'N':>8} {'per grp':>8} | {'spark HLL++ err':>17} | {'sketch err':>17} | "
          f"{'exact':>7} {'spark':>7} {'sketch':>7} {'build':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.cardinalities.split(",")):
            r = one(spark, Path(tmp), n, args)
            print(f"{r['n']:>8} {r['per_group']:>8.0f} | "
                  f"{r['sp_med']:>7.2%} / {r['sp_max']:>7.2%} | "
                  f"{r['sk_med']:>7.2%} / {r['sk_max']:>7.2%} | {r['t_exact'] * 1e3:>7.0f} "
                  f"{r['t_spark'] * 1e3:>7.0f} {r['t_sketch'] * 1e3:>7.0f} "
                  f"{r['t_build'] * 1e3:>7.0f}", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
