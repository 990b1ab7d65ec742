"""The serving tier (answers computed in-process by DuckDB) end to end on the shared embedded
`serve` (tests/e2e/conftest.py; names start with sv_), a datamap over a table
loaded in several segments, queries answered in-process by DuckDB and compared with Spark
answering the original query directly (the engine's own Thrift port): column names, types
(with decimal precision and scale) and rows as the client decodes them. Then freshness of
the result cache (loads, compaction, REBUILD, DROP), the per-session switches, and the
fall-backs to Spark (engine error, outside the allow-list)."""
from __future__ import annotations

import re

import pytest

from tests.support.clients import ClientError, RawHS2
from tests.support.e2e import LogSince, sort_rows
from tests.support.spark_tier import rows_equal
from tests.support.waiting import wait_until

pytestmark = pytest.mark.spark

ROWS = [
    # id, country, city, d, qty, amount, price, n
    (1, "'de'", "'berlin'", "DATE'2024-01-01'", 3, "12.50", "1.5", 10),
    (2, "'de'", "'berlin'", "DATE'2024-01-02'", -1, "-3.25", "2.25", -7),
    (3, "'de'", "'munich'", "DATE'2024-02-01'", 5, "0.00", "NULL", 1000000000000),
    (4, "'fr'", "'paris'", "DATE'2024-01-01'", 2, "99999999.99", "0.1", 3),
    (5, "'fr'", "NULL", "DATE'2024-03-15'", "NULL", "NULL", "3.0", "NULL"),
    (6, "NULL", "'nowhere'", "DATE'2024-03-15'", 7, "1.01", "-4.5", 2),
    (7, "'zz'", "'zero'", "DATE'2024-01-01'", 0, "5.00", "1.0", 1),
    (8, "'ümlaut'", "'éa'", "DATE'2023-12-31'", 1, "0.07", "0.3", 0),
]
MORE = [
    (9, "'de'", "'berlin'", "DATE'2024-01-03'", 4, "7.77", "1.25", 5),
    (10, "'it'", "'rome'", "DATE'2024-02-29'", 6, "-0.01", "2.0", 9),
]
DATAMAP = ("CREATE DATAMAP sv USING 'mv' AS SELECT country, city, d, sum(qty), sum(amount), "
           "avg(amount), avg(price), count(*), count(amount), min(amount), max(n), max(price) "
           "FROM sv_facts GROUP BY country, city, d")
SERVED = [
    "SELECT country, sum(amount) s, avg(amount) a, count(*) c FROM sv_facts GROUP BY country "
    "ORDER BY country",
    "SELECT city, sum(qty) q, avg(price) p FROM sv_facts WHERE country IN ('de', 'fr') "
    "GROUP BY city ORDER BY q DESC, city LIMIT 3",
    "SELECT year(d) y, month(d) m, sum(amount) FROM sv_facts WHERE d >= '2024-01-02' "
    "GROUP BY year(d), month(d) ORDER BY y, m",
    "SELECT country, sum(amount) / count(*) per_row FROM sv_facts GROUP BY country "
    "HAVING count(*) > 1",
    "SELECT country, city, max(n), min(amount) FROM sv_facts GROUP BY country, city "
    "ORDER BY country DESC, city",
    "SELECT count(*) FROM sv_facts",
    "SELECT country, sum(qty) * 2 AS dbl, sum(amount) + 1 AS plus FROM sv_facts GROUP BY country",
    "SELECT avg(amount), avg(price), max(price) FROM sv_facts WHERE city <> 'paris'",
    "SELECT country, count(DISTINCT city) cities, count(DISTINCT city, d) visits FROM sv_facts "
    "GROUP BY country",
    "SELECT lower(city) l, substr(country, 1, 1) c0, sum(qty) q FROM sv_facts "
    "WHERE city LIKE '%r%' GROUP BY lower(city), substr(country, 1, 1)",
]
NOT_SERVED = [
    "SELECT initcap(country) u, count(*) c FROM sv_facts GROUP BY initcap(country)",
]


def values(rows) -> str:
    return ", ".join("(" + ", ".join(str(v) for v in r) + ")" for r in rows)


