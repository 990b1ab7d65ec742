"""The query log (proxy/observability/querylog/log.py) over a real catalog store, SQLite and PostgreSQL
(`catalog_location`, tests/proxy/conftest.py): what an event becomes, the readers,
retention, drop-oldest, and the reason classes of the rewriter's real reasons."""
from __future__ import annotations

import dataclasses
import logging
import threading
import time

import pytest

from proxy.config import QueryLogSettings
from proxy.datamaps.handler import DatamapSelectHandler
from proxy.observability.observe import StatementEvent
from proxy.observability.querylog.log import LoggedQuery, QueryLog
from proxy.observability.querylog.reasons import REASON_CLASSES, class_of, reason_class
from proxy.routing.router import PassThrough, Rewrite, StatementContext
from tests.support.datamaps import add_datamap, decision_service

NOW = time.time()


def event(statement="SELECT region, sum(amount) FROM sales WHERE day = '2026-01-01' GROUP BY region",
          **kw) -> StatementEvent:
    base = dict(at=NOW, session_id="s1", user="ann", client="Tableau", statement=statement,
                current_db="shop", decision="forwarded", duration_s=2.0, rows=3)
    base.update(kw)
    return StatementEvent(**base)


@pytest.fixture
def qlog(catalog_location):
    q = QueryLog(catalog_location, QueryLogSettings(statement_bytes=200))
    yield q
    q.close()


def test_an_event_becomes_an_entry(qlog, catalog_location):
    qlog.statement(event(why_not=(("shop.agg", "query range on day is wider than the datamap's"),)))
    qlog.statement(event(statement="SET spark.sql.shuffle.partitions=4", decision="local"))
    qlog.statement(event(statement="USE shop", decision="forwarded"))
    qlog.statement(event(statement="SHOW TABLES", decision="forwarded"))
    qlog.statement(event(statement="describe sales", decision="forwarded"))
    qlog.flush()
    [e] = QueryLog.reader(catalog_location).recent()
    assert isinstance(e, LoggedQuery) and e.id > 0
    assert (e.user, e.client, e.session_id, e.current_db) == ("ann", "Tableau", "s1", "shop")
    assert e.shape == "select region, sum(amount) from sales where day = ? group by region"
    assert len(e.shape_hash) == 16 and e.tables == ("shop.sales",)
    assert e.decision == "forwarded" and e.datamaps == () and e.reason_class == "filters"
    assert e.why_not == (("shop.agg", "query range on day is wider than the datamap's"),)
    assert (e.duration_s, e.rows, e.outcome, e.sqlstate, e.saved_s) == (2.0, 3, "FINISHED",
                                                                         None, None)
    assert abs(e.at - NOW) < 1e-3


def test_statements_are_redacted_and_cut(qlog):
    qlog.statement(event(statement="CREATE TABLE t USING jdbc OPTIONS (password 'hunter2') "
                                   "AS SELECT " + "x, " * 200 + "y FROM s", decision="forwarded"))
    qlog.flush()
    [e] = qlog.recent()
    assert "hunter2" not in e.statement and "hunter2" not in e.shape
    assert len(e.statement.encode()) < 240 and e.statement.endswith("bytes)")


