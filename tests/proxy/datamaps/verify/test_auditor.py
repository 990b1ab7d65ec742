"""The audit's pure parts (no Spark): comparing answers, which query is audited, the ring
of recent queries and the sampling queue that offer() fills on the decision path, the
per-datamap and global bounds, AUDIT DATAMAP's grammar and the setting."""
from __future__ import annotations

from decimal import Decimal

import threading

import pytest

from proxy import config
from proxy.datamaps.ddl import parser as ddl
from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.datamaps.verify import auditor as audit_mod
from proxy.datamaps.verify import ring as audit_ring
from proxy.datamaps.verify.auditor import Auditor
from proxy.datamaps.verify.compare import NotAuditable, audited_form, compare, digest
from proxy.routing.classify import Kind, classify
from proxy.routing.router import Local, Rewrite, StatementContext
from rewriter.api import RewriteResult
from tests.support.datamaps import add_datamap, decision_service

SCHEMAS = {"db1": {"sales": {"country": "string", "qty": "int", "price": "double"}}}
AGG = "SELECT country, sum(qty), sum(price) FROM db1.sales GROUP BY country"
D = [("country", "string"), ("s", "double")]


def test_answers_are_multisets_with_a_tolerance_for_doubles_only():
    rows = [("de", 0.1 + 0.2), ("de", 1e300), ("fr", None), (None, float("nan")), ("x", -0.0)]
    other = [("x", 0.0), (None, float("nan")), ("fr", None), ("de", 1e300 * (1 + 1e-12)),
             ("de", 0.3)]
    assert compare(D, rows, D, other) is None
    assert compare(D, [("de", 1.0)], D, [("de", 1.0 + 1e-6)]).text.startswith("1 rows")
    assert compare(D, [("de", 1.0), ("de", 1.0)], D, [("de", 1.0)]) is not None  # duplicates
    assert compare(D, [("de", None)], D, [("de", 0.0)]) is not None
    dec = [("country", "string"), ("s", "decimal(20,2)")]
    assert compare(dec, [("de", Decimal("1.50"))], dec, [("de", Decimal("1.5"))]) is None
    diff = compare(dec, [("de", Decimal("1.50"))], dec, [("de", Decimal("1.51"))])
    assert diff and diff.text.endswith("base tables has ('de', 1.50) x1, datamap none; datamap "
                                       "has ('de', 1.51) x1, base tables none")
    diff = compare(D, [("de", 1.0)], D, [("de", 1.5)])
    assert diff.text.endswith("base tables has ('de', 1.0) x1, datamap has ('de', 1.5) x1")
    assert "column types differ" in compare(D, [], dec, []).text
    assert "column names differ" in compare(D, [], [("c", "string"), ("t", "double")], []).text
    # near-ties that sorted pairing would cross are matched one by one
    two = [("k", "string"), ("a", "double"), ("b", "double")]
    assert compare(two, [("k", 1.0, 2.0), ("k", 1.0 + 1e-13, 1.0)],
                   two, [("k", 1.0 + 1e-13, 2.0), ("k", 1.0, 1.0)]) is None


def test_the_audited_form_and_the_digest():
    assert audited_form("SELECT a, sum(x) FROM t GROUP BY a ORDER BY 2 DESC LIMIT 3") == \
        "SELECT a, SUM(x) FROM t GROUP BY a ORDER BY 2 DESC"
    for sql in ("SELECT rand() FROM t", "SELECT * FROM (SELECT a FROM t LIMIT 3) x",
                "SELECT row_number() OVER (ORDER BY a) FROM t", "SELECT first(a) FROM t",
                "SELECT a FROM t TABLESAMPLE (10 PERCENT)", "SELECT ((("):
        with pytest.raises(NotAuditable):
            audited_form(sql)
    assert digest("SELECT  a FROM t") == digest("select a\nfrom t") != digest("SELECT b FROM t")
    assert len(digest("SELECT 1")) == 12


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path, SCHEMAS)


def _ctx(db="db1"):
    return StatementContext("s", "me", db, {}, 10)


def _result(*used):
    return RewriteResult("SELECT 1", True, list(used))


