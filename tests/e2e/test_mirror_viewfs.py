"""The segment mirror end to end, on a warehouse the proxy cannot open: one embedded `serve`
whose Spark warehouse is `viewfs://mirrorwh/warehouse`, a Hadoop mount table over a local
directory. Spark reads and writes it; the proxy's Python cannot open a viewfs:// path, as
it cannot open hdfs:// or s3a://. The pipeline writes the datamap's segments there, the
proxy copies them into `<state dir>/serving-mirror` through the pipeline session's Hadoop
FileSystem, DuckDB serves them, and the answers equal Spark's (names, types, rows). Then
a load, compaction and DROP, which the mirror follows; its metrics; its cost per segment."""
from __future__ import annotations

import re
import urllib.request

import pytest

from tests.support.clients import RawHS2
from tests.support.e2e import ServeProc, sort_rows
from tests.support.spark_tier import rows_equal
from tests.support.waiting import wait_until

pytestmark = pytest.mark.spark

MOUNT = "mirrorwh"
ROWS = ("(1, 'de', DATE'2024-01-01', 3, 12.50), (2, 'de', DATE'2024-01-02', -1, -3.25), "
        "(3, 'fr', DATE'2024-02-01', 5, 0.00), (4, NULL, DATE'2024-03-15', NULL, NULL), "
        "(5, 'ümlaut', DATE'2023-12-31', 1, 0.07)")
MORE = "(6, 'it', DATE'2024-02-29', 6, -0.01), (7, 'de', DATE'2024-01-03', 4, 7.77)"
QUERIES = [
    "SELECT country, sum(amount) s, count(*) n FROM mf GROUP BY country ORDER BY country",
    "SELECT month(d) m, sum(qty) q, avg(amount) a FROM mf GROUP BY month(d) ORDER BY m",
    "SELECT count(*) FROM mf WHERE country IN ('de', 'fr')",
]


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    work = tmp_path_factory.mktemp("mirror")
    disk = work / "cluster"                 # what the viewfs mount points at
    disk.mkdir()
    conf = ",".join([
        "spark.sql.shuffle.partitions=4",
        f"spark.sql.warehouse.dir=viewfs://{MOUNT}/warehouse",
        f"spark.hadoop.fs.viewfs.mounttable.{MOUNT}.link./warehouse={disk.as_uri()}"])
    srv = ServeProc(work, work / "state", metrics=True,
                    env={"TZ": "UTC", "DATAMAP_PROXY_SPARK_CONF": conf})
    proxy = RawHS2("127.0.0.1", srv.port)
    try:
        proxy.execute("CREATE TABLE mf (id INT, country STRING, d DATE, qty INT, "
                      "amount DECIMAL(10,2)) USING parquet")
        proxy.execute(f"INSERT INTO mf VALUES {ROWS}")
        proxy.execute("CREATE DATAMAP mfa USING 'mv' AS SELECT country, d, sum(qty), "
                      "sum(amount), count(*), count(amount) FROM mf GROUP BY country, d")
        yield {"srv": srv, "proxy": proxy, "disk": disk, "mirror": work / "state" / "serving-mirror"}
    finally:
        proxy.close()
        srv.kill()


def explain(env, sql: str) -> str:
    return env["proxy"].execute("EXPLAIN " + sql).rows[0][0]


def served_by(env, sql: str) -> str:
    return next(line for line in explain(env, sql).splitlines() if line.startswith("Served by:"))


def mirrored(env, sql: str) -> str:
    return wait_until(lambda: served_by(env, sql) == "Served by: local engine (mirror)",
                      60, "the datamap's segments mirrored", interval=0.3,
                      detail=lambda: served_by(env, sql))


def same(env, sql: str) -> None:
    got = env["proxy"].execute(sql)
    with RawHS2("127.0.0.1", env["srv"].engine_port) as spark:
        want = spark.execute(sql)
    assert (got.columns, got.types) == (want.columns, want.types), sql
    ordered = "ORDER BY" in sql
    g, w = (got.rows, want.rows) if ordered else (sort_rows(got.rows), sort_rows(want.rows))
    assert len(g) == len(w) and all(rows_equal(a, b) for a, b in zip(g, w)), (sql, g, w)


def segment_dirs(env) -> set[str]:
    """{segment id} of the mirror's complete copies of the datamap's segments."""
    return {d.name.split("-")[0] for t in env["mirror"].glob("*") for d in t.iterdir()
            if not d.name.startswith(".")} if env["mirror"].exists() else set()


def copies(env) -> list[tuple[float, int]]:
    """(seconds, bytes) of every segment copy the log reported."""
    text = env["srv"].log_path.read_text(errors="replace")
    return [(float(s), int(b)) for b, s in re.findall(
        r"serving mirror: segment \S+ of \S+ copied \(\d+ files, (\d+) bytes\) in ([\d.]+) s",
        text)]


def test_segments_on_viewfs_are_served_from_the_mirror_with_sparks_answer(env):
    line = served_by(env, QUERIES[0])
    assert line in ("Served by: local engine (mirror)",
                    "Served by: spark (segment 0 of default.mfa_table not mirrored yet)"), line
    mirrored(env, QUERIES[0])
    for sql in QUERIES:
        assert "Hit mv DataMap: mfa" in explain(env, sql)
        same(env, sql)
    # the copies are the bytes Spark wrote, file for file
    sources = sorted(p for p in (env["disk"]).rglob("*.parquet") if "mfa_table" in str(p))
    local = sorted(p for p in env["mirror"].rglob("*.parquet"))
    assert sources and sorted(p.read_bytes() for p in sources) == \
        sorted(p.read_bytes() for p in local)


def test_a_load_compaction_and_drop_are_followed(env):
    c = env["proxy"]
    c.execute(f"INSERT INTO mf VALUES {MORE}")                # segment 1
    wait_until(lambda: segment_dirs(env) == {"0", "1"}, 60, "segment 1 mirrored",
               detail=lambda: segment_dirs(env))
    mirrored(env, QUERIES[0])
    for sql in QUERIES:
        same(env, sql)
    c.execute("ALTER DATAMAP mfa COMPACT 'MAJOR'")             # segment 2 replaces 0 and 1
    wait_until(lambda: segment_dirs(env) == {"2"}, 60, "the compacted segments' copies removed",
               detail=lambda: segment_dirs(env))
    mirrored(env, QUERIES[0])
    for sql in QUERIES:
        same(env, sql)
    metrics = urllib.request.urlopen(
        f"http://127.0.0.1:{env['srv'].metrics_port}/metrics", timeout=10).read().decode()
    assert re.search(r"^datamap_proxy_serving_mirror_segments 1\.0$", metrics, re.M), metrics
    assert re.search(r"^datamap_proxy_serving_mirror_fetches_total 3\.0$", metrics, re.M)
    assert re.search(r"^datamap_proxy_serving_mirror_failures_total 0\.0$", metrics, re.M)
    cost = copies(env)
    assert len(cost) == 3 and all(b > 0 for _, b in cost)
    print("mirror cost per segment (seconds, bytes):", cost)
    c.execute("DROP DATAMAP mfa")
    wait_until(lambda: not any(env["mirror"].iterdir()), 60, "the dropped datamap's copies removed",
               detail=lambda: list(env["mirror"].rglob("*")))