def test_saved_time_is_the_base_median_minus_the_answer(qlog):
    for seconds in (4.0, 6.0, 5.0):
        qlog.statement(event(duration_s=seconds))
    qlog.statement(event(decision="served", datamaps=("shop.agg",), duration_s=0.5,
                         statement="select region, SUM(amount) from sales where day = '2027-02-02' "
                                   "group by region"))
    qlog.statement(event(decision="rewritten", datamaps=("shop.other",), duration_s=1.0,
                         statement="SELECT 1 FROM elsewhere"))
    qlog.flush()
    hit, other = qlog.recent(2, decision="served")[0], qlog.recent(1, datamap="other")[0]
    assert hit.saved_s == pytest.approx(4.5) and hit.reason_class is None
    assert other.saved_s is None                      # never answered from the base tables
    assert qlog.datamap_totals() == {"shop.agg": (1, pytest.approx(4.5)),
                                     "shop.other": (1, None)}     # not measured yet
    usage = qlog.datamap_usage(NOW - 3600, 60)
    assert [(name, hits) for _, name, hits, _ in usage] == [("shop.agg", 1), ("shop.other", 1)]
    assert usage[0][0] == (NOW // 60) * 60 and usage[0][3] == pytest.approx(4.5)
    # a new writer finds the base durations in the store
    again = QueryLog(qlog._store.writer.location)
    try:
        again.statement(event(decision="served", datamaps=("shop.agg",), duration_s=1.0))
        again.flush()
        assert again.recent(1)[0].saved_s == pytest.approx(4.0)
    finally:
        again.close()


def test_readers_filter_and_stream(qlog):
    qlog.write_many([_entry(i) for i in range(2500)])
    assert [e.id for e in qlog.recent(3)] == sorted((e.id for e in qlog.recent(3)), reverse=True)
    assert {e.user for e in qlog.recent(50, user="u1")} == {"u1"}
    assert {e.decision for e in qlog.recent(10, decision="rewritten")} == {"rewritten"}
    assert {e.datamaps for e in qlog.recent(10, datamap="agg_1")} == {("db.agg_1",)}
    assert qlog.recent(10, datamap="db.agg_1") == qlog.recent(10, datamap="agg_1")
    got = list(qlog.entries(NOW - 2000))
    assert len(got) == 2000 and got[0].at == NOW - 2000 and got[-1].at == NOW - 1
    assert [e.at for e in got] == sorted(e.at for e in got)
    assert len(list(qlog.entries(NOW - 10, NOW - 5))) == 5


def test_retention_and_max_entries(catalog_location):
    q = QueryLog(catalog_location, QueryLogSettings(retention="1h", max_entries=1000))
    try:
        q.write_many([_entry(i, at=NOW - 7200 - i) for i in range(300)] +
                     [_entry(i) for i in range(1500)])
        q._retain()
        left = list(q.entries(0))
        assert len(left) == 1000 and min(e.at for e in left) > NOW - 3600
        assert [e.shape for e in q.recent(1)] == ["select ? from t1499"]   # newest kept
    finally:
        q.close()


def test_disabled_records_nothing(catalog_location):
    q = QueryLog(catalog_location, QueryLogSettings(enabled=False))
    q.statement(event())
    q.flush()
    assert q.recent() == [] and q._thread is None
    q.close()


def test_a_writer_that_falls_behind_drops_the_oldest(tmp_path):
    seen: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: seen.append(record.getMessage())
    qlogger = logging.getLogger("proxy.querylog")     # whatever other tests configured
    qlogger.addHandler(handler)
    saved_level = qlogger.level
    qlogger.setLevel(logging.WARNING)
    q = QueryLog(str(tmp_path / "c.db"), queue_size=5)
    gate, holding = threading.Event(), threading.Event()
    insert = q._store.insert
    q._store.insert = lambda rows: (holding.set(), gate.wait(10), insert(rows))
    try:
        q.statement(event(statement="SELECT 0 FROM t"))
        assert holding.wait(10)                # the writer holds that one, blocked
        for i in range(1, 11):
            q.statement(event(statement=f"SELECT {i} FROM t{i}"))
        assert q.dropped == 5
        gate.set()
        q.flush()
        assert {e.tables[0] for e in q.recent()} == {"shop.t"} | {f"shop.t{i}" for i in range(6, 11)}
        assert any(m.startswith("query log: dropped 5 statements") for m in seen), seen
    finally:
        gate.set()
        q.close()
        qlogger.removeHandler(handler)
        qlogger.setLevel(saved_level)


def test_close_writes_what_was_observed(tmp_path):
    q = QueryLog(str(tmp_path / "c.db"))
    for i in range(300):
        q.statement(event(statement=f"SELECT a FROM t WHERE b = {i}"))
    q.close()
    assert len(QueryLog.reader(str(tmp_path / "c.db")).recent(1000)) == 300


# -- reason classes ---------------------------------------------------------------------

SCHEMAS = {"db1": {"sales": {"id": "int", "country": "string", "city": "string",
                             "qty": "int", "price": "double", "day": "date"},
                   "stores": {"id": "int", "name": "string"}}}
AGG = "SELECT country, sum(qty) FROM db1.sales WHERE day >= '2026-01-01' GROUP BY country"


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path, SCHEMAS)


