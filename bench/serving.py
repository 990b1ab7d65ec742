"""Datamap serving figures, measured in one run of the embedded `python -m proxy serve`
(Spark local[2]) on a TPC-H dashboard workload (data from the `tpchgen-cli` PyPI package,
in the `bench` extra: `pip install -e '.[bench]'`):

  4 datamaps (star joins lineitem/orders/customer/nation/region, lineitem/part/supplier/nation,
  orders/customer, a lineitem rollup; time buckets timeseries(col, 'month') and year(col)) and
  10 dashboard queries over them (group-by subsets, filters on grouping columns, ORDER BY +
  LIMIT, sum/avg/count/min/max over decimals). Each query must hit its datamap (EXPLAIN says
  "Hit mv DataMap"); a miss is printed and left out of the ratios.

  Per query, the median of --reps runs after one warm-up, end to end at the client (PyHive
  execute + fetchall), all on one connection through the proxy, the mode switched by SET:
    base      datamap.rewrite.enabled=false: Spark on the base tables
    dm-spark  rewrite on, datamap.serving.enabled=false: the datamap read by Spark
    served    rewrite on, serving on, datamap.cache.enabled=false: the serving tier
    cached    serving and cache on, the same statement repeated
  Rows of every mode must equal base's (decimals exact, doubles within 1e-9 relative, order
  ignored unless the query has ORDER BY); a difference prints MISMATCH.
    proxy     beside served: the median of the same runs' time on the proxy itself, the
              sum of its TCLIService calls (bench/proxy_time.py, from the metrics endpoint):
              served minus proxy is the network and the client's decoding (PyHive's, of
              10k timestamps, some 60 ms whatever the proxy sends); n/a with --remote.
              The BI workload also times base's runs on the proxy (its calls forwarded to
              Spark, waiting for its answer) and reports base / served of the proxy's own
              times ("at proxy"): the ratio without the client's decoding, which is in
              both base and served (PyHive parses each TIMESTAMP value with strptime)

  Targets (SF1, 2 cores): median base / served >= 50x; served p50 <= 15 ms; cached p50
  <= 3 ms; no served query slower than dm-spark. A query outside the serving tier's
  allow-list (EXPLAIN: "Served by: spark (...)") measures the dm-spark path in served and
  cached too.

  --workload bi (or all) measures what BI tools send, over the same TPC-H data:
    - Superset's statements in both its engine specs (Apache Hive grains, Spark SQL
      `date_trunc` grains), exactly as its chart-data API wrote them for
      tests/fixtures/superset/statements.json, over `ss_orders` (lineitem x orders x
      customer x nation flattened, one row a line) and the datamaps SS_DATAMAPS;
    - the Tableau, Power BI and Looker corpora (tests/fixtures/rewriter/corpus/*.yaml, their
      time grains among them) over their own datamaps, each named <tool>_<datamap>.
    Per statement: EXPLAIN (hit? "Served by"?), then the median of --reps runs of base and
    served (serving on, cache off). It reports, per source, the share of the hits served
    in-process, the served p50 (in-process answers, no cache) and the median base / served
    over the hits, all from this one run; rows of served must equal base's (in any order:
    the tools order by a metric, and rows that tie on it may come in any order).

  --mirror puts Spark's warehouse on viewfs://, a Hadoop mount over a local directory that
  the proxy's Python cannot open (as HDFS or S3): served answers read the segment mirror's
  copies (docs/serving.md, "Mirrored segments"); compare its base / served with a run without.
  It also reports what each copy cost (the proxy log's "serving mirror: segment ... copied"
  lines: seconds, bytes) and, after the queries, a load's new segments: the time from the
  INSERT's return until every datamap of the loaded table is served from the mirror again.

  --remote runs the remote topology of deploy/local/start.sh instead (Hive metastore, Spark
  master + worker, a Spark Thrift Server executing on the worker, the proxy in remote mode
  with its pipeline session on the same cluster), its warehouse on viewfs:// with --mirror
  (every JVM reads the mount from HADOOP_CONF_DIR's core-site.xml). Base is then the Thrift
  server's answer (one executor core, spark.cores.max=1 as thrift-server.sh sets it).

    python bench/serving.py [--scale 1] [--data-dir DIR] [--reps 7] [--keep-state DIR]
                            [--installed VENV] [--workload dashboard|bi|all] [--mirror]
                            [--remote]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.proxy_time import ProxyClock, timed_both  # noqa: E402 - the proxy's own time
from bench.rows import same_rows, tied_at_limit, timed  # noqa: E402 - one row comparison for benches
from tests.support.proxy_proc import ServeProc  # noqa: E402 - the tests' harness

TABLES = ("region", "nation", "customer", "supplier", "part", "partsupp", "orders", "lineitem")

SALES = ("lineitem JOIN orders ON l_orderkey = o_orderkey JOIN customer ON o_custkey = c_custkey "
         "JOIN nation ON c_nationkey = n_nationkey JOIN region ON n_regionkey = r_regionkey")
PARTS = ("lineitem JOIN part ON l_partkey = p_partkey JOIN supplier ON l_suppkey = s_suppkey "
         "JOIN nation ON s_nationkey = n_nationkey")
ORDERS = "orders JOIN customer ON o_custkey = c_custkey"
REVENUE = "l_extendedprice * (1 - l_discount)"

DATAMAPS = {
    "dm_sales_month": f"""SELECT r_name, n_name, timeseries(o_orderdate, 'month') AS order_month,
        sum({REVENUE}) AS revenue, sum(l_quantity) AS qty, avg(l_discount) AS avg_disc,
        count(*) AS lines, min(l_extendedprice) AS min_price, max(l_extendedprice) AS max_price
        FROM {SALES} GROUP BY r_name, n_name, timeseries(o_orderdate, 'month')""",
    "dm_lineitem_flags": f"""SELECT l_returnflag, l_linestatus, l_shipmode,
        year(l_shipdate) AS ship_year, sum(l_quantity) AS sum_qty,
        sum(l_extendedprice) AS sum_base, sum({REVENUE}) AS sum_disc_price,
        sum({REVENUE} * (1 + l_tax)) AS sum_charge, avg(l_quantity) AS avg_qty,
        avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc, count(*) AS lines
        FROM lineitem GROUP BY l_returnflag, l_linestatus, l_shipmode, year(l_shipdate)""",
    "dm_parts_supp": f"""SELECT p_mfgr, p_brand, n_name, sum(l_quantity) AS qty,
        sum(l_extendedprice) AS gross, avg(l_discount) AS avg_disc,
        min(p_retailprice) AS min_retail, max(p_retailprice) AS max_retail, count(*) AS lines
        FROM {PARTS} GROUP BY p_mfgr, p_brand, n_name""",
    "dm_orders_seg": f"""SELECT o_orderpriority, o_orderstatus, c_mktsegment,
        year(o_orderdate) AS order_year, count(*) AS orders, sum(o_totalprice) AS total,
        avg(o_totalprice) AS avg_total, min(o_totalprice) AS min_total,
        max(o_totalprice) AS max_total
        FROM {ORDERS} GROUP BY o_orderpriority, o_orderstatus, c_mktsegment, year(o_orderdate)""",
}

QUERIES = {
    "q01_region_year": f"""SELECT r_name, timeseries(o_orderdate, 'year') AS yr,
        sum({REVENUE}) AS revenue, count(*) AS lines FROM {SALES}
        GROUP BY r_name, timeseries(o_orderdate, 'year') ORDER BY r_name, yr""",
    "q02_top_asia": f"""SELECT n_name, sum({REVENUE}) AS revenue, max(l_extendedprice) AS top
        FROM {SALES} WHERE r_name = 'ASIA' GROUP BY n_name
        ORDER BY revenue DESC, n_name LIMIT 3""",
    "q03_month_1995": f"""SELECT timeseries(o_orderdate, 'month') AS m, avg(l_discount) AS disc,
        sum(l_quantity) AS qty, min(l_extendedprice) AS lo FROM {SALES}
        WHERE o_orderdate >= DATE '1995-01-01' AND o_orderdate < DATE '1996-01-01'
        GROUP BY timeseries(o_orderdate, 'month') ORDER BY m""",
    "q04_pricing_summary": f"""SELECT l_returnflag, l_linestatus, sum(l_quantity) AS sum_qty,
        sum(l_extendedprice) AS sum_base, sum({REVENUE}) AS sum_disc_price,
        sum({REVENUE} * (1 + l_tax)) AS sum_charge, avg(l_quantity) AS avg_qty,
        avg(l_extendedprice) AS avg_price, avg(l_discount) AS avg_disc, count(*) AS lines
        FROM lineitem WHERE year(l_shipdate) <= 1998
        GROUP BY l_returnflag, l_linestatus ORDER BY l_returnflag, l_linestatus""",
    "q05_shipmode_year": """SELECT l_shipmode, year(l_shipdate) AS y, count(*) AS lines,
        avg(l_quantity) AS avg_qty FROM lineitem WHERE l_shipmode IN ('MAIL', 'SHIP')
        GROUP BY l_shipmode, year(l_shipdate)""",
    "q06_mfgr": f"""SELECT p_mfgr, sum(l_extendedprice) AS gross, min(p_retailprice) AS lo,
        max(p_retailprice) AS hi, count(*) AS lines FROM {PARTS}
        GROUP BY p_mfgr ORDER BY p_mfgr""",
    "q07_brands_germany": f"""SELECT p_brand, sum(l_quantity) AS qty, avg(l_discount) AS disc
        FROM {PARTS} WHERE n_name = 'GERMANY' GROUP BY p_brand
        ORDER BY qty DESC, p_brand LIMIT 5""",
    "q08_segment_year": f"""SELECT c_mktsegment, year(o_orderdate) AS y, count(*) AS orders,
        avg(o_totalprice) AS avg_total FROM {ORDERS} WHERE o_orderstatus = 'F'
        GROUP BY c_mktsegment, year(o_orderdate) ORDER BY c_mktsegment, y""",
    "q09_priority": f"""SELECT o_orderpriority, sum(o_totalprice) AS total,
        min(o_totalprice) AS lo, max(o_totalprice) AS hi FROM {ORDERS}
        GROUP BY o_orderpriority""",
    "q10_building_kpi": f"""SELECT count(*) AS orders, sum(o_totalprice) AS total,
        avg(o_totalprice) AS avg_total FROM {ORDERS}
        WHERE c_mktsegment = 'BUILDING' AND year(o_orderdate) BETWEEN 1995 AND 1996""",
}

# Superset's table for tests/fixtures/superset/statements.json at TPC-H scale: a timestamp
# (the order date plus 3 h per line number: second to year grains all group something),
# 25 countries, 5 segments, 50 customer ids
SS_ORDERS_LOAD = """INSERT INTO default.ss_orders
    SELECT CAST(o_orderdate AS TIMESTAMP) + make_interval(0, 0, 0, 0, l_linenumber * 3, 0, 0),
           o_orderdate, n_name, c_mktsegment, CAST(o_custkey % 50 AS INT),
           CAST(l_quantity AS INT), CAST(l_extendedprice AS DECIMAL(10,2)),
           CAST(l_discount AS DOUBLE)
    FROM tpch.lineitem JOIN tpch.orders ON l_orderkey = o_orderkey
    JOIN tpch.customer ON o_custkey = c_custkey JOIN tpch.nation ON c_nationkey = n_nationkey"""
SS_DATAMAPS = {
    "ss_time": """SELECT ts, d, sum(amount), sum(qty), count(*), avg(price)
        FROM default.ss_orders GROUP BY ts, d""",
    "ss_dims": """SELECT country, category, customer_id, sum(amount), sum(qty), count(*),
        avg(price) FROM default.ss_orders GROUP BY country, category, customer_id""",
}
BI_TOOLS = ("tableau", "powerbi", "looker")

MODES = {
    "base": {"datamap.rewrite.enabled": "false"},
    "dm-spark": {"datamap.rewrite.enabled": "true", "datamap.serving.enabled": "false"},
    "served": {"datamap.rewrite.enabled": "true", "datamap.serving.enabled": "true",
               "datamap.cache.enabled": "false"},
    "cached": {"datamap.rewrite.enabled": "true", "datamap.serving.enabled": "true",
               "datamap.cache.enabled": "true"},
}


def generate(scale: float, data_dir: Path) -> Path:
    """TPC-H parquet at `scale` under data_dir/sf<scale>, generated unless already there."""
    out = data_dir / f"sf{scale:g}"
    if all((out / f"{t}.parquet").exists() for t in TABLES):
        print(f"data: reusing {out}")
        return out
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    # the generator installed beside this interpreter (the venv need not be activated)
    gen = Path(sys.executable).parent / "tpchgen-cli"
    subprocess.run([str(gen) if gen.exists() else "tpchgen-cli", "parquet", "-s", f"{scale:g}", "-o", str(out),
                    "--overwrite"], check=True)
    print(f"data: generated TPC-H SF{scale:g} in {time.monotonic() - t0:.1f} s -> {out}")
    return out


def load(cur, data: Path) -> None:
    """Tables in `tpch` created empty, then filled by INSERT through the proxy: a load the
    proxy sees (it cuts a segment), as a dashboard's ETL would do it."""
    cur.execute("CREATE DATABASE IF NOT EXISTS tpch")
    cur.execute("USE tpch")
    for t in TABLES:
        src = f"parquet.`{data / (t + '.parquet')}`"
        t0 = time.monotonic()
        cur.execute(f"CREATE TABLE {t} USING parquet AS SELECT * FROM {src} WHERE false")
        cur.execute(f"INSERT INTO {t} SELECT * FROM {src}")
        print(f"load {t}: {time.monotonic() - t0:.1f} s")