def test_offer_keeps_a_bounded_ring_and_samples_into_a_bounded_queue(service):
    draws = iter([0.5, 0.005] * 100)
    a = Auditor(service, rate=0.01, rng=lambda: next(draws))
    a.offer("SELECT 1", _ctx(), RewriteResult("SELECT 1", True))   # timeseries only: nothing
    assert a.recent("db1.agg") == [] and a._queue.qsize() == 0
    a.offer("q1", _ctx(), _result("db1.agg"))          # 0.5: remembered, not sampled
    a.offer("q2", _ctx(), _result("db1.agg", "db1.other"))
    assert a.recent("db1.agg") == [("db1", "q2"), ("db1", "q1")]
    assert a.recent("db1.other") == [("db1", "q2")] and a._queue.qsize() == 1
    a.offer("q1", _ctx(), _result("db1.agg"))          # again: newest, not twice
    assert a.recent("db1.agg") == [("db1", "q1"), ("db1", "q2")]
    for i in range(40):
        a.offer(f"q{i}", _ctx("db2"), _result("db1.agg"))
    assert len(a.recent("db1.agg")) == audit_ring.RING_ENTRIES
    assert a.recent("db1.agg")[0] == ("db2", "q39")
    assert a._queue.qsize() == audit_mod.QUEUE_SIZE and a.dropped == 21 - audit_mod.QUEUE_SIZE
    big = "x" * (audit_ring.RING_BYTES // 3)
    for i in range(3):
        a.offer(big + str(i), _ctx(), _result("db1.big"))
    assert len(a.recent("db1.big")) == 2                # bytes-bounded too
    a.offer("y" * (audit_ring.RING_BYTES + 1), _ctx(), _result("db1.huge"))
    assert a.recent("db1.huge") == []
    a.queries.total_bytes = 3 * audit_ring.RING_BYTES
    for n in range(4):
        for i in range(3):
            a.offer(big + str(i), _ctx(), _result(f"db1.m{n}"))
    assert a.recent("db1.agg") == [] and len(a.recent("db1.m3")) == 2   # LRU datamaps go
    assert a.queries.bytes <= a.queries.total_bytes
    off = Auditor(service, rate=0.0, rng=lambda: 0.0)
    off.offer("q", _ctx(), _result("db1.agg"))
    assert off._queue.qsize() == 0 and off.recent("db1.agg") == [("db1", "q")]


def test_a_reloaded_rate_samples_from_then_on_and_starts_the_worker_once(service):
    """SIGHUP's callback (proxy/app.py): off at start, no worker; a rate above 0 starts
    one, and only one however often it is set; 0 again stops sampling."""
    started = []

    class Background:
        def thread(self, name, target):
            started.append(name)

    a = Auditor(service, rate=0.0, rng=lambda: 0.5)
    a.start(Background())
    a.offer("q1", _ctx(), _result("db1.agg"))
    assert started == [] and a._queue.qsize() == 0
    a.set_rate(1.0)
    a.set_rate(0.75)
    assert started == ["datamap-audit"]
    a.offer("q2", _ctx(), _result("db1.agg"))
    assert a._queue.qsize() == 1
    a.set_rate(0.0)
    a.offer("q3", _ctx(), _result("db1.agg"))
    assert a._queue.qsize() == 1 and started == ["datamap-audit"]


def test_one_audit_per_datamap_and_a_global_bound(service):
    a = Auditor(service)
    assert a._claim(["db1.a"]) and not a._claim(["db1.a"]) and not a._claim(["db1.b", "db1.a"])
    assert a._claim(["db1.b"]) and not a._claim(["db1.c"])      # MAX_RUNNING = 2
    a._release(["db1.a"])
    assert a._claim(["db1.c"])
    assert a.audit_query(["db1.c"], "db1", "SELECT 1") is None   # running: skipped
    threading.Timer(0.05, a._release, (["db1.c"],)).start()
    assert a._claim(["db1.c"], wait=30)          # AUDIT DATAMAP waits for the running one


def test_the_select_handler_offers_what_it_rewrites(service):
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    a = Auditor(service)
    select = DatamapSelectHandler(service, audit=a)
    q = "SELECT country, sum(qty) FROM db1.sales GROUP BY country"
    try:
        assert isinstance(select(_ctx(), q), Rewrite)
        assert select(_ctx(), "SELECT 1") is None
    finally:
        select.close()
    assert a.recent("db1.agg") == [("db1", q)]


async def test_audit_datamap_statement(service, monkeypatch):
    assert classify("AUDIT DATAMAP x").kind is Kind.DATAMAP
    assert classify("/* c */ audit  datamap db.x").kind is Kind.DATAMAP
    assert ddl.parse("AUDIT DATAMAP `db1`.agg") == ddl.AuditDatamap(ddl.Name("agg", "db1"))
    for bad in ("AUDIT DATAMAP", "AUDIT DATAMAP a b", "AUDIT DATAMAP a-b"):
        with pytest.raises(ddl.DdlError) as e:
            ddl.parse(bad)
        assert e.value.sqlstate == "42000"
    assert ddl.parse("AUDIT TABLE x") is None
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    a = Auditor(service)
    h = DatamapDdlHandler(service, audit=a)
    decision = h(_ctx(), "AUDIT DATAMAP agg")
    assert isinstance(decision, Local) and decision.note == "datamap:AuditDatamap"
    a._claim(["db1.agg"])                 # one is running: waited for, then skipped
    monkeypatch.setattr(audit_mod, "ON_DEMAND_WAIT_S", 0.1)
    res = await decision.runner(None)
    assert [c for c, _ in res.columns] == ["DataMapName", "Audited", "Compared", "Outcome",
                                           "Rows", "Detail"]
    assert res.rows == [("agg", "-", "-", "SKIPPED", None,
                         "an audit of datamap db1.agg is running")]
    from proxy.errors import ClientError
    with pytest.raises(ClientError) as e:
        await h(_ctx(), "AUDIT DATAMAP nope").runner(None)
    assert e.value.sqlstate == "42S02"


def test_audit_sample_rate_setting():
    assert config.load(env={}).datamaps.audit_sample_rate == 0.01
    env = {"DATAMAP_PROXY_DATAMAPS_AUDIT_SAMPLE_RATE": "0"}
    assert config.load(env=env).datamaps.audit_sample_rate == 0.0
    for bad in ("1.01", "-1", "nan", "often"):
        with pytest.raises(config.ConfigError) as e:
            config.load(env={"DATAMAP_PROXY_DATAMAPS_AUDIT_SAMPLE_RATE": bad})
        assert "audit_sample_rate" in str(e.value)