JOINED = "SELECT t.name, sum(s.qty) FROM db1.sales s JOIN db1.stores t ON s.id = t.id GROUP BY t.name"
MISSES = [
    ("columns", "SELECT country, city, sum(qty) FROM sales WHERE day >= '2026-01-01' "
                "GROUP BY country, city"),
    ("grouping", "SELECT country, qty FROM sales WHERE day >= '2026-01-01'"),
    ("filters", "SELECT country, sum(qty) FROM sales WHERE day >= '2025-01-01' GROUP BY country"),
    ("aggregates", "SELECT country, sum(price) FROM sales WHERE day >= '2026-01-01' "
                   "GROUP BY country"),
    ("joins", "SELECT t.name, sum(s.qty) FROM sales s LEFT JOIN stores t ON s.id = t.id "
              "GROUP BY t.name"),
    ("joins", "SELECT id, sum(qty) FROM sales GROUP BY id"),
]


@pytest.mark.parametrize("cls,query", MISSES, ids=[f"{m[0]}-{i}" for i, m in enumerate(MISSES)])
def test_the_rewriters_reasons_fall_in_their_class(service, cls, query):
    """Real reasons: the rewriter's own, for datamaps that nearly answer."""
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    add_datamap(service, SCHEMAS, "db1", "j", JOINED)
    d = DatamapSelectHandler(service)(StatementContext("s", "u", "db1", {}, 10), query)
    assert isinstance(d, PassThrough) and d.why_not, d
    assert reason_class(tuple(w for w in d.why_not if w[0] == "db1.j") if cls == "joins"
                        else tuple(w for w in d.why_not if w[0] == "db1.agg")) == cls, d.why_not


def test_hits_and_bypasses_are_carried_on_the_decision(service):
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    h = DatamapSelectHandler(service, max_sql_bytes=300)
    q = "SELECT country, sum(qty) FROM sales WHERE day >= '2026-01-01' GROUP BY country"
    hit = h(StatementContext("s", "u", "db1", {}, 10), q)
    assert isinstance(hit, Rewrite) and hit.datamaps == ("db1.agg",) and not hit.why_not
    off = h(StatementContext("s", "u", "db1", {"datamap.rewrite.enabled": "false"}, 10), q)
    assert off.bypassed == "datamap rewriting is off for the session"
    long = h(StatementContext("s", "u", "db1", {}, 10), q + " -- " + "x" * 300)
    assert "rewrite_max_sql_bytes" in long.bypassed


def test_reason_class_rules():
    assert reason_class(()) == "no_datamap"
    assert reason_class((("a", "whatever"),), bypassed=True) == "bypassed"
    assert reason_class((("a", "datamap is DISABLED: deferred rebuild"),)) == "disabled"
    assert reason_class((("a", "stale: base table files changed (2 new files)"),
                         ("b", "query range on x is wider than the datamap's"))) == "stale"
    assert class_of("datamap is not in sync: segment 3 of db.t not refreshed yet") == "stale"
    assert class_of("schema of db.x not loaded yet") == "other"
    assert set(REASON_CLASSES) >= {class_of("x"), "no_datamap", "bypassed"}


def _entry(i: int, at: float | None = None) -> LoggedQuery:
    return LoggedQuery(
        id=0, at=NOW - 2500 + i if at is None else at, user=f"u{i % 3}", client="", session_id="s",
        shape_hash=f"{i:016x}", shape=f"select ? from t{i}", statement=f"SELECT {i} FROM t{i}",
        current_db="db", tables=(f"db.t{i}",), decision="rewritten" if i % 2 else "forwarded",
        datamaps=(f"db.agg_{i % 5}",) if i % 2 else (), why_not=(), reason_class=None,
        duration_s=0.1, rows=1, outcome="FINISHED", sqlstate=None, saved_s=None)


