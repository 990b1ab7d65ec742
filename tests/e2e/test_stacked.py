"""Datamaps on datamaps (issue 14 item 6; docs/stacked.md), end to end through the shared
embedded `serve` (tests/e2e/conftest.py): an hour datamap over a base table, a day datamap
over the same base table (its full builds read the hour datamap's rows), and a datamap
stacked on the hour datamap's table. After each load every datamap equals what Spark
computes from the base table, the stacked one is refreshed after the one it reads, DROP
of the lower one is refused, and each query reads the smallest level that answers it.

The tests run in order and share the proxy's state."""
from __future__ import annotations

import time

import pytest

from proxy.datamaps.catalog import Catalog
from tests.e2e.support import Pair
from tests.support.clients import RawHS2

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

HOUR = ("CREATE DATAMAP st_hour USING 'mv' AS SELECT timeseries(ts, 'hour') AS h, k, "
        "sum(v) AS s, count(v) AS n, count(*) AS c, max(v) AS m FROM st_ev "
        "GROUP BY timeseries(ts, 'hour'), k")
DAY = ("CREATE DATAMAP st_day USING 'mv' AS SELECT timeseries(ts, 'day') AS d, k, "
       "sum(v) AS s, count(v) AS n, count(*) AS c, max(v) AS m FROM st_ev "
       "GROUP BY timeseries(ts, 'day'), k")
# stacked: reads st_hour's table, so it answers queries over that table
DAILY = ("CREATE DATAMAP st_daily USING 'mv' AS SELECT date_trunc('DAY', h) AS d, "
         "sum(s) AS s, sum(c) AS c, max(m) AS m FROM st_hour_table GROUP BY date_trunc('DAY', h)")
# what each must equal, computed by Spark from the base table
DAILY_FROM_BASE = ("SELECT date_trunc('DAY', ts), sum(v), count(*), max(v) FROM st_ev "
                   "GROUP BY date_trunc('DAY', ts)")
DAY_FROM_BASE = ("SELECT date_trunc('DAY', ts), k, sum(v), count(v), count(*), max(v) "
                 "FROM st_ev GROUP BY date_trunc('DAY', ts), k")
DAY_Q = "SELECT timeseries(ts, 'day') AS d, k, sum(v) FROM st_ev GROUP BY timeseries(ts, 'day'), k"
HOUR_Q = ("SELECT timeseries(ts, 'hour') AS h, sum(v) FROM st_ev "
          "GROUP BY timeseries(ts, 'hour')")
STACKED_Q = ("SELECT date_trunc('DAY', h) AS d, sum(s) FROM st_hour_table "
             "GROUP BY date_trunc('DAY', h)")


def rows(day: int, n: int) -> str:
    return ", ".join(f"(TIMESTAMP'2024-03-{day:02d} {i % 24:02d}:{i % 60:02d}:00', "
                     f"'{'abc'[i % 3]}', {'NULL' if i % 7 == 0 else i - 5})" for i in range(n))


@pytest.fixture(scope="module")
def c(shared_serve):
    pair = Pair(shared_serve.port)
    pair.state = shared_serve.state
    pair.spark = RawHS2("127.0.0.1", shared_serve.srv.engine_port)   # around the proxy
    try:
        yield pair
    finally:
        pair.spark.close()
        pair.close()


def events(c: Pair, name: str, kind: str) -> list:
    with Catalog.in_state_dir(c.state) as cat:
        return [e for e in cat.events("default", name) if e.kind == kind]


def check_equal(c: Pair) -> None:
    """Every datamap's table holds exactly Spark's answer over the base table."""
    base = c.base     # one new session: it lists the tables as they are now
    got = base.rows("SELECT d, k, sum(s), sum(n), sum(c), max(m) FROM st_day_table "
                    "GROUP BY d, k")
    assert got == base.rows(DAY_FROM_BASE)
    got = base.rows("SELECT d, sum(s), sum(c), max(m) FROM st_daily_table GROUP BY d")
    assert got == base.rows(DAILY_FROM_BASE)


def test_create_builds_coarse_from_finer_and_stacked(c):
    c.dm.run("CREATE TABLE st_ev (ts TIMESTAMP, k STRING, v INT) USING parquet")
    c.dm.run("INSERT INTO st_ev VALUES " + rows(1, 50) + ", " + rows(2, 30))
    c.dm.run(HOUR)
    c.dm.run(DAY)
    built = events(c, "st_day", "built-from")
    assert built and "default.st_hour" in built[-1].detail, built
    c.dm.run(DAILY)
    shown = c.datamaps()
    assert shown["st_daily"][7] == "default.st_hour (fresh)", shown["st_daily"]
    assert shown["st_day"][7] == "" and shown["st_hour"][7] == ""
    check_equal(c)


def test_cheapest_level_and_no_loop(c):
    c.hit(DAY_Q, "st_day")           # smaller than st_hour, which also answers
    c.hit(HOUR_Q, "st_hour")
    c.hit(STACKED_Q, "st_daily")
    plan = c.explain("SELECT d, sum(s) FROM st_daily_table GROUP BY d")
    assert "No datamap hit" in plan.splitlines(), plan[:2000]


def test_load_refreshes_in_dependency_order(c):
    c.dm.run("INSERT INTO st_ev VALUES " + rows(3, 40))
    # the stacked datamap caught up with the hour datamap's new segment, incrementally
    segs = c.segments("st_daily_table")
    assert len(segs) == 2 and '"default.st_hour_table": ["1"]' in segs[0][6], segs
    assert c.datamaps()["st_daily"][7] == "default.st_hour (fresh)"
    check_equal(c)
    c.hit(STACKED_Q, "st_daily")


def test_a_write_around_the_proxy_makes_the_stacked_one_stale_until_synced(c):
    c.spark.execute("INSERT INTO st_ev VALUES " + rows(5, 20))
    plan = c.explain(STACKED_Q)
    assert any(l.startswith("Skipped st_daily: ") and "datamap default.st_hour below it is "
               "not fresh" in l for l in plan.splitlines()), plan[:2000]
    c.same(STACKED_Q)
    # the guard's background sync refreshes st_hour, then st_daily from its new segment
    deadline = time.monotonic() + 120
    while "Hit mv DataMap: st_daily" not in c.explain(STACKED_Q).splitlines():
        assert time.monotonic() < deadline, c.datamaps()
        time.sleep(0.5)
    check_equal(c)


def test_overwrite_and_sync_rebuild_in_order(c):
    c.dm.run("INSERT OVERWRITE TABLE st_ev SELECT * FROM VALUES " + rows(4, 60)
             + " AS t(ts, k, v)")
    # rebuilt: st_hour first, then st_day from it, st_daily from st_hour's new table
    assert len(events(c, "st_day", "built-from")) >= 2
    assert len([s for s in c.segments("st_daily_table") if s[1] == "Success"]) == 1
    check_equal(c)
    out = c.dm.run("SYNC DATAMAPS").rows
    tables = [r[0] for r in out]
    assert tables.index("default.st_ev") < tables.index("default.st_hour_table"), out


def test_drop_refused_while_stacked_on(c):
    e = c.dm.error("DROP DATAMAP st_hour")
    assert e.sqlstate == "2BP01" and "default.st_daily" in e.message, e
    assert "st_hour" in c.datamaps()
    c.dm.run("DROP DATAMAP st_daily")
    c.dm.run("DROP DATAMAP st_hour")
    c.hit(DAY_Q, "st_day")
    c.dm.run("DROP DATAMAP st_day")
    c.dm.run("DROP TABLE st_ev")
