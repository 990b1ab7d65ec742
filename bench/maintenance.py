"""Datamap maintenance figures, measured in one run of `python -m proxy serve` (embedded
Spark, a temporary state dir), everything driven through the proxy with PyHive:

  full vs incremental: a lazy aggregate datamap over a base table of --rows rows (made with
      spark.range through the proxy). Full = the first REBUILD of a freshly created lazy
      datamap (nothing built yet), --reps times (create, rebuild, drop); incremental =
      REBUILD after appending --append-pct % new rows (only the new base segment is read),
      --reps times in a row on one datamap, as loads arrive in production: each adds one
      segment. Medians of each; target: incremental <= 10 % of full.
  INSERT latency: the same append INSERT into the base table with a non-lazy datamap on it
      (the client's INSERT returns after the datamap is refreshed) vs into a table of the
      same schema without datamaps, interleaved; the difference is what the datamap adds.

    python bench/maintenance.py [--rows 5000000] [--append-pct 1] [--reps 5] [--keep-state DIR]
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLS = "id BIGINT, k INT, g STRING, v DOUBLE"
AGG_SELECT = "SELECT k, g, sum(v), count(*), max(v) FROM big GROUP BY k, g"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def gen(table: str, start: int, end: int) -> str:
    """INSERT of ids [start, end) made by spark.range: ~100k groups (k, g)."""
    return (f"INSERT INTO {table} SELECT id, CAST(id % 100000 AS INT), "
            f"concat('g', CAST(id % 7 AS STRING)), CAST(id % 997 AS DOUBLE) / 4 "
            f"FROM range({start}, {end}, 1, 4)")


class Serve:
    def __init__(self, state: Path, log_path: Path):
        self.port = free_port()
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        env.update({"DATAMAP_PROXY_SPARK_DRIVER_MEMORY": "3g",
                    "DATAMAP_PROXY_SPARK_CONF": "spark.sql.shuffle.partitions=4"})
        self.log_path = log_path
        self._log = open(log_path, "wb")
        self.cwd = state.parent / "cwd"
        self.cwd.mkdir(exist_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "proxy", "serve", "--port", str(self.port),
             "--state-dir", str(state), "--spark-master", "local[2]"],
            cwd=self.cwd, env=env, stdin=subprocess.DEVNULL, stdout=self._log,
            stderr=subprocess.STDOUT, start_new_session=True)
        t0 = time.monotonic()
        while not re.search(r"\bready\b", log_path.read_text(errors="replace")):
            if self.proc.poll() is not None or time.monotonic() - t0 > 300:
                self.stop()
                sys.exit("proxy did not start:\n" + log_path.read_text(errors="replace")[-3000:])
            time.sleep(0.2)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(120)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
        self._log.close()


def timed(cur, sql: str) -> float:
    t0 = time.perf_counter()
    cur.execute(sql)
    if cur.description is not None:
        cur.fetchall()
    return time.perf_counter() - t0


def rows(cur, sql: str):
    cur.execute(sql)
    return cur.fetchall()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--append-pct", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--keep-state", metavar="DIR")
    a = ap.parse_args()
    from pyhive import hive

    tmp = Path(a.keep_state) if a.keep_state else Path(tempfile.mkdtemp(prefix="bench-maint-"))
    tmp.mkdir(parents=True, exist_ok=True)
    serve = Serve(tmp / "state", tmp / "serve.log")
    append = max(1, int(a.rows * a.append_pct / 100))
    try:
        conn = hive.connect(host="127.0.0.1", port=serve.port, username="bench")
        base_conn = hive.connect(host="127.0.0.1", port=serve.port, username="bench")
        cur, base = conn.cursor(), base_conn.cursor()
        base.execute("SET datamap.rewrite.enabled=false")
        cur.execute(f"CREATE TABLE big ({COLS}) USING parquet")
        cur.execute(f"CREATE TABLE plain ({COLS}) USING parquet")
        t = timed(cur, gen("big", 0, a.rows))
        print(f"base table: {a.rows:,} rows generated in {t:.1f} s; append = {append:,} rows "
              f"({a.append_pct:g} %)")
        next_id = a.rows

        full, incr = [], []
        create = f"CREATE DATAMAP lazy_agg USING 'mv' WITH DEFERRED REBUILD AS {AGG_SELECT}"
        for _ in range(a.reps):
            cur.execute(create)
            full.append(timed(cur, "REBUILD DATAMAP lazy_agg"))
            cur.execute("DROP DATAMAP lazy_agg")
        cur.execute(create)
        cur.execute("REBUILD DATAMAP lazy_agg")
        for i in range(a.reps):
            cur.execute(gen("big", next_id, next_id + append))
            next_id += append
            incr.append(timed(cur, "REBUILD DATAMAP lazy_agg"))
            segs = rows(cur, "SHOW SEGMENTS FOR TABLE lazy_agg_table")
            live = [s for s in segs if s[1] == "Success"]
            assert len(live) == i + 2, segs           # built + one refresh per append
        cur.execute("DROP DATAMAP lazy_agg")
        print(f"full REBUILD:        median {statistics.median(full):7.2f} s  "
              f"(runs: {', '.join(f'{x:.2f}' for x in full)})")
        print(f"incremental REBUILD: median {statistics.median(incr):7.2f} s  "
              f"(runs: {', '.join(f'{x:.2f}' for x in incr)})")
        ratio = statistics.median(incr) / statistics.median(full)
        print(f"incremental / full = {ratio:.1%}  (target <= 10 %)")

        t = timed(cur, f"CREATE DATAMAP agg_big USING 'mv' AS {AGG_SELECT}")
        print(f"CREATE DATAMAP agg_big (non-lazy, full build): {t:.2f} s")
        with_dm, without = [], []
        for _ in range(a.reps + 2):
            without.append(timed(cur, gen("plain", next_id, next_id + append)))
            with_dm.append(timed(cur, gen("big", next_id, next_id + append)))
            next_id += append
        mw, mo = statistics.median(with_dm), statistics.median(without)
        print(f"INSERT of {append:,} rows without a datamap: median {mo:6.2f} s; with agg_big: "
              f"median {mw:6.2f} s; added {mw - mo:+.2f} s ({mw / mo:.1f}x)")
        q = "SELECT g, sum(v), count(*), max(v) FROM big GROUP BY g"
        cur.execute("EXPLAIN " + q)
        plan = cur.fetchall()[0][0]
        assert "Hit mv DataMap: agg_big" in plan, plan[:500]
        t_dm = timed(cur, q)
        t_base = timed(base, q)
        same = sorted(rows(cur, q)) == sorted(rows(base, q))
        print(f"check: {q} answered from agg_big in {t_dm:.2f} s vs {t_base:.2f} s from the base "
              f"table; rows equal: {same}")
        conn.close()
        base_conn.close()
        return 0 if same else 1
    finally:
        serve.stop()


if __name__ == "__main__":
    sys.exit(main())
