"""External-format tables (docs/external.md), measured in one run of the embedded `python -m proxy serve`
(Spark local[2]) over wide CSV from bench/extdata.py (default 2 GB, 200 files, 110 columns,
every 4th file gzip):

  baseline  a plain `USING csv` Spark table over the files, queried on the embedded Spark
            Thrift server directly (not through the proxy): full scans, the needle read
            from its one file (`_metadata.file_path = ...`, the read pruning sends), the
            hot aggregate over a Parquet copy of the hot columns (what the MV holds)
  external  through the proxy: CREATE TABLE ... TBLPROPERTIES('format'='csv'), minmax and
            bloomfilter datamaps, a projection MV of the ten hot columns (with a bloomfilter
            of its own, ON TABLE fact_hot) and an aggregate MV, one ADD SEGMENT per batch
            (seconds per GB: links + index + MV build), then
              needle    `WHERE key = ...` and `WHERE id = ...` (cold column selected, so
                        the CSV is read): pruned vs `SET datamap.prune.enabled=false`
              hot       aggregates over hot columns: from the MVs vs
                        `SET datamap.rewrite.enabled=false` (the CSV)
              needle_hot  `WHERE key = ...` on hot columns: the MV pruned by its bloom
                        filter vs not (what an index adds to Parquet's own statistics)
            every answer compared with the baseline table's.

Each figure is the median of --reps runs (no warm-up run: the median absorbs the first).
Targets (2 GB, 2 cores): needle >= 20x, hot aggregate >= 20x. When the proxy does not know
external tables (the CREATE TABLE is refused or forwarded), the external part is skipped
with the reason and the baseline still reports.

    python bench/external.py [--gb 2] [--files 200] [--data-dir DIR] [--keep] [--quick]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from contextlib import closing, contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import extdata  # noqa: E402
from bench.rows import same_rows, timed  # noqa: E402 - one row comparison for benches
from tests.support.clients import ClientError, pyhive_execute  # noqa: E402
from tests.support.proxy_proc import ServeProc  # noqa: E402 - the tests' harness

DB = "ext_bench"
HOT_PROJECTION = "id, key, event_date, event_ts, region, channel, product, status, quantity, amount"
DAILY = ("SELECT event_date, region, channel, sum(amount) AS amount, sum(quantity) AS qty, "
         "count(*) AS n FROM {t} GROUP BY event_date, region, channel")
HOT_QUERIES = {   # answered by the projection MV, and by the aggregate MV (a rollup)
    "hot_by_product": "SELECT product, status, sum(amount), count(*), max(quantity) FROM {t} "
                      "WHERE quantity > 5 GROUP BY product, status",
    "hot_by_region": "SELECT region, sum(amount), count(*) FROM {t} "
                     "WHERE event_date >= DATE '2024-07-01' GROUP BY region",
}


def needle_queries(m: dict) -> dict[str, str]:
    """needle_key and needle_id select a cold column too: no MV holds it, so the CSV files
    are read; needle_hot is answered by the projection MV, pruned by its own bloom filter."""
    n = m["needles"][len(m["needles"]) // 2]
    return {"needle_key": f"SELECT id, key, amount, c050 FROM {{t}} WHERE key = '{n['key']}'",
            "needle_id": f"SELECT id, key, amount, c050 FROM {{t}} WHERE id = {n['id']}",
            "needle_hot": f"SELECT id, key, amount FROM {{t}} WHERE key = '{n['key']}'"}


def data_for(a) -> tuple[Path, dict]:
    """The generated data: reused from --data-dir under --keep when its spec matches."""
    out = Path(a.data_dir)
    rows = extdata.rows_for(a.gb, a.files, a.columns, 15)
    if (out / "manifest.json").exists():
        m = extdata.load_manifest(out)
        s = m["spec"]
        if a.keep and (s["files"], s["rows_per_file"], s["columns"], s["batches"]) == (
                a.files, rows, a.columns, a.batches):
            print(f"data: reusing {out}")
            extdata.report(m)
            return out, m
        shutil.rmtree(out)
    m = extdata.generate(out, files=a.files, rows_per_file=rows, columns=a.columns,
                         batches=a.batches)
    extdata.report(m)
    return out, m


def median_ms(cur, sql: str, reps: int) -> tuple[float, list]:
    samples, rows = [], None
    for _ in range(reps):
        ms, rows = timed(cur, sql)
        samples.append(ms)
    return statistics.median(samples), rows


def run(cur, sql: str) -> list:
    return pyhive_execute(cur, sql).rows


def baseline(cur, m: dict, reps: int) -> dict[str, tuple[float, list]]:
    """Plain Spark over the same files; returns {query: (median ms, rows)}."""
    t = f"{DB}.plain_csv"
    run(cur, f"CREATE DATABASE IF NOT EXISTS {DB}")
    run(cur, f"DROP TABLE IF EXISTS {t}")
    run(cur, f"CREATE TABLE {t} ({extdata.fields_ddl(m)}) USING csv OPTIONS (header 'false', "
             f"recursiveFileLookup 'true') LOCATION '{m['root']}'")
    out: dict[str, tuple[float, list]] = {}
    gb = m["csv_bytes"] / 1e9
    out["full_scan"] = median_ms(cur, f"SELECT count(*), sum(amount) FROM {t}", reps)
    print(f"baseline full scan: {out['full_scan'][0] / 1000:.1f} s "
          f"({gb / (out['full_scan'][0] / 1000):.2f} GB/s of CSV), rows {out['full_scan'][1]}")
    for name, sql in {**needle_queries(m), **HOT_QUERIES}.items():
        out[name] = median_ms(cur, sql.format(t=t), reps)
        print(f"baseline {name}: {out[name][0]:.0f} ms ({len(out[name][1])} rows)", flush=True)
    needle = needle_queries(m)["needle_key"].format(t=t)
    path = run(cur, needle.replace("SELECT id,", "SELECT _metadata.file_path, id,"))[0][0]
    one_file = f"{needle} AND _metadata.file_path = '{path}'"
    ms, rows = median_ms(cur, one_file, reps)
    print(f"baseline needle_key read from its one file: {ms:.0f} ms "
          f"-> {out['needle_key'][0] / ms:.1f}x of the full scan (what pruning can give)")
    if diff := same_rows(out["needle_key"][1], rows, False):
        print(f"MISMATCH needle from one file vs all files: {diff}")
    t0 = time.monotonic()
    run(cur, f"DROP TABLE IF EXISTS {DB}.hot_copy")
    run(cur, f"CREATE TABLE {DB}.hot_copy USING parquet AS SELECT {HOT_PROJECTION} FROM {t}")
    copy_s = time.monotonic() - t0
    print(f"baseline Parquet copy of the hot columns (an MV build by hand): {copy_s:.1f} s "
          f"= {copy_s / gb:.1f} s per GB of CSV")
    for name, sql in {**HOT_QUERIES, "needle_hot": needle_queries(m)["needle_hot"]}.items():
        ms, rows = median_ms(cur, sql.format(t=f"{DB}.hot_copy"), reps)
        print(f"baseline {name} on the Parquet copy: {ms:.0f} ms -> "
              f"{out[name][0] / ms:.1f}x of the CSV (a projection MV read by Spark, "
              "pruned by Parquet's own statistics only)")
        if diff := same_rows(out[name][1], rows, False):
            print(f"MISMATCH {name} Parquet copy vs CSV: {diff}")
    return out


def create_external(cur, m: dict) -> None:
    """The table, its index datamaps and MVs; ClientError names the statement refused."""
    t = f"{DB}.fact"
    for sql in (
            f"DROP TABLE IF EXISTS {t}",
            f"CREATE TABLE {t} ({extdata.fields_ddl(m)}) STORED AS carbondata TBLPROPERTIES "
            f"('format'='csv', 'csv.delimiter'=',', 'csv.header'='{extdata.header(m)}')",
            f"CREATE DATAMAP fact_minmax ON TABLE {t} USING 'minmax' "
            "DMPROPERTIES('INDEX_COLUMNS'='id,event_date')",
            f"CREATE DATAMAP fact_bloom ON TABLE {t} USING 'bloomfilter' DMPROPERTIES("
            f"'INDEX_COLUMNS'='key,id', 'BLOOM_SIZE'='{m['spec']['rows_per_file']}', "
            "'BLOOM_FPP'='0.001')",
            "CREATE DATAMAP fact_hot USING 'mv' DMPROPERTIES('SORT_COLUMNS'='region,product', "
            f"'TABLE_BLOCKSIZE'='128MB') AS SELECT {HOT_PROJECTION} FROM {t}",
            f"CREATE DATAMAP fact_daily USING 'mv' AS {DAILY.format(t=t)}",
            f"CREATE DATAMAP hot_bloom ON TABLE {DB}.fact_hot USING 'bloomfilter' "
            "DMPROPERTIES('INDEX_COLUMNS'='key')"):
        try:
            run(cur, sql)
        except ClientError as e:
            raise ClientError(e.sqlstate, f"{sql[:90]}...: {e.message}") from None


def add_segments(cur, m: dict) -> None:
    total_s = 0.0
    for b, batch in enumerate(m["batches"]):
        gb = sum(f["csv_bytes"] for f in m["files"] if f["path"].startswith(batch + "/")) / 1e9
        t0 = time.monotonic()
        run(cur, f"ALTER TABLE {DB}.fact ADD SEGMENT LOCATION '{m['root']}/{batch}'")
        s = time.monotonic() - t0
        total_s += s
        print(f"ADD SEGMENT {batch}: {s:.1f} s for {gb:.2f} GB = {s / gb:.1f} s per GB "
              "(links, minmax + bloomfilter per file, both MVs)", flush=True)
    print(f"ADD SEGMENT total: {total_s:.1f} s = {total_s / (m['csv_bytes'] / 1e9):.1f} s per GB")
    for row in run(cur, f"SHOW SEGMENTS FOR TABLE {DB}.fact"):
        print("  segment", row)


def explain_head(cur, sql: str) -> str:
    text = "\n".join(str(r[0]) for r in run(cur, "EXPLAIN " + sql))
    return text.split("\n\n", 1)[0]


def compare(cur, name: str, sql: str, switch: str, base: tuple[float, list], reps: int,
            expect: str) -> float | None:
    """Median ms with the feature on and off (`SET switch=false`); the ratio off/on."""
    plan = explain_head(cur, sql)
    if expect not in plan:
        print(f"NOT USED {name}: EXPLAIN lacks {expect!r}\n    " + plan.replace("\n", "\n    "))
    on_ms, on_rows = median_ms(cur, sql, reps)
    run(cur, f"SET {switch}=false")
    try:
        off_ms, off_rows = median_ms(cur, sql, reps)
    finally:
        run(cur, f"SET {switch}=true")
    for label, rows in (("on", on_rows), ("off", off_rows)):
        if diff := same_rows(base[1], rows, False):
            print(f"MISMATCH {name} ({switch} {label}) vs the plain CSV table: {diff}")
    lines = [ln for ln in plan.splitlines() if ln.startswith(("Pruned by", "Hit mv"))]
    print(f"{name}: {on_ms:.0f} ms vs {off_ms:.0f} ms with {switch}=false -> "
          f"{off_ms / on_ms:.1f}x; plain CSV table {base[0]:.0f} ms   {' | '.join(lines)}",
          flush=True)
    return off_ms / on_ms


# How a hot query answered from an MV is measured: as a dashboard sees it (the serving
# tier, whose result cache answers a repeat), computed each time in-process, and by Spark.
HOT_VARIANTS = {"": {}, " (no result cache)": {"datamap.cache.enabled": "false"},
                " (Spark reads the MV)": {"datamap.serving.enabled": "false"}}


@contextmanager
def session(cur, settings: dict[str, str]):
    """The proxy's session settings for a block, set back to true after it."""
    for key, value in settings.items():
        run(cur, f"SET {key}={value}")
    try:
        yield
    finally:
        for key in settings:
            run(cur, f"SET {key}=true")