def hits(cur, name: str, sql: str, mirror: bool = False) -> bool:
    """Does `sql` hit a datamap? `mirror`: wait (up to 120 s) for its segments' copies."""
    deadline = time.monotonic() + (120 if mirror else 0)
    while True:
        cur.execute(f"EXPLAIN {sql}")
        head = "\n".join(str(r[0]) for r in cur.fetchall()).split("\n\n", 1)[0]
        if "not mirrored yet" not in head or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    if "Hit mv DataMap:" in head:
        served = [line for line in head.splitlines() if line.startswith("Served by:")]
        if served and served[0] != "Served by: local engine" + (" (mirror)" if mirror else ""):
            print(f"{name}: {served[0]}")      # outside the allow-list: Spark answers
        return True
    print(f"MISS {name}: excluded from the ratios\n    " + head.replace("\n", "\n    "))
    return False


def measure(cur, sql: str, reps: int, clock: ProxyClock | None = None
            ) -> dict[str, tuple[float, list]]:
    """{mode: (median ms, rows)}: each mode set by SET, one warm-up, then `reps` runs;
    "proxy": the served runs' median of the proxy's own time (None without a clock)."""
    out = {}
    for mode, settings in MODES.items():
        for k, v in settings.items():
            cur.execute(f"SET {k}={v}")
        _, rows = timed(cur, sql)
        samples, proxy = [], []
        for _ in range(reps):
            ms, own, again = timed_both(cur, sql, clock if mode == "served" else None)
            samples.append(ms)
            proxy += [own] if own is not None else []
            # without ORDER BY any order is Spark's answer too (DuckDB's threads vary it)
            if diff := same_rows(rows, again, "order by" in sql.lower()):
                print(f"MISMATCH {mode} repeat differs from its warm-up: {diff}")
        out[mode] = (statistics.median(samples), rows)
        if mode == "served":
            out["proxy"] = (statistics.median(proxy) if proxy else None, rows)
    return out