@pytest.fixture(scope="module")
def env(shared_serve):
    """Timestamps: a fixed offset (the shared server's TZ=UTC). Every datamap answer while
    this module runs is audited (proxy/datamaps/verify/auditor.py): its rate is reloaded to
    1 (SIGHUP) and back to the default at the end."""
    line = shared_serve.settings("[datamaps]\naudit_sample_rate = 1\n")
    assert "[datamaps] audit_sample_rate = 1.0" in line, line
    srv = shared_serve.srv
    log = LogSince(srv)
    proxy = RawHS2("127.0.0.1", srv.port)
    spark = RawHS2("127.0.0.1", srv.engine_port)
    try:
        proxy.execute("CREATE TABLE sv_facts (id INT, country STRING, city STRING, d DATE, "
                      "qty INT, amount DECIMAL(10,2), price DOUBLE, n BIGINT) USING parquet")
        proxy.execute("INSERT INTO sv_facts VALUES " + values(ROWS[:4]))
        proxy.execute(DATAMAP)
        proxy.execute("INSERT INTO sv_facts VALUES " + values(ROWS[4:]))   # a second segment
        yield {"srv": srv, "proxy": proxy, "spark": spark, "log": log}
    finally:
        try:
            for table in ("sv_facts", "sv_events", "sv_acc"):      # their datamaps go too
                proxy.execute(f"DROP TABLE IF EXISTS {table}")
        finally:
            for c in (proxy, spark):
                c.close()
            shared_serve.settings("")


def explain(c: RawHS2, sql: str) -> str:
    return c.execute("EXPLAIN " + sql).rows[0][0]


def same(env, sql: str, ordered: bool | None = None):
    """The proxy's answer (names, types, rows) equals Spark's own for the original query."""
    got = env["proxy"].execute(sql)
    want = _spark(env, sql)
    assert got.columns == want.columns, (sql, got.columns, want.columns)
    assert got.types == want.types, (sql, got.types, want.types)
    ordered = "ORDER BY" in sql.upper() if ordered is None else ordered
    g, w = (got.rows, want.rows) if ordered else (sort_rows(got.rows), sort_rows(want.rows))
    # doubles within 1e-9 relative: a sum of doubles depends on the order it is added in,
    # which differs between Spark's own plans too (base tables vs a datamap)
    assert len(g) == len(w) and all(rows_equal(a, b) for a, b in zip(g, w)), \
        f"{sql}\nproxy: {g}\nspark: {w}"
    return got


def _spark(env, sql: str):
    # a new session each time: Spark sessions cache file listings across INSERTs
    if "timeseries(" in sql:     # proxy SQL: the proxy translates it, no datamap used
        with RawHS2("127.0.0.1", env["srv"].port) as c:
            c.execute("SET datamap.rewrite.enabled=false")
            return c.execute(sql)
    with RawHS2("127.0.0.1", env["srv"].engine_port) as c:
        return c.execute(sql)


def test_dashboard_queries_are_served_locally_with_sparks_answer(env):
    for sql in SERVED:
        plan = explain(env["proxy"], sql)
        assert "Hit mv DataMap: sv" in plan, plan[:600]
        assert "Served by: local engine" in plan, plan[:1500]
        same(env, sql)
    log = env["log"].text()
    assert "served=local cache=miss" in log


def test_outside_the_allow_list_spark_answers(env):
    for sql in NOT_SERVED:
        plan = explain(env["proxy"], sql)
        assert "Hit mv DataMap: sv" in plan and "Served by: spark (not served locally: " \
            in plan, plan[:1500]
        assert "Result cache: bypassed (not served locally)" in plan
        same(env, sql)


def test_engine_error_falls_back_to_spark(env):
    """'zz' sums qty 0: the decimal division raises in DuckDB; Spark (ANSI) answers with
    its own error, exactly as when the proxy is not there."""
    sql = "SELECT country, sum(amount) / sum(qty) FROM sv_facts GROUP BY country"
    assert "Served by: local engine" in explain(env["proxy"], sql)
    with pytest.raises(ClientError) as proxied:
        env["proxy"].execute(sql)
    with pytest.raises(ClientError) as direct:
        _spark(env, sql)
    assert proxied.value.sqlstate == direct.value.sqlstate
    assert "DIVIDE_BY_ZERO" in proxied.value.message
    log = env["log"].text()
    assert "served=spark (local engine: " in log