def test_entries_are_plain_data():
    e = _entry(1)
    assert dataclasses.replace(e, id=5).id == 5


def test_shapes_are_redacted_and_bounded_too(qlog):
    # a statement sqlglot does not parse is shaped from its tokens: an unquoted secret
    # (a URL's password) is no literal there, and its shape is as long as the statement
    qlog.statement(event(statement="ADD JAR hdfs://bob:hunter2@nn:8020/udf.jar",
                         decision="forwarded"))
    qlog.statement(event(statement="SELECT " + "x, " * 2000 + "y FROM s", decision="forwarded"))
    qlog.flush()
    long, jar = qlog.recent()
    assert "hunter2" not in jar.shape and "hunter2" not in jar.statement
    assert len(long.shape.encode()) < 240 and long.shape.endswith("bytes)")


def test_the_client_tool_name_is_bounded(qlog):
    # ApplicationName is whatever the client sends (SetClientInfo, OpenSession), stored
    # again with every statement of the session
    qlog.statement(event(client="T" * 100_000))
    qlog.flush()
    [e] = qlog.recent()
    assert e.client.startswith("TTT") and len(e.client.encode()) < 300


# -- why-not as the decision saw it ----------------------------------------------------

def test_a_miss_is_logged_with_the_reasons_its_decision_carried(service):
    """A query forwarded while its datamap was out of sync keeps that reason, though the
    datamap is in sync again by the time the log writes the row; and the client's
    operation log says the base tables answered while the datamap was refreshing."""
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    h = DatamapSelectHandler(service)
    q = "SELECT country, sum(qty) FROM sales WHERE day >= '2026-01-01' GROUP BY country"
    seg = service.catalog.add_base_segment("db1.sales", ["file:/w/db1.sales/b.parquet"])
    d = h(StatementContext("s", "u", "db1", {}, 10), q)
    assert isinstance(d, PassThrough) and d.after is None, d
    assert [n for n, _ in d.why_not] == ["db1.agg"]
    assert "not in sync" in d.why_not[0][1]
    assert d.log == ("answered from the base tables (datamap agg refreshing)",)
    # the refresh publishes before the row is written
    sid = service.catalog.begin_segment("db1", "agg", {"db1.sales": [seg.id]})
    service.catalog.publish_segment("db1", "agg", sid, rows=2, kind="refreshed")
    assert isinstance(h(StatementContext("s", "u", "db1", {}, 10), q), Rewrite)
    # a rewrite-off query decided now, while the datamap is in sync, is logged without
    # the reason of a later write
    off = h(StatementContext("s", "u", "db1", {"datamap.rewrite.enabled": "false"}, 10), q)
    service.catalog.set_status("db1", "agg", "DISABLED", "a later write")
    service.index()
    q_log = QueryLog(service.catalog.path)
    try:
        q_log.statement(event(statement=q, current_db="db1", why_not=d.why_not))
        q_log.statement(event(statement=q + " ", current_db="db1", decision="bypassed",
                              why_not=off.why_not))
        q_log.flush()
        bypassed, forwarded = q_log.recent(2)
    finally:
        q_log.close()
    assert forwarded.why_not == d.why_not and forwarded.reason_class == "stale"
    assert bypassed.why_not == () and bypassed.reason_class == "bypassed"


def test_a_datamap_left_out_is_named_only_for_queries_over_its_tables(service):
    add_datamap(service, SCHEMAS, "db1", "agg", AGG, lazy=True)    # DISABLED until REBUILD
    service.catalog.set_status("db1", "agg", "DISABLED", "deferred rebuild")
    h = DatamapSelectHandler(service)
    d = h(StatementContext("s", "u", "db1", {}, 10), "SELECT count(*) FROM sales")
    assert [n for n, _ in d.why_not] == ["db1.agg"] and "DISABLED" in d.why_not[0][1]
    assert d.log == ("answered from the base tables (datamap agg DISABLED)",)
    assert h(StatementContext("s", "u", "db1", {}, 10), "SELECT count(*) FROM stores") is None