def bi_statements() -> tuple[dict[str, str], list[tuple[str, str, str, str]]]:
    """The BI workload: {datamap name: SELECT} and (source, name, database, statement)."""
    from tests.support.corpus import load_corpus
    from tests.support.superset import fixture

    datamaps = {name: sql for name, sql in SS_DATAMAPS.items()}
    statements = [(f"superset-{st['spec']}", st["chart"], "default", st["sql"])
                  for st in fixture()["statements"]]
    for case in load_corpus():
        if case.file not in BI_TOOLS or not case.must_hit:
            continue
        for name, sql in case.datamaps:
            datamaps[f"{case.file}_{name}"] = sql
        statements.append((case.file, case.id, case.current_db, case.query))
    return datamaps, statements


def bi_workload(cur, datamaps: dict[str, str], statements, reps: int,
                clock: ProxyClock | None = None) -> list[dict]:
    """Per statement: hit, how it was served, the base and served medians (ms) and the
    served and base runs' medians of the proxy's own time (None without a clock)."""
    out = []
    for name, sql in datamaps.items():
        t0 = time.monotonic()
        cur.execute(f"CREATE DATAMAP {name} USING 'mv' AS {sql}")
        print(f"datamap {name}: built in {time.monotonic() - t0:.1f} s", flush=True)
    modes = {m: MODES[m] for m in ("base", "served")}
    for source, name, db, sql in statements:
        cur.execute(f"USE {db}")
        for k, v in MODES["served"].items():
            cur.execute(f"SET {k}={v}")
        cur.execute(f"EXPLAIN {sql}")
        head = "\n".join(str(r[0]) for r in cur.fetchall()).split("\n\n", 1)[0]
        served_by = next((line[len("Served by: "):] for line in head.splitlines()
                          if line.startswith("Served by: ")), "")
        row = {"source": source, "name": name, "hit": "Hit mv DataMap:" in head,
               "served": served_by == "local engine", "how": served_by}
        if row["hit"]:
            r = {}
            for mode, settings in modes.items():
                for k, v in settings.items():
                    cur.execute(f"SET {k}={v}")
                try:
                    _, rows = timed(cur, sql)
                    runs = [timed_both(cur, sql, clock) for _ in range(reps)]
                    samples = [ms for ms, _, _ in runs]
                    own = [p for _, p, _ in runs if p is not None]
                except Exception as e:  # noqa: BLE001 - Spark refuses some shapes
                    r = {"error": f"{mode}: {str(e).splitlines()[0][:160]}"}
                    break
                r[mode] = (statistics.median(samples), rows)
                row[f"{mode}_proxy_ms"] = statistics.median(own) if own else None
            if "error" in r:
                row["error"] = r["error"]
            else:
                row["base_ms"], row["served_ms"] = r["base"][0], r["served"][0]
                row["proxy_ms"] = row["served_proxy_ms"]
                # unordered: these statements order by a metric, and rows that tie on it
                # come in any order, Spark's own runs included
                if diff := same_rows(r["base"][1], r["served"][1], False):
                    if tied_at_limit(r["base"][1], r["served"][1], sql):
                        print(f"tie {source} {name}: rows tying at the LIMIT differ, any of "
                              f"them is Spark's answer: {diff}")
                    else:
                        print(f"MISMATCH {source} {name} base vs served: {diff}")
        print(f"{source:16} {name:28} " + (
            ("error " + row["error"]) if "error" in row else
            f"{row['base_ms']:8.1f} {row['served_ms']:8.1f} ms (proxy's own "
            f"{_ms(row.get('base_proxy_ms'))} {_ms(row['proxy_ms'])})  {row['how']}"
            if row["hit"]
            else "no hit"), flush=True)
        out.append(row)
    return out


