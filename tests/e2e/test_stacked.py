"""Datamaps on datamaps (docs/stacked.md), end to end through the shared
embedded `serve` (tests/e2e/conftest.py): an hour datamap over a base table, a day datamap
over the same base table (its full builds read the hour datamap's rows), and a datamap
stacked on the hour datamap's table. After each load every datamap equals what Spark
computes from the base table, the stacked one is refreshed after the one it reads, DROP
of the lower one is refused, and each query reads the smallest level that answers it.

The tests run in order and share the proxy's state."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from proxy.datamaps.catalog.store import Catalog
from tests.support.clients import RawHS2
from tests.support.e2e import Pair, doc_blocks
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "stacked.md"
# what each must equal, computed by Spark from the base table
DAILY_FROM_BASE = ("SELECT date_trunc('DAY', ts), sum(v), count(*), max(v) FROM ev "
                   "GROUP BY date_trunc('DAY', ts)")
DAY_FROM_BASE = ("SELECT date_trunc('DAY', ts), k, sum(v), count(v), count(*), max(v) "
                 "FROM ev GROUP BY date_trunc('DAY', ts), k")
DAY_Q = "SELECT timeseries(ts, 'day') AS d, k, sum(v) FROM ev GROUP BY timeseries(ts, 'day'), k"
HOUR_Q = ("SELECT timeseries(ts, 'hour') AS h, sum(v) FROM ev "
          "GROUP BY timeseries(ts, 'hour')")
STACKED_Q = ("SELECT date_trunc('DAY', h) AS d, sum(s) FROM ev_hour_table "
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
    got = base.rows("SELECT d, k, sum(s), sum(n), sum(c), max(m) FROM ev_day_table "
                    "GROUP BY d, k")
    assert got == base.rows(DAY_FROM_BASE)
    got = base.rows("SELECT d, sum(s), sum(c), max(m) FROM ev_daily_table GROUP BY d")
    assert got == base.rows(DAILY_FROM_BASE)


def test_the_documented_example_runs_as_written(c):
    """CREATE builds ev_day from ev_hour's rows, ev_daily is stacked on ev_hour; a load
    refreshes them in order; SHOW DATAMAP and EXPLAIN say what the comments say."""
    setup = doc_blocks(DOC)[0]
    for stmt, comment in setup:
        if stmt.startswith("EXPLAIN"):
            want = re.search(r"Hit mv DataMap: (\w+)", comment).group(1)
            c.hit(stmt[len("EXPLAIN "):], want)
        elif stmt.startswith("SHOW DATAMAP"):
            shown = c.datamaps()
            assert shown["ev_daily"][7] == "default.ev_hour (fresh)", shown["ev_daily"]
            assert shown["ev_day"][7] == "" and shown["ev_hour"][7] == ""
        else:
            c.dm.run(stmt)
    built = events(c, "ev_day", "built-from")
    assert built and "default.ev_hour" in built[-1].detail, built
    # the load after CREATE: ev_daily appended a segment made from ev_hour's new one
    segs = c.segments("ev_daily_table")
    assert len(segs) == 2 and '"default.ev_hour_table": ["1"]' in segs[0][6], segs
    check_equal(c)


def test_cheapest_level_and_no_loop(c):
    c.hit(DAY_Q, "ev_day")           # smaller than ev_hour, which also answers
    c.hit(HOUR_Q, "ev_hour")
    c.hit(STACKED_Q, "ev_daily")
    plan = c.explain(STACKED_Q).splitlines()
    assert ("Freshness: ev_daily: base table files unchanged (judged by datamap ev_hour "
            "below it)") in plan, plan
    plan = c.explain("SELECT d, sum(s) FROM ev_daily_table GROUP BY d")
    assert "No datamap hit" in plan.splitlines(), plan[:2000]


def test_a_write_around_the_proxy_makes_the_stacked_one_stale_until_synced(c):
    c.spark.execute("INSERT INTO ev VALUES " + rows(5, 20))
    plan = c.explain(STACKED_Q)
    assert any(l.startswith("Skipped ev_daily: ") and "datamap default.ev_hour below it is "
               "not fresh" in l for l in plan.splitlines()), plan[:2000]
    c.same(STACKED_Q)
    # the guard's background sync refreshes ev_hour, then ev_daily from its new segment
    wait_until(lambda: "Hit mv DataMap: ev_daily" in c.explain(STACKED_Q).splitlines(),
               timeout=120, interval=0.5, what="ev_daily to answer again", detail=c.datamaps)
    check_equal(c)


def test_overwrite_and_sync_rebuild_in_order(c):
    c.dm.run("INSERT OVERWRITE TABLE ev SELECT * FROM VALUES " + rows(4, 60)
             + " AS t(ts, k, v)")
    # rebuilt: ev_hour first, then ev_day from it, ev_daily from ev_hour's new table
    assert len(events(c, "ev_day", "built-from")) >= 2
    assert len([s for s in c.segments("ev_daily_table") if s[1] == "Success"]) == 1
    check_equal(c)
    # a write around the proxy, then SYNC of the base table alone: the stacked datamap's
    # table is synced after it, in the same statement (one more row)
    c.spark.execute("INSERT INTO ev VALUES " + rows(6, 10))
    out = c.dm.run("SYNC DATAMAPS ON TABLE ev").rows
    assert [r[0] for r in out] == ["default.ev", "default.ev_hour_table"], out
    assert json.loads(out[0][4]) == {"default.ev_day": "refreshed",
                                     "default.ev_hour": "refreshed"}, out
    assert json.loads(out[1][4]) == {"default.ev_daily": "refreshed"}, out
    check_equal(c)


def test_drop_refused_while_stacked_on(c):
    refused, *drops = doc_blocks(DOC)[1]
    e = c.dm.error(refused[0])
    assert e.sqlstate == "2BP01" and "default.ev_daily" in e.message, e
    assert "2BP01" in refused[1] and "ev_hour" in c.datamaps()
    c.dm.run(drops[0][0])         # ev_daily
    c.hit(DAY_Q, "ev_day")        # the others still answer
    for stmt, _ in drops[1:]:
        c.dm.run(stmt)
    assert not {"ev_hour", "ev_day", "ev_daily"} & set(c.datamaps())
    c.dm.run("DROP TABLE ev")