def external(cur, m: dict, base: dict, reps: int) -> None:
    try:
        create_external(cur, m)
    except ClientError as e:
        print(f"external part skipped, this build refuses {e}")
        return
    add_segments(cur, m)
    t = f"{DB}.fact"
    ratios = {}
    for name, sql in needle_queries(m).items():
        # needle_hot is answered from the MV: its bloom index prunes the MV's files when
        # Spark reads them (the serving tier reads the MV in-process, without pruning)
        with session(cur, {"datamap.serving.enabled": "false"} if name == "needle_hot" else {}):
            ratios[name] = compare(cur, name, sql.format(t=t), "datamap.prune.enabled",
                                   base[name], reps, "Pruned by index datamap")
    for name, sql in HOT_QUERIES.items():
        for how, settings in HOT_VARIANTS.items():
            with session(cur, settings):
                ratios[name + how] = compare(cur, name + how, sql.format(t=t),
                                             "datamap.rewrite.enabled", base[name], reps,
                                             "Hit mv DataMap")
    print("\nratios measured in this run (target >= 20x but for needle_hot): " + ", ".join(
        f"{k} {v:.1f}x" for k, v in ratios.items() if v))


@contextmanager
def embedded_proxy(workdir: Path):
    """`python -m proxy serve` with its own Spark; stopped (SIGTERM, then SIGKILL) on exit."""
    srv = ServeProc(workdir, workdir / "state", timeout=300, fast_start=False,
                    env={"DATAMAP_PROXY_SPARK_DRIVER_MEMORY": "2g"})
    try:
        yield srv
    finally:
        try:
            print(f"SIGTERM -> exit {srv.stop(120)}")
        finally:
            srv.kill()