def bi_report(rows: list[dict]) -> None:
    print(f"\n{'BI source':16}{'stmts':>6}{'hits':>6}{'served':>8}{'share':>7}"
          f"{'served p50':>12}{'base/served':>13}{'proxy p50':>11}{'at proxy':>10}   (ms; "
          "served: in-process, no cache, client execute+fetchall; proxy: the proxy's own "
          "time of those runs; at proxy: base / served of the proxy's own times)")
    for source in list(dict.fromkeys(r["source"] for r in rows)) + ["all"]:
        mine = [r for r in rows if source in ("all", r["source"])]
        hits = [r for r in mine if r["hit"] and "error" not in r]
        served = [r for r in hits if r["served"]]
        share = len(served) / len(hits) if hits else float("nan")
        print(f"{source:16}{len(mine):6}{len(hits):6}{len(served):8}{share:7.0%}"
              f"{p50([r['served_ms'] for r in served]):12.1f}"
              f"{p50([r['base_ms'] / r['served_ms'] for r in hits]):12.1f}x"
              f"{_ms(p50([r['proxy_ms'] for r in served if r['proxy_ms'] is not None])):>11}"
              f"{p50([r['base_proxy_ms'] / r['proxy_ms'] for r in hits if at_proxy(r)]):9.1f}x")
    reasons: dict[str, int] = {}
    for r in rows:
        if r["hit"] and not r["served"] and "error" not in r:
            # the reason's head: "UNIXTOSTR", "JOINS clause", "COUNT(DISTINCT ...)"
            why = r["how"]
            if why.startswith("spark (") and why.endswith(")"):
                why = why[len("spark ("):-1]
            why = why.removeprefix("not served locally: ").split(" (")[0].split(" over ")[0]
            reasons[why] = reasons.get(why, 0) + 1
    print("hits not served in-process, by reason (the head of EXPLAIN's 'Served by'):")
    for how, n in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  {n:3}  {how}")
    errors = [r for r in rows if "error" in r]
    for r in errors:
        print(f"error (both left out): {r['source']} {r['name']}: {r['error']}")


