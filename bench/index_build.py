"""Index datamap build cost (pipeline/indexes.py), measured in one run on a local
SparkSession: a Parquet table and a CSV table of the same rows (--rows rows in --files
files, 12 columns), and for each:

  scan     one read of the files computing nothing but a count per file of every column
           (what any index build must at least do: read and decode every row);
  minmax   the build job with minmax on 10 columns;
  +bloom   the build job with minmax on 10 columns and a bloom filter on `id`
           (BLOOM_SIZE = rows per file, BLOOM_FPP = 0.00001, CarbonData's default).

Prints seconds per GB of input files and the ratios to `scan` (medians of --reps).

    python bench/index_build.py [--rows 2000000] [--files 8] [--reps 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipeline import list_files  # noqa: E402
from pipeline.indexes import BloomSpec, build  # noqa: E402
from rewriter.prune import bloom  # noqa: E402

MINMAX = ["id", "k", "a", "b", "c", "d", "e", "s", "day", "amount"]


def make_tables(spark, root: Path, rows: int, files: int) -> dict[str, str]:
    data = spark.range(0, rows, 1, files).selectExpr(
        "id", "CAST(id % 1000 AS INT) AS k", "id * 3 AS a", "CAST(id % 77 AS DOUBLE) AS b",
        "CAST(id % 13 AS SMALLINT) AS c", "id % 100003 AS d", "CAST(id / 7 AS INT) AS e",
        "concat('name-', CAST(id % 50000 AS STRING)) AS s",
        "date_add(DATE'2020-01-01', CAST(id % 1500 AS INT)) AS day",
        "CAST(id % 99991 AS DECIMAL(12,2)) AS amount", "uuid() AS u", "rand() AS r")
    out = {}
    for fmt in ("parquet", "csv"):
        name = f"bench_idx.t_{fmt}"
        opts = "OPTIONS (header 'true')" if fmt == "csv" else ""
        cols = ", ".join(f"{f.name} {f.dataType.simpleString()}" for f in data.schema.fields)
        spark.sql(f"CREATE TABLE {name} ({cols}) USING {fmt} {opts} "
                  f"LOCATION '{root / fmt}'")
        data.write.insertInto(name)
        out[fmt] = name
    return out


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F
    root = Path(tempfile.mkdtemp(prefix="bench-index-"))
    spark = (SparkSession.builder.master("local[2]").appName("bench-index-build")
             .config("spark.sql.catalogImplementation", "in-memory")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.warehouse.dir", str(root / "warehouse"))
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark.sql("CREATE DATABASE bench_idx")
        tables = make_tables(spark, root, args.rows, args.files)
        m, k = bloom.size_for(args.rows // args.files, 0.00001)
        print(f"{args.rows} rows, {args.files} files; bloom m={m} bits ({m // 8 >> 10} KiB) "
              f"k={k} per file")
        print(f"{'table':8} {'GB':>6} {'scan s/GB':>10} {'minmax s/GB':>12} "
              f"{'+bloom s/GB':>12} {'minmax/scan':>12} {'+bloom/scan':>12}")
        for fmt, table in tables.items():
            files = list_files(spark, table)
            gb = sum(os.path.getsize(f[len("file:"):]) for f in files) / 1e9
            cols = spark.table(table).columns

            def scan():
                spark.table(table).groupBy("_metadata.file_path").agg(
                    *[F.count(c) for c in cols]).collect()
            runs = {"scan": [], "minmax": [], "bloom": []}
            for _ in range(args.reps):
                runs["scan"].append(timed(scan))
                runs["minmax"].append(timed(lambda: build(spark, table, files, MINMAX, [])))
                runs["bloom"].append(timed(lambda: build(spark, table, files, MINMAX,
                                                         [BloomSpec("id", m, k)])))
            med = {key: statistics.median(v) for key, v in runs.items()}
            print(f"{fmt:8} {gb:6.3f} {med['scan'] / gb:10.1f} {med['minmax'] / gb:12.1f} "
                  f"{med['bloom'] / gb:12.1f} {med['minmax'] / med['scan']:12.2f} "
                  f"{med['bloom'] / med['scan']:12.2f}")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