def test_why_spark_answered_a_datamap_hit_is_logged_with_its_class(qlog):
    qlog.statement(event(decision="rewritten", datamaps=("shop.agg",),
                         not_served="not served locally: shop.agg_table reads 900 bytes, "
                                    "over [serving] max_datamap_bytes (10)"))
    qlog.statement(event(decision="served", datamaps=("shop.agg",), statement="SELECT 2"))
    qlog.flush()
    served, spark = qlog.recent(2)
    assert (served.not_served, served.not_served_class) == (None, None)
    assert spark.not_served.endswith("max_datamap_bytes (10)")
    assert spark.not_served_class == "size"


def test_not_served_classes():
    from proxy.observability.querylog.reasons import NOT_SERVED_CLASSES, not_served_class
    cases = {
        "[serving] enabled = false": "switched_off",
        "the session set datamap.serving.enabled=false": "switched_off",
        "compensated with new base files": "compensated",
        "local engine unavailable: duckdb not importable": "engine",
        "local engine: IO Error: no such file": "engine",
        "local engine: no answer within 5 s": "timeout",
        "not served locally: internal error (KeyError)": "internal",
        "not served locally: segment 2 of db.agg_table is no longer visible": "segments",
        "not served locally: WINDOW (SUM(x) OVER ()) is outside what the local engine "
        "computes": "construct",
        "rewritten SQL not understood (ParseError)": "construct",
        "something new": "other",
    }
    for reason, cls in cases.items():
        assert not_served_class(reason) == cls, reason
        assert cls in NOT_SERVED_CLASSES
    assert not_served_class("") is None


def test_an_audited_base_table_run_measures_what_a_hit_saves(qlog):
    """A datamap that answers every query of its shape never sees it on the base tables;
    the online audit's runs there measure the saving instead (an estimate)."""
    q = "SELECT region, sum(amount) FROM sales WHERE day = '2026-01-01' GROUP BY region"
    qlog.statement(event(statement=q, decision="served", datamaps=("shop.agg",), duration_s=0.1))
    qlog.flush()
    qlog.base_run(q.replace("2026-01-01", "2026-02-02"), "shop", 3.1)
    qlog.statement(event(statement=q, decision="served", datamaps=("shop.agg",), duration_s=0.1))
    qlog.flush()
    later, first = qlog.recent(2)
    assert first.saved_s is None                     # nothing measured yet
    assert later.saved_s == pytest.approx(3.0)
    assert qlog.datamap_totals() == {"shop.agg": (2, pytest.approx(3.0))}
    assert qlog.datamap_measured() == {"shop.agg": 1}        # one of its two hits


def test_the_estimate_scales_with_the_base_tables_rows(catalog_location):
    """The base tables grew threefold since the audited run: a hit's estimate is three
    times the run's time, minus its own (saving.py); rows are read from the catalog's
    count (Catalog.base_rows) of the tables the shape reads."""
    rows = {"shop.sales": 1_000_000}
    asked = []

    def base_rows(tables):
        asked.append(tuple(tables))
        return sum(rows[t] for t in tables)
    q = QueryLog(catalog_location, base_rows=base_rows)
    try:
        stmt = "SELECT region, sum(amount) FROM sales WHERE day = '2026-01-01' GROUP BY region"
        q.base_run(stmt, "shop", 2.0)
        q.flush()
        q.statement(event(statement=stmt, decision="served", datamaps=("shop.agg",),
                          duration_s=0.5))
        q.flush()
        rows["shop.sales"] = 3_000_000
        q._rows.clear()                       # as ROWS_TTL_S later
        q.statement(event(statement=stmt, decision="served", datamaps=("shop.agg",),
                          duration_s=0.5))
        q.flush()
        later, first = q.recent(2)
        assert first.saved_s == pytest.approx(1.5) and later.saved_s == pytest.approx(5.5)
        assert q.datamap_totals() == {"shop.agg": (2, pytest.approx(7.0))}
        assert q.datamap_measured() == {"shop.agg": 2}
        assert set(asked) == {("shop.sales",)}
    finally:
        q.close()