def test_cache_hits_and_never_a_stale_answer(env):
    c = env["proxy"]
    sql = "SELECT country, sum(amount) s, count(*) n FROM sv_facts GROUP BY country"
    same(env, sql)
    assert "Result cache: hit" in explain(c, sql)
    c.execute("SET datamap.cache.enabled=false")
    assert "Result cache: bypassed (the session set datamap.cache.enabled=false)" \
        in explain(c, sql)
    c.execute("SET datamap.cache.enabled=true")
    # a load publishes a segment: the rewritten query reads it, the cache key changes
    c.execute("INSERT INTO sv_facts VALUES " + values(MORE))
    assert "Result cache: miss" in explain(c, sql)
    assert ("'it'" in values(MORE)) and any(r[0] == "it" for r in same(env, sql).rows)
    assert "Result cache: hit" in explain(c, sql)
    # compaction hides the old segments and publishes one
    c.execute("ALTER DATAMAP sv COMPACT 'MAJOR'")
    assert "Result cache: miss" in explain(c, sql)
    same(env, sql)
    # REBUILD of a datamap in sync has nothing to do: the same answer, still cached
    c.execute("REBUILD DATAMAP sv")
    assert "Result cache: hit" in explain(c, sql)
    same(env, sql)
    # INSERT OVERWRITE rebuilds it from scratch: new segments, a new key
    c.execute("INSERT OVERWRITE TABLE sv_facts VALUES " + values(ROWS[1:] + MORE))
    assert "Result cache: miss" in explain(c, sql)
    same(env, sql)
    # a session that changes a result-affecting setting is not answered from datamaps
    with RawHS2("127.0.0.1", env["srv"].port) as other:
        other.execute("SET spark.sql.session.timeZone=Asia/Tokyo")
        assert "No datamap hit" in explain(other, sql)


def test_session_switches(env):
    c = env["proxy"]
    sql = SERVED[0]
    c.execute("SET datamap.serving.enabled=false")
    try:
        assert "Served by: spark (the session set datamap.serving.enabled=false)" \
            in explain(c, sql)
        same(env, sql)
        assert c.execute("SET datamap.serving.enabled").rows == [
            ("datamap.serving.enabled", "false")]
    finally:
        c.execute("SET datamap.serving.enabled=true")
    assert "Served by: local engine" in explain(c, sql)
    with pytest.raises(ClientError) as bad:
        c.execute("SET datamap.cache.enabled=maybe")
    assert bad.value.sqlstate == "42000" and "datamap.cache.enabled" in bad.value.message


EVENTS = [
    ("TIMESTAMP'2024-01-01 00:00:00'", "'a'", "1.00"),
    ("TIMESTAMP'2024-01-01 00:59:59.5'", "'a'", "2.50"),
    ("TIMESTAMP'2024-01-01 13:05:00.123456'", "'b'", "-1.25"),
    ("TIMESTAMP'2024-01-02 00:00:00.1'", "'a'", "4.00"),
    ("TIMESTAMP'2024-02-29 23:59:59.999999'", "'b'", "0.01"),
    ("NULL", "'b'", "7.00"),
    ("TIMESTAMP'2023-12-31 23:00:00'", "NULL", "NULL"),
]
TS_QUERIES = [
    "SELECT timeseries(ts, 'day') dd, kind, sum(v) s, max(ts) mx, min(ts) mn FROM sv_events "
    "GROUP BY timeseries(ts, 'day'), kind ORDER BY dd, kind",
    "SELECT timeseries(ts, 'hour') h, count(*) c FROM sv_events WHERE ts >= '2024-01-01' "
    "GROUP BY timeseries(ts, 'hour') ORDER BY h",
    "SELECT year(timeseries(ts, 'hour')) y, month(timeseries(ts, 'hour')) m, max(ts) mx "
    "FROM sv_events GROUP BY year(timeseries(ts, 'hour')), month(timeseries(ts, 'hour'))",
    "SELECT timeseries(ts, 'month') mo, sum(v) s FROM sv_events GROUP BY timeseries(ts, 'month')",
]


def test_timestamps_are_served_in_a_fixed_offset_zone(env):
    """Time buckets (timeseries, date_trunc), max/min of timestamps with fractions of a
    second, filters on a timestamp: printed as Spark prints them, in the session zone."""
    c = env["proxy"]
    c.execute("CREATE TABLE sv_events (ts TIMESTAMP, kind STRING, v DECIMAL(10,2)) USING parquet")
    c.execute("INSERT INTO sv_events VALUES " + values(EVENTS))
    c.execute("CREATE DATAMAP sv_ev USING 'mv' AS SELECT kind, timeseries(ts, 'hour') AS h, "
              "sum(v), count(*), max(ts), min(ts) FROM sv_events GROUP BY kind, "
              "timeseries(ts, 'hour')")
    for sql in TS_QUERIES:
        plan = explain(c, sql)
        assert "Hit mv DataMap: sv_ev" in plan and "Served by: local engine" in plan, plan[:1500]
        same(env, sql)
    c.execute("DROP DATAMAP sv_ev")


