"""What keeping `<name>_table` live costs, measured in one run on a local SparkSession with
a Hive (Derby) metastore, as the embedded engine has:

  publish: CREATE OR REPLACE VIEW of the live segments (what a publish adds, one metastore
      write) vs ADD + DROP PARTITION (what making the metastore's partition list the
      visibility fact would take at a compaction: two writes).
  read: count(*) through the view vs the rewriter's IN-list read of the storage table
      (both prune to the same partitions).

    python bench/live_view.py [--segments 6] [--reps 15]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def median_ms(fa, fb, reps: int) -> tuple[float, float]:
    """Medians of `fa` and `fb`, run alternately (a noisy machine slows both alike)."""
    times: tuple[list[float], list[float]] = ([], [])
    for i in range(reps + 3):
        for fn, out in ((fa, times[0]), (fb, times[1])):
            t0 = time.perf_counter()
            fn(i)
            out.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times[0][3:]), statistics.median(times[1][3:])   # JVM warm-up


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--segments", type=int, default=6)
    ap.add_argument("--reps", type=int, default=15)
    a = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    tmp = tempfile.mkdtemp(prefix="bench-live-")
    spark = (SparkSession.builder.master("local[2]").appName("bench-live-view")
             .config("spark.sql.catalogImplementation", "hive")
             .config("spark.sql.warehouse.dir", f"{tmp}/warehouse")
             .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
             .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                     f"jdbc:derby:;databaseName={tmp}/metastore_db;create=true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.sql("CREATE TABLE s (k STRING, v BIGINT, dm_segment_id STRING) USING parquet "
              "PARTITIONED BY (dm_segment_id)")
    for i in range(a.segments):
        spark.sql(f"INSERT INTO s PARTITION (dm_segment_id='{i}') VALUES ('a', {i}), ('b', {i})")
    n = a.segments

    def ids(i: int) -> str:
        return f"'{i % n}', '{(i + 1) % n}'"
    view, parts = median_ms(
        lambda i: spark.sql(f"CREATE OR REPLACE VIEW s_live AS SELECT k, v, dm_segment_id "
                            f"FROM s WHERE dm_segment_id IN ({ids(i)})"),
        lambda i: (
            spark.sql(f"ALTER TABLE s ADD IF NOT EXISTS PARTITION (dm_segment_id='{1000 + i}')"),
            spark.sql(f"ALTER TABLE s DROP IF EXISTS PARTITION (dm_segment_id='{1000 + i}')")),
        a.reps)
    spark.sql(f"CREATE OR REPLACE VIEW s_live AS SELECT k, v, dm_segment_id FROM s "
              f"WHERE dm_segment_id IN ({ids(0)})")
    via_view, via_in = median_ms(
        lambda i: spark.sql("SELECT count(*) FROM s_live").collect(),
        lambda i: spark.sql(f"SELECT count(*) FROM (SELECT k, v FROM s "
                            f"WHERE dm_segment_id IN ({ids(0)})) x").collect(),
        a.reps)
    print(f"publish: replace view {view:.0f} ms, add+drop partition {parts:.0f} ms "
          f"(ratio {view / parts:.2f})")
    print(f"read:    through the view {via_view:.0f} ms, IN-list read {via_in:.0f} ms "
          f"(ratio {via_view / via_in:.2f})")
    spark.stop()


if __name__ == "__main__":
    main()
