"""What index pruning costs on the decision path (proxy/datamaps/indexes/pruning.py), per query, in
µs: the median of many runs in one process, for a table of 200 files x 100 minmax columns
plus one bloom column (exact-set membership standing in for the bloom filter). Files are
real (empty) local files, so the stat() before skipping each one is measured too.

    python bench/prune.py [--runs 300]
    python bench/prune.py --spark [--files 200]   # what the pruning saves on Spark

--spark: a Parquet table and a CSV table of `--files` files (ids clustered per file, as
data loaded in time order is), a needle query run as written (Spark's own Parquet
statistics: row-group min/max pushed down, but every file's footer is read) and as pruned
(one file listed), best of 5 runs each, as ratios.

Rows: a query on a table without indexes (the cost every other query pays: one parse),
a needle (one file read: 199 files stat()ed and listed), a range on a minmax column, an
IN list on the bloom column, and a query whose filter prunes nothing.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proxy.datamaps.indexes.pruning import Pruner, TableShape  # noqa: E402
from rewriter.prune.filestats import ColumnStats, FileStats  # noqa: E402

FILES, COLUMNS = 200, 100
QUERIES = {
    "no index on the table": "SELECT c1, count(*) FROM other WHERE c2 = 5 GROUP BY c1",
    "needle (minmax)": "SELECT * FROM t WHERE c0 = 123456",
    "range (minmax)": "SELECT c1, sum(c2) FROM t WHERE c0 BETWEEN 20000 AND 60000 GROUP BY c1",
    "IN list (bloom)": "SELECT * FROM t WHERE id IN (1000001, 5000003, 9000007)",
    "nothing pruned": "SELECT * FROM t WHERE c5 >= 0",
}


def info(name: str, kind: str, columns: tuple):
    """An index datamap as the store describes it (IndexInfo)."""
    return SimpleNamespace(db="db", name=name, table="db.t", kind=kind, columns=columns,
                           enabled=True)


class Members:
    def __init__(self, values):
        self.values = frozenset(values)

    def might_contain(self, value):
        return value in self.values


class Store:
    def __init__(self, root: Path):
        self.stats, self.identity = {}, {}
        for i in range(FILES):
            f = root / f"part-{i:05d}.csv"
            f.touch()
            st = os.stat(f)
            path = f"file:{f}"
            self.identity[path] = (st.st_size, st.st_mtime_ns)
            cols = {f"c{c}": ColumnStats(1000 * i + c, 1000 * i + c + 999, 0)
                    for c in range(COLUMNS)}
            cols["id"] = ColumnStats(nulls=0, bloom=Members(
                range(i * 1_000_000 // 20, i * 1_000_000 // 20 + 5000)))
            self.stats[path] = FileStats(path, 5000, cols)
        self.indexes = [info("t_mm", "minmax", tuple(f"c{c}" for c in range(COLUMNS))),
                        info("t_bloom", "bloomfilter", ("id",))]

    def indexes_on(self, table):
        return self.indexes if table == "db.t" else []

    def file_stats(self, table):
        return self.stats

    def file_identity(self, table):
        return self.identity


def on_spark(files: int) -> None:
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("bench-prune")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "4")
             .config("spark.sql.catalogImplementation", "in-memory").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as tmp:
        data = spark.range(0, files * 5000).selectExpr(
            "id", "id % 97 AS a", "concat('s', id % 1013) AS b", "rand(1) AS c")
        for kind in ("parquet", "csv"):
            where = f"{tmp}/{kind}"
            (data.repartitionByRange(files, "id").write.format(kind)
             .option("header", "true").save(where))
            opts = "OPTIONS (header 'true') " if kind == "csv" else ""
            spark.sql(f"CREATE TABLE b_{kind} (id BIGINT, a BIGINT, b STRING, c DOUBLE) "
                      f"USING {kind} {opts}LOCATION '{where}'")
            stats, identity = {}, {}
            for r in spark.sql(f"SELECT _metadata.file_path AS p, min(id) AS lo, max(id) AS hi, "
                               f"count(*) AS n FROM b_{kind} GROUP BY 1").collect():
                stats[r.p] = FileStats(r.p, r.n, {"id": ColumnStats(r.lo, r.hi, 0)})
                st = os.stat(r.p[len("file:"):])
                identity[r.p] = (st.st_size, st.st_mtime_ns)
            store = SimpleNamespace(
                indexes_on=lambda t: [info("b_mm", "minmax", ("id",))],
                file_stats=lambda t: stats, file_identity=lambda t: identity)
            columns = {"id": "bigint", "a": "bigint", "b": "string", "c": "double"}
            sql = f"SELECT * FROM b_{kind} WHERE id = {files * 5000 // 2 + 17}"
            pruned = Pruner(store, lambda t: TableShape(columns)).prune(sql, "default")
            full, less = (_best(spark, q) for q in (sql, pruned.sql))
            print(f"  {kind:8s} needle over {files} files: as written {full * 1e3:7.0f} ms, "
                  f"pruned {less * 1e3:6.0f} ms ({full / less:4.1f}x; {pruned.lines[0]})")
    spark.stop()


def _best(spark, sql: str) -> float:
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        spark.sql(sql).collect()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--spark", action="store_true")
    ap.add_argument("--files", type=int, default=200)
    args = ap.parse_args()
    if args.spark:
        return on_spark(args.files)
    columns = {f"c{c}": "bigint" for c in range(COLUMNS)} | {"id": "bigint"}
    with tempfile.TemporaryDirectory() as tmp:
        pruner = Pruner(Store(Path(tmp)), lambda t: TableShape(columns, "db.t_src"))
        print(f"{FILES} files x {COLUMNS} minmax columns + 1 bloom column; median of "
              f"{args.runs} runs")
        for label, sql in QUERIES.items():
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                out = pruner.prune(sql, "db")
                times.append(time.perf_counter() - t0)
            kept = out.lines if out else ("not pruned",)
            print(f"  {label:24s} {statistics.median(times) * 1e6:9.0f} µs   {'; '.join(kept)}")


if __name__ == "__main__":
    main()