def test_the_operation_log_says_which_datamap_answered_and_how_fresh(env):
    """What beeline prints and BI tools poll (PyHive's fetch_logs): the datamap, its
    segments, when its data was read; and whether the proxy computed the answer."""
    from tests.support.clients import pyhive_connect
    conn = pyhive_connect("127.0.0.1", env["srv"].port)
    try:
        cur = conn.cursor()
        cur.execute(SERVED[0])
        cur.fetchall()
        logs = cur.fetch_logs()
        assert re.fullmatch(r"answered from datamap sv \(segments [0-9, -]+\), data as of "
                            r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", logs[0]), logs
        assert logs[1].startswith("answer computed in-process by the proxy"), logs
        cur.execute(NOT_SERVED[0])      # forwarded to Spark: the proxy's line, then Spark's
        cur.fetchall()
        logs = cur.fetch_logs()
        assert logs and logs[0].startswith("answered from datamap sv (segments "), logs
        assert not any("in-process" in line for line in logs)
    finally:
        conn.close()


def _datamaps(env) -> dict:
    return {r[0]: r for r in env["proxy"].execute("SHOW DATAMAP").rows}


def test_every_answer_so_far_was_audited_and_none_disabled_a_datamap(env):
    """Every datamap answer of this module was sampled (rate 1): doubles, decimals, NULLs,
    dates, timestamps, several segments, loads / compaction / overwrite racing the audits.
    None may disable a datamap; AUDIT DATAMAP compares the served answer too."""
    env["proxy"].execute(SERVED[0])      # the newest query kept for sv: a served one
    res = env["proxy"].execute("AUDIT DATAMAP sv")
    assert res.columns == ["DataMapName", "Audited", "Compared", "Outcome", "Rows", "Detail"]
    assert res.rows[-1][3] == "PASSED", res.rows
    assert res.rows[-1][2].endswith("vs in-process answer"), res.rows
    assert _datamaps(env)["sv"][4:7:2] == ("ENABLED", ""), _datamaps(env)["sv"]
    log = env["log"].text()
    assert "audit mismatch" not in log
    passed = re.findall(r"sampled audit of default\.(?:sv|sv_ev): [0-9a-f]{12} PASSED in ", log)
    assert len(passed) >= 5, passed


def test_a_corrupted_datamap_is_caught_by_a_sampled_audit(env):
    """Rows slipped into a datamap segment behind the proxy's back (straight to Spark):
    the next answer from it is audited in the background and the datamap DISABLED, with
    the reason in SHOW DATAMAP and EXPLAIN; the base tables answer from then on."""
    c, sql = env["proxy"], "SELECT country, sum(amount) s, count(*) n FROM sv_acc GROUP BY country"
    c.execute("CREATE TABLE sv_acc (country STRING, amount DECIMAL(10,2)) USING parquet")
    c.execute("INSERT INTO sv_acc VALUES ('de', 1.50), ('fr', 2.25), (NULL, 0.10)")
    c.execute("CREATE DATAMAP sv_acc_dm AS SELECT country, sum(amount), count(*) FROM sv_acc "
              "GROUP BY country")
    with RawHS2("127.0.0.1", env["srv"].engine_port) as spark:
        spark.execute("INSERT INTO sv_acc_dm_table_segments PARTITION (dm_segment_id='0') "
                      "SELECT country, sum_amount, count_star FROM sv_acc_dm_table_segments "
                      "WHERE country = 'de'")
    assert "Hit mv DataMap: sv_acc_dm" in explain(c, sql)
    c.execute(sql)                                   # the client's answer: not waited on
    wait_until(lambda: _datamaps(env)["sv_acc_dm"][4] != "ENABLED", timeout=120, interval=0.5,
               what="the audit to disable sv_acc_dm")
    row = _datamaps(env)["sv_acc_dm"]
    assert row[4] == "DISABLED" and re.fullmatch(
        r"audit mismatch on [0-9a-f]{12} at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", row[6]), row
    assert f"Skipped sv_acc_dm: datamap is DISABLED: {row[6]}" in explain(c, sql)
    same(env, sql)
    log = env["log"].text()
    assert log.count("DISABLED (audit mismatch on") == 1
    c.execute("DROP DATAMAP sv_acc_dm")


def test_drop_datamap_last(env):
    c = env["proxy"]
    sql = SERVED[0]
    c.execute("DROP DATAMAP sv")
    plan = explain(c, sql)
    assert "No datamap hit" in plan and "Served by: spark" in plan
    assert re.search(r"Result cache: bypassed \(not answered from a datamap\)", plan)
    same(env, sql)