def at_proxy(row: dict) -> bool:
    """Both of a hit's runs were timed on the proxy (not with --remote)."""
    return bool(row.get("proxy_ms") and row.get("base_proxy_ms"))


def p50(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1f}"


def report(results: dict[str, dict[str, tuple[float, list]]]) -> None:
    names = list(MODES)
    print(f"\n{'query':22}" + "".join(f"{m:>11}" for m in names)
          + f"{'base/served':>13}{'base/dm-spark':>15}{'proxy':>8}   (ms, median; client "
          "execute+fetchall; proxy: the proxy's own time of the served runs)")
    for q, r in results.items():
        ms = {m: r[m][0] for m in names}
        print(f"{q:22}" + "".join(f"{ms[m]:11.1f}" for m in names)
              + f"{ms['base'] / ms['served']:12.1f}x{ms['base'] / ms['dm-spark']:14.1f}x"
              + f"{_ms(r['proxy'][0]):>8}")
    col = {m: [r[m][0] for r in results.values()] for m in names}
    speed = [r["base"][0] / r["served"][0] for r in results.values()]
    speed_dm = [r["base"][0] / r["dm-spark"][0] for r in results.values()]
    slower = [q for q, r in results.items() if r["served"][0] > r["dm-spark"][0]]
    print(f"\nqueries that hit: {len(results)} of {len(QUERIES)}")
    print(f"median speed-up base / served:   {p50(speed):7.1f}x   (target >= 50x)")
    print(f"median speed-up base / dm-spark: {p50(speed_dm):7.1f}x")
    for m in names:
        print(f"{m:9} p50 {p50(col[m]):9.1f} ms   min {min(col[m], default=0):8.1f}"
              f"   max {max(col[m], default=0):8.1f}"
              + {"served": "   (target p50 <= 15 ms)", "cached": "   (target p50 <= 3 ms)"}
              .get(m, ""))
    print("served slower than dm-spark: " + (", ".join(slower) if slower else "none")
          + "  (queries Spark answers: noise either way)")