def connect(port: int):
    from pyhive import hive
    return hive.connect(host="127.0.0.1", port=port, username="bench")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=2.0)
    ap.add_argument("--files", type=int, default=200)
    ap.add_argument("--columns", type=int, default=110)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--data-dir", help="where the CSV is generated (removed at the end unless "
                                       "--keep; default: a temp dir named by the sizes)")
    ap.add_argument("--keep", action="store_true",
                    help="reuse data already in --data-dir, and leave it there")
    ap.add_argument("--quick", action="store_true", help="0.1 GB in 40 files, a smoke run")
    a = ap.parse_args(argv)
    if a.quick:
        a.gb, a.files = 0.1, 40
    if a.batches < 3 or (a.columns < 100 and not a.quick):
        ap.error("the issue's figures need --batches >= 3 and --columns >= 100")
    # named by the sizes, so that a run of other sizes does not replace data kept for reuse
    a.data_dir = a.data_dir or str(Path(tempfile.gettempdir()) / (
        f"bench-external-{a.gb:g}gb-{a.files}f-{a.columns}c-{a.batches}b"))
    t_run = time.monotonic()
    data, m = data_for(a)
    try:
        with tempfile.TemporaryDirectory(prefix="bench-external-") as tmp, \
                embedded_proxy(Path(tmp)) as srv:
            print(f"proxy ready in {srv.ready_seconds:.1f} s (Spark local[2])")
            with closing(connect(srv.engine_port)) as direct:
                base = baseline(direct.cursor(), m, a.reps)
            with closing(connect(srv.port)) as proxied:
                external(proxied.cursor(), m, base, a.reps)
            print(f"\n{m['csv_bytes'] / 1e9:.2f} GB, {len(m['files'])} files, {a.reps} reps; "
                  f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; "
                  f"whole run {time.monotonic() - t_run:.0f} s")
    finally:
        if not a.keep:
            shutil.rmtree(data, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
