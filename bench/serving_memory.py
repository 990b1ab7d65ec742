"""Memory high-water mark of the serving tier's largest joins at TPC-H scale, measured in one
run of the real translation and engine (proxy/serving), no Spark:

  dimension  a datamap of revenue per order (l_orderkey, ~1.5M rows at SF1) joined with
             the base table orders read whole (~1.5M rows), grouped by o_orderpriority: the
             hash join of two relations of the order table's size;
  narrow     the narrow-window union: a datamap of lineitem from 1995 on, per (returnflag,
             shipmode, month), UNION ALL the base rows of lineitem before 1995 aggregated the
             same way (lineitem read whole: ~230 MB of Parquet at SF1), re-aggregated.

The datamaps' segment files are written by DuckDB from the same data (their bytes do not
change what the engine holds). Each query runs on the engine as `[serving]` configures it
(threads, memory_limit), while a second cursor samples DuckDB's own accounting
(duckdb_memory()) every 10 ms; the process's peak RSS is the kernel's (VmHWM).

    python bench/serving_memory.py [--data-dir /work/bench-data/sf1] [--memory-limit 1GB]
                                   [--threads 2]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckdb  # noqa: E402
import sqlglot  # noqa: E402

from proxy.serving.compensation import BaseTable  # noqa: E402
from proxy.serving.engine import LocalEngine  # noqa: E402
from proxy.serving.translate import translate  # noqa: E402

_TYPES = {"BIGINT": "bigint", "INTEGER": "int", "VARCHAR": "string", "DATE": "date",
          "DOUBLE": "double"}

DIMENSION = ("SELECT o.o_orderpriority AS p, CAST(SUM(m.rev) AS DECIMAL(25, 2)) AS rev, "
             "SUM(m.n) AS n FROM (SELECT l_orderkey, rev, n FROM tpch.by_order_table WHERE "
             "dm_segment_id IN ('0')) AS m JOIN tpch.orders AS o ON m.l_orderkey = "
             "o.o_orderkey GROUP BY o.o_orderpriority")
NARROW = ("SELECT l95.l_returnflag AS l_returnflag, CAST(SUM(l95.q) AS DECIMAL(25, 2)) AS q, "
          "SUM(l95.n) AS n FROM (SELECT l_returnflag, l_shipmode, m, q, n FROM "
          "tpch.l95_table WHERE dm_segment_id IN ('0') UNION ALL SELECT "
          "lineitem.l_returnflag AS l_returnflag, lineitem.l_shipmode AS l_shipmode, "
          "DATE_TRUNC('MONTH', lineitem.l_shipdate) AS m, SUM(lineitem.l_quantity) AS q, "
          "COUNT(*) AS n FROM tpch.lineitem AS lineitem WHERE NOT COALESCE("
          "lineitem.l_shipdate >= CAST('1995-01-01' AS DATE), FALSE) GROUP BY "
          "lineitem.l_returnflag, lineitem.l_shipmode, DATE_TRUNC('MONTH', "
          "lineitem.l_shipdate)) AS l95 GROUP BY l95.l_returnflag")
DATAMAPS = {
    "tpch.by_order_table": ("SELECT l_orderkey, SUM(l_extendedprice) AS rev, COUNT(*) AS n "
                            "FROM '{d}/lineitem.parquet' GROUP BY l_orderkey",
                            {"l_orderkey": "bigint", "rev": "decimal(25,2)", "n": "bigint"}),
    "tpch.l95_table": ("SELECT l_returnflag, l_shipmode, CAST(date_trunc('month', l_shipdate) "
                       "AS TIMESTAMP) AS m, SUM(l_quantity) AS q, COUNT(*) AS n FROM "
                       "'{d}/lineitem.parquet' WHERE l_shipdate >= DATE '1995-01-01' "
                       "GROUP BY ALL", {"l_returnflag": "string", "l_shipmode": "string",
                                        "m": "timestamp", "q": "decimal(25,2)", "n": "bigint"}),
}


def _spark_type(duck: str) -> str:
    return duck.lower() if duck.startswith("DECIMAL") else _TYPES[duck]


def _vmhwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def measure(engine: LocalEngine, sql: str, data: Path, segments: dict) -> dict:
    def table_of(full: str):
        name = full.rpartition(".")[2]
        path = str(data / f"{name}.parquet")
        cols = duckdb.sql(f"DESCRIBE SELECT * FROM '{path}'").fetchall()
        return BaseTable(full, "parquet", tuple((c, _spark_type(t)) for c, t, *_ in cols)), [path]
    plan = translate(sqlglot.parse_one(sql, read="spark"),
                     {t: cols for t, (_, cols) in DATAMAPS.items()},
                     lambda table, ids: [segments[table]], "UTC", table_of=table_of)
    probe = engine._db.cursor()        # DuckDB's own accounting, beside the running query
    peak, done = [0], threading.Event()

    def sample():
        while not done.is_set():
            used = probe.execute("SELECT sum(memory_usage_bytes) FROM duckdb_memory()"
                                 ).fetchone()[0] or 0
            peak[0] = max(peak[0], used)
            time.sleep(0.01)
    hwm_before = _vmhwm_mb()
    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    t0 = time.monotonic()
    try:
        rows = engine.run_blocking(plan)
    finally:
        done.set()
        sampler.join()
    return {"rows": len(rows), "ms": (time.monotonic() - t0) * 1000,
            "duckdb_peak_mb": peak[0] / 2**20, "rss_hwm_mb": _vmhwm_mb(),
            "rss_before_mb": hwm_before}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default="/work/bench-data/sf1")
    ap.add_argument("--memory-limit", default="1GB")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    data = Path(args.data_dir)
    with tempfile.TemporaryDirectory(prefix="serving-memory-") as tmp:
        segments = {}
        for table, (sql, _) in DATAMAPS.items():      # in a child: this RSS stays clean
            path = f"{tmp}/{table}.parquet"
            copy = f"COPY ({sql.format(d=data)}) TO '{path}' (FORMAT parquet)"
            subprocess.run([sys.executable, "-c", f"import duckdb; duckdb.sql({copy!r})"],
                           check=True)
            segments[table] = path
        print(f"before the engine: RSS high-water {_vmhwm_mb():.0f} MB")
        engine = LocalEngine(args.threads, args.memory_limit, 1)
        try:
            for name, sql in (("dimension", DIMENSION), ("narrow", NARROW)):
                got = measure(engine, sql, data, segments)
                print(f"{name:10s} {got['rows']} rows in {got['ms']:.0f} ms; DuckDB peak "
                      f"{got['duckdb_peak_mb']:.0f} MB (memory_limit {args.memory_limit}); "
                      f"process RSS high-water {got['rss_before_mb']:.0f} -> "
                      f"{got['rss_hwm_mb']:.0f} MB")
        finally:
            engine.close()


if __name__ == "__main__":
    main()