def viewfs(root: Path) -> dict[str, str]:
    """serve's environment for a warehouse at viewfs://benchwh/warehouse (over root/cluster)."""
    (root / "cluster").mkdir()
    return {"DATAMAP_PROXY_SPARK_CONF": "spark.sql.shuffle.partitions=4,spark.sql.warehouse."
            "dir=viewfs://benchwh/warehouse,spark.hadoop.fs.viewfs.mounttable.benchwh.link."
            f"/warehouse={(root / 'cluster').as_uri()}"}


class Topology:
    """deploy/local/start.sh's remote topology in `root`, proxy included: what main() asks
    of a ServeProc (port, ready_seconds, log_path, stop, kill)."""

    DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "local"

    def __init__(self, root: Path, mirror: bool):
        self.root = root
        self.env = {**os.environ, "PYTHON": sys.executable}
        if mirror:
            (root / "cluster").mkdir(parents=True)
            conf = root / "hadoop-conf"
            conf.mkdir()
            (conf / "core-site.xml").write_text(
                '<?xml version="1.0"?>\n<configuration>\n  <property><name>fs.viewfs.'
                f"mounttable.benchwh.link./warehouse</name><value>{(root / 'cluster').as_uri()}"
                "</value></property>\n</configuration>\n")
            self.env.update(WAREHOUSE="viewfs://benchwh/warehouse", HADOOP_CONF_DIR=str(conf))
        t0 = time.monotonic()
        proc = subprocess.run([str(self.DEPLOY / "start.sh"), str(root)], env=self.env,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            raise AssertionError(f"start.sh failed:\n{proc.stdout}{proc.stderr}")
        self.ready_seconds = time.monotonic() - t0
        self.port = int((root / "ports" / "proxy").read_text())
        self.log_path = root / "logs" / "proxy.log"

    def stop(self, timeout: float = 120) -> int:
        return subprocess.run([str(self.DEPLOY / "stop.sh"), str(self.root)], env=self.env,
                              capture_output=True, timeout=timeout).returncode

    def kill(self) -> None:
        self.stop()


COPIED = re.compile(r"serving mirror: segment (\S+) of (\S+) copied \((\d+) files, (\d+) bytes\) "
                    r"in ([\d.]+) s")


def mirror_copies(log_path: Path) -> list[tuple[str, str, int, int, float]]:
    """(segment, storage table, files, bytes, seconds) of every copy the proxy logged."""
    text = log_path.read_text(errors="replace") if log_path.exists() else ""
    return [(seg, table, int(n), int(b), float(sec))
            for seg, table, n, b, sec in COPIED.findall(text)]


def copies_report(copies: list[tuple[str, str, int, int, float]]) -> None:
    print("\nmirror copies (segment of storage table: files, bytes, seconds):")
    for seg, table, n, b, sec in copies:
        print(f"  {seg:>3} of {table:32} {n:3} files {b:10,} bytes {sec:7.3f} s")
    if copies:
        secs = [c[4] for c in copies]
        print(f"  per segment: median {p50(secs):.3f} s (min {min(secs):.3f}, max "
              f"{max(secs):.3f}), median {p50([c[3] for c in copies]):,.0f} bytes")


def publish_to_mirror(cur, table: str, values: str, queries: list[tuple[str, str]]) -> None:
    """One load of `table` publishes a new segment of each of its datamaps: the seconds
    from the INSERT's return until each query is served from the mirror again."""
    t0 = time.monotonic()
    cur.execute(f"INSERT INTO {table} {values}")
    loaded = time.monotonic()
    print(f"\nload into {table}: {loaded - t0:.1f} s (incremental refresh included)")
    for name, sql in queries:
        while True:
            cur.execute(f"EXPLAIN {sql}")
            head = "\n".join(str(r[0]) for r in cur.fetchall()).split("\n\n", 1)[0]
            if "Served by: local engine (mirror)" in head or time.monotonic() - loaded > 120:
                break
            time.sleep(0.1)
        print(f"{name}: served from the mirror {time.monotonic() - loaded:.2f} s after the "
              f"load returned" if "(mirror)" in head else f"{name}: NOT mirrored: {head}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--data-dir", help="where generated data is kept and reused "
                                       "(default: a temp dir, removed)")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--keep-state", help="state dir to use (default: a temp dir, removed)")
    ap.add_argument("--installed", metavar="VENV",
                    help="run the `datamap-proxy` installed in this virtual environment "
                         "(e.g. made by README's first command) instead of this checkout")
    ap.add_argument("--workload", choices=("dashboard", "bi", "all"), default="dashboard",
                    help="dashboard: the TPC-H dashboard queries; bi: what BI tools send "
                         "(Superset in both engine specs, Tableau, Power BI, Looker)")
    ap.add_argument("--mirror", action="store_true", help="the warehouse on viewfs://: "
                    "datamaps served from the segment mirror")
    ap.add_argument("--remote", action="store_true", help="the remote topology of "
                    "deploy/local/start.sh (metastore, Spark standalone, Thrift Server, the "
                    "proxy in remote mode) instead of the embedded serve")
    a = ap.parse_args(argv)
    if a.remote and (a.installed or a.keep_state):
        ap.error("--remote runs this checkout's deploy/local scripts in a temp dir: "
                 "no --installed or --keep-state")
    t_run = time.monotonic()
    tmp = tempfile.TemporaryDirectory(prefix="bench-serving-")
    data = generate(a.scale, Path(a.data_dir) if a.data_dir else Path(tmp.name) / "data")
    state = Path(a.keep_state) if a.keep_state else Path(tmp.name) / "state"
    try:
        if a.remote:
            srv = Topology(Path(tmp.name) / "topology", a.mirror)
        else:
            srv = ServeProc(Path(tmp.name), state, timeout=300, metrics=True, fast_start=False,
                            env={"DATAMAP_PROXY_SPARK_DRIVER_MEMORY": "4g",
                                 **(viewfs(Path(tmp.name)) if a.mirror else {})},
                            installed=Path(a.installed).resolve() if a.installed else None)
    except AssertionError as e:
        print(e, file=sys.stderr)
        return 1
    from pyhive import hive

    try:
        print(f"proxy ready in {srv.ready_seconds:.1f} s " + (
            "(remote topology: metastore, Spark standalone, Thrift Server, proxy)"
            if a.remote else "(Spark local[2])"))
        conn = hive.connect(host="127.0.0.1", port=srv.port, username="bench")
        cur = conn.cursor()
        port = getattr(srv, "metrics_port", None)       # the remote topology has none here
        clock = ProxyClock(port) if port else None
        load(cur, data)
        if a.workload in ("bi", "all"):
            bi_datamaps, bi_stmts = bi_statements()
            from tests.support.superset import fixture
            t0 = time.monotonic()
            cur.execute(fixture()["table"].replace("CREATE TABLE ", "CREATE TABLE default."))
            cur.execute(SS_ORDERS_LOAD)
            print(f"load default.ss_orders: {time.monotonic() - t0:.1f} s")
            bi_rows = bi_workload(cur, bi_datamaps, bi_stmts, a.reps, clock)
            cur.execute("USE tpch")
        for name, sql in (DATAMAPS if a.workload != "bi" else {}).items():
            t0 = time.monotonic()
            cur.execute(f"CREATE DATAMAP {name} USING 'mv' AS {sql}")
            cur.execute(f"SELECT count(*) FROM {name}_table")
            print(f"datamap {name}: built in {time.monotonic() - t0:.1f} s, "
                  f"{cur.fetchall()[0][0]} rows")
        results = {}
        for name, sql in (QUERIES if a.workload != "bi" else {}).items():
            if not hits(cur, name, sql, a.mirror):
                continue
            r = measure(cur, sql, a.reps, clock)
            ordered = "order by" in sql.lower()
            for mode in MODES:
                if mode != "base" and (diff := same_rows(r["base"][1], r[mode][1], ordered)):
                    print(f"MISMATCH {name} base vs {mode}: {diff}")
            print(f"{name}: " + ", ".join(f"{m} {r[m][0]:.1f} ms" for m in MODES)
                  + f" ({len(r['base'][1])} rows)", flush=True)
            results[name] = r
        if a.mirror and results:
            copies_report(mirror_copies(srv.log_path))
            for k, v in MODES["served"].items():
                cur.execute(f"SET {k}={v}")
            seen = len(mirror_copies(srv.log_path))
            # one order: a new segment of dm_orders_seg (orders is its fact table)
            publish_to_mirror(cur, "orders", "VALUES (6000001, 1, 'F', 123.45, "
                              "DATE'1998-07-01', '1-URGENT', 'Clerk#000000001', 0, 'bench')",
                              [(q, QUERIES[q]) for q in ("q08_segment_year", "q09_priority",
                                                        "q10_building_kpi") if q in results])
            time.sleep(2)
            copies_report(mirror_copies(srv.log_path)[seen:])
        conn.close()
        if results:
            report(results)
        if a.workload in ("bi", "all"):
            bi_report(bi_rows)
        print(f"\nSF{a.scale:g}, {a.reps} reps after 1 warm-up; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; whole run "
              f"{time.monotonic() - t_run:.0f} s")
    finally:
        try:
            print(f"SIGTERM -> exit {srv.stop(120)}")
        finally:
            srv.kill()
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
