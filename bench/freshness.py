"""Freshness guard figures (its added latency and its listing costs), measured in one run.

Part 1, in-process: the guard's added latency per datamap-answered query, FreshnessGuard.check
over one base table whose files are real files on local disk, covered by the datamap:
  unchanged    the hot path (one stat per directory, the diff memoised)
  after write  the first look after a new file (the directory read again, the diff redone)
for 1, 100 and 1,000 files in one directory and 1,000 files in 100 partition directories.
Target: unchanged p50 <= 2 ms at 1,000 files.

Part 2, end to end through an embedded `python -m proxy serve` (Spark local[2]), PyHive,
one table of --rows rows in --files parquet files, one aggregate datamap:
  base         datamap.rewrite.enabled=false: Spark on the base table
  hit          the datamap answers (guard on, nothing new), serving tier off: Spark reads it
  served       the same, answered in-process by the serving tier (result cache off)
  compensated  right after an INSERT straight to Spark: datamap UNION ALL the new file,
               on Spark ("compensated on spark") and in-process by the serving tier
               ("compensated served"); "read new files" is DuckDB reading the new file
               alone (then wait for the background refresh, and again)
Target: compensated served <= 3 x served + read new files.
Per mode the median of --reps runs; rows of every mode must equal base's.

    python bench/freshness.py [--files 200] [--rows 20000000] [--reps 7] [--skip-e2e]
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

from proxy.datamaps.freshness.guard import Covered, FreshnessGuard  # noqa: E402


def p(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def guard_cost(root: Path, files: int, dirs: int, loops: int = 2000) -> tuple[float, float, float]:
    """(unchanged p50 µs, unchanged p99 µs, first look after a write µs)."""
    table = root / f"t{files}x{dirs}"
    paths = []
    for d in range(dirs):
        sub = table / f"p={d}" if dirs > 1 else table
        sub.mkdir(parents=True, exist_ok=True)
        for i in range(files // dirs):
            f = sub / f"part-{i:05d}.parquet"
            f.write_bytes(b"x")
            paths.append(str(f))
    past = time.time() - 60
    for dirpath, _, _ in os.walk(table):
        os.utime(dirpath, (past, past))
    guard = FreshnessGuard(lambda _t: {"hive": False, "roots": [f"file:{table}"]},
                           lambda _t: None)
    guard.load_layouts(["db.t"])
    covered = Covered({"db.t": frozenset(paths)}, 0.0, None)
    assert guard.check("db.dm", covered).kind == "fresh"
    times = []
    for _ in range(loops):
        t0 = time.perf_counter_ns()
        guard.check("db.dm", covered)
        times.append((time.perf_counter_ns() - t0) / 1000)
    after = []
    for i in range(20):
        (table / f"new-{i}.parquet").write_bytes(b"x")
        t0 = time.perf_counter_ns()
        v = guard.check("db.dm", covered)
        after.append((time.perf_counter_ns() - t0) / 1000)
        assert v.kind == "new", v
    return statistics.median(times), p(times, 0.99), statistics.median(after)


def part1() -> None:
    print("guard cost per datamap-answered query (one base table, local disk)")
    print(f"{'files':>6} {'dirs':>5} {'unchanged p50':>14} {'p99':>9} {'after write p50':>16}")
    with tempfile.TemporaryDirectory() as tmp:
        for files, dirs in ((1, 1), (100, 1), (1000, 1), (1000, 100)):
            p50, p99, after = guard_cost(Path(tmp), files, dirs)
            print(f"{files:>6} {dirs:>5} {p50:>11.1f} µs {p99:>6.1f} µs {after:>13.1f} µs")
    print("target: unchanged p50 <= 2000 µs at 1,000 files")


def timed(cur, sql):
    t0 = time.perf_counter()
    cur.execute(sql)
    rows = cur.fetchall()
    return time.perf_counter() - t0, sorted(map(tuple, rows), key=repr)


def explain(cur, sql) -> str:
    cur.execute("EXPLAIN " + sql)
    return cur.fetchall()[0][0]


def compensations(cur, query: str, results: dict, table_dir: Path) -> None:
    """Right after an outside write: the compensated answer in-process, then on Spark
    (each checked against the base tables; the in-process one first, as the background
    refresh soon ends the compensation), and the time DuckDB takes to read the new file
    (the newest in `table_dir`)."""
    import duckdb
    cur.execute("SET datamap.serving.enabled=true")
    plan = explain(cur, query)
    if "Served by: local engine (compensated with new base files)" not in plan:
        print("compensation not served:", [l for l in plan.splitlines()
                                           if l.startswith(("Served", "Freshness", "Skipped"))])
        return
    seconds, served_rows = timed(cur, query)
    results.setdefault("compensated served", []).append(seconds)
    cur.execute("SET datamap.serving.enabled=false")
    if "compensated from" in explain(cur, query):
        seconds, rows = timed(cur, query)
        results.setdefault("compensated on spark", []).append(seconds)
    else:
        rows = served_rows
    cur.execute("SET datamap.serving.enabled=true")
    new = [str(max((f for f in table_dir.glob("*.parquet")), key=lambda f: f.stat().st_mtime))]
    t0 = time.perf_counter()
    duckdb.connect().execute(f"SELECT count(*), max(k), max(v) FROM read_parquet({new!r})"
                             ).fetchall()
    results.setdefault("read new files", []).append(time.perf_counter() - t0)
    cur.execute("SET datamap.rewrite.enabled=false")
    _, base_rows = timed(cur, query)
    cur.execute("SET datamap.rewrite.enabled=true")
    if rows != base_rows or served_rows != base_rows:
        print("MISMATCH in compensated")


def part2(files: int, reps: int, n_rows: int) -> None:
    from tests.support.clients import RawHS2, pyhive_connect
    from tests.support.proxy_proc import ServeProc
    query = "SELECT k, sum(v), count(*), max(v) FROM s GROUP BY k"
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        srv = ServeProc(work, work / "state", fast_start=False)
        spark = RawHS2("127.0.0.1", srv.engine_port)
        conn = pyhive_connect("127.0.0.1", srv.port)
        cur = conn.cursor()
        try:
            cur.execute("CREATE TABLE s (k STRING, v BIGINT) USING parquet")
            cur.execute(f"INSERT INTO s SELECT /*+ REPARTITION({files}) */ "
                        f"concat('k', CAST(id % 50 AS STRING)), id FROM range({n_rows})")
            cur.execute("CREATE DATAMAP agg USING 'mv' AS SELECT k, sum(v), count(*), max(v) "
                        "FROM s GROUP BY k")
            cur.execute("SET datamap.cache.enabled=false")
            results: dict[str, list[float]] = {}
            want = None

            def run(mode: str, settings: list[str]):
                nonlocal want
                for s in settings:
                    cur.execute(s)
                timed(cur, query)
                for _ in range(reps):
                    seconds, rows = timed(cur, query)
                    results.setdefault(mode, []).append(seconds)
                    if mode == "base":
                        want = rows
                    elif rows != want:
                        print(f"MISMATCH in {mode}")

            run("base", ["SET datamap.rewrite.enabled=false"])
            run("hit", ["SET datamap.rewrite.enabled=true", "SET datamap.serving.enabled=false"])
            run("served", ["SET datamap.serving.enabled=true"])
            for i in range(reps):
                spark.execute(f"INSERT INTO s VALUES ('k{i}', {i})")
                compensations(cur, query, results, work / "state" / "warehouse" / "s")
                deadline = time.monotonic() + 120
                while "base table files unchanged" not in explain(cur, query):
                    if time.monotonic() > deadline:
                        raise SystemExit("the background refresh did not catch up")
                    time.sleep(0.5)
            print(f"\nend to end, {n_rows:,} rows in {files} files, PyHive execute+fetchall, "
                  f"median of {reps}")
            base = statistics.median(results["base"])
            for mode, xs in results.items():
                m = statistics.median(xs)
                print(f"{mode:>22} p50 {m * 1000:8.1f} ms   base/mode {base / m:6.1f}x")
            if results.get("compensated served") and results.get("read new files"):
                target = 3 * statistics.median(results["served"]) + statistics.median(
                    results["read new files"])
                print(f"target: compensated served <= 3 x served + read new files = "
                      f"{target * 1000:.1f} ms")
        finally:
            conn.close()
            spark.close()
            srv.kill()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--rows", type=int, default=20_000_000)
    ap.add_argument("--skip-e2e", action="store_true")
    args = ap.parse_args(argv)
    part1()
    if not args.skip_e2e:
        part2(args.files, args.reps, args.rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
