"""The online audit on a real SparkSession (proxy/datamaps/verify/auditor.py): an intact datamap
(doubles, decimals, NULLs, several segments) passes however often it is audited; a write
during an audit, or files the catalog has not seen, make it INCONCLUSIVE; a corrupted
segment is caught by AUDIT DATAMAP and by sampling, and the datamap is DISABLED with the
reason shown by SHOW DATAMAP and EXPLAIN, until REBUILD."""
from __future__ import annotations

import re
import time
import uuid

import pytest

from proxy.background import Background
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.datamaps.service import DatamapService
from proxy.datamaps.verify.auditor import Auditor
from proxy.routing.router import LocalResult, PassThrough, Rewrite, StatementContext

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

ROWS = ["('de', 3, 0.1, 12.50)", "('de', -1, 0.2, -3.25)", "('fr', NULL, 1e-3, NULL)",
        "(NULL, 7, NULL, 1.01)", "('it', 2, 1e300, 0.07)", "('de', 5, 0.7, 99999999.99)"]
MORE = ["('fr', 4, 0.3, 7.77)", "('zz', 0, -0.1, 0.00)", "(NULL, 1, 2.5, NULL)"]
QUERIES = [
    "SELECT country, sum(qty) q, sum(price) p, sum(amount) a FROM {t} GROUP BY country",
    "SELECT sum(price), avg(price), count(*), max(price), min(amount) FROM {t}",
    "SELECT country, avg(amount) FROM {t} WHERE country IS NOT NULL GROUP BY country "
    "ORDER BY 2 DESC LIMIT 2",
]


async def _explain_upstream(sql):
    return LocalResult((("plan", "string"),), [("== Physical Plan ==",)])


@pytest.fixture(scope="module")
def env(pipeline_spark, pipe_db, tmp_path_factory):
    spark = pipeline_spark
    t = f"facts_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE TABLE {pipe_db}.{t} (country STRING, qty INT, price DOUBLE, "
              "amount DECIMAL(10,2)) USING parquet")
    spark.sql(f"INSERT INTO {pipe_db}.{t} VALUES " + ", ".join(ROWS[:3]))
    catalog = Catalog.in_state_dir(tmp_path_factory.mktemp("audit"))
    svc = DatamapService(catalog, lambda: spark)
    auditor = Auditor(svc)
    ddl = DatamapDdlHandler(svc, audit=auditor)
    select = DatamapSelectHandler(svc, audit=auditor)
    ctx = StatementContext("s", "me", pipe_db, {}, 10)

    async def run(sql, handler=ddl):
        return await handler(ctx, sql).runner(_explain_upstream)
    yield dict(spark=spark, db=pipe_db, t=t, svc=svc, catalog=catalog, auditor=auditor,
               select=select, ctx=ctx, run=run, queries=[q.format(t=t) for q in QUERIES])
    select.close()
    svc.close()
    catalog.close()


def _load(env, rows):
    env["spark"].sql(f"INSERT INTO {env['db']}.{env['t']} VALUES " + ", ".join(rows))
    env["svc"].after_load(f"{env['db']}.{env['t']}")


def _corrupt(env):
    """One more copy of a stored row in a visible segment: its group's sums count twice."""
    db = env["db"]
    sid = env["catalog"].visible_segments(db, "agg")[0].id
    cols = ", ".join(f"`{c.name}`" for c in env["catalog"].get_datamap(db, "agg")
                     .definition.columns)
    env["spark"].sql(f"INSERT INTO {db}.agg_table_segments PARTITION (dm_segment_id='{sid}') "
                     f"SELECT {cols} FROM {db}.agg_table_segments WHERE dm_segment_id = '{sid}' "
                     "AND country = 'de'")


def _outcomes(result):
    return [r[3] for r in result.rows]


async def test_an_intact_datamap_passes_every_audit(env):
    await env["run"](f"CREATE DATAMAP agg AS SELECT country, sum(qty), sum(price), "
                     f"sum(amount), count(*), max(price), min(amount), avg(price), "
                     f"avg(amount) FROM {env['t']} GROUP BY country")
    _load(env, ROWS[3:])
    _load(env, MORE)                                # three segments
    assert len(env["catalog"].visible_segments(env["db"], "agg")) == 3
    # nothing answered yet: AUDIT DATAMAP checks the definition against the segments
    res = await env["run"]("AUDIT DATAMAP agg")
    assert _outcomes(res) == ["PASSED"] and res.rows[0][1].startswith("definition ")
    assert "vs segments 0-2 re-aggregated" in res.rows[0][2]
    for q in env["queries"]:
        assert isinstance(env["select"](env["ctx"], q), Rewrite), q
    for q in env["queries"]:
        report = env["auditor"].audit_query([f"{env['db']}.agg"], env["db"], q)
        assert report.outcome == "PASSED", report
    res = await env["run"](f"AUDIT DATAMAP {env['db']}.agg")
    assert _outcomes(res) == ["PASSED"], res.rows
    assert res.rows[0][2] == ("original query on the base tables vs rewritten SQL on "
                              "Spark") and res.rows[0][4] == 4    # the newest: LIMIT gone
    assert env["catalog"].get_datamap(env["db"], "agg").status == "ENABLED"


async def test_a_write_during_an_audit_is_inconclusive(env):
    a, q, name = env["auditor"], env["queries"][0], f"{env['db']}.agg"
    a.between_runs = lambda: env["spark"].sql(
        f"INSERT INTO {env['db']}.{env['t']} VALUES ('de', 100, 1.0, 1.00)")
    try:
        report = a.audit_query([name], env["db"], q)
    finally:
        a.between_runs = None
    assert report.outcome == "INCONCLUSIVE" and "written during the audit" in report.detail
    # the file is there, the catalog has not seen it (written outside the proxy)
    report = a.audit_query([name], env["db"], q)
    assert report.outcome == "INCONCLUSIVE" and "SYNC DATAMAPS" in report.detail
    env["svc"].after_load(f"{env['db']}.{env['t']}")
    assert a.audit_query([name], env["db"], q).outcome == "PASSED"
    assert env["catalog"].get_datamap(env["db"], "agg").status == "ENABLED"
    assert "audit_mismatch" not in {e.kind for e in env["catalog"].events(env["db"], "agg")}


async def test_a_corrupted_segment_is_caught_and_the_datamap_disabled(env):
    db, q = env["db"], env["queries"][0]
    _corrupt(env)
    res = await env["run"]("AUDIT DATAMAP agg")
    assert _outcomes(res)[0] == "MISMATCH", res.rows
    detail = res.rows[0][5]
    m = re.search(r"DISABLED: (audit mismatch on ([0-9a-f]{12}) at "
                  r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC)", detail)
    assert m and "base tables has ('de'" in detail, detail
    reason = m.group(1)
    rec = env["catalog"].get_datamap(db, "agg")
    assert rec.status == "DISABLED" and rec.status_reason == reason
    events = [e for e in env["catalog"].events(db, "agg") if e.kind == "audit_mismatch"]
    assert len(events) == 1 and m.group(2) in events[0].detail
    shown = (await env["run"]("SHOW DATAMAP")).rows
    assert [r[4:5] + r[6:7] for r in shown if r[0] == "agg"] == [("DISABLED", reason)]
    plan = (await env["run"](f"EXPLAIN {q}")).rows[0][0]
    assert f"Skipped agg: datamap is DISABLED: {reason}" in plan, plan
    # the base tables answer (after REFRESH TABLE when the proxy saw the table change)
    decision = env["select"](env["ctx"], q)
    assert decision is None or isinstance(decision, PassThrough), decision
    await env["run"]("REBUILD DATAMAP agg")                # built anew, enabled
    assert env["catalog"].get_datamap(db, "agg").status == "ENABLED"
    assert isinstance(env["select"](env["ctx"], q), Rewrite)
    assert _outcomes(await env["run"]("AUDIT DATAMAP agg")) == ["PASSED"]


async def test_sampling_catches_a_corrupted_segment(env):
    db, q = env["db"], env["queries"][1]
    background = Background()
    sampled = Auditor(env["svc"], rate=1.0)
    sampled.start(background)
    select = DatamapSelectHandler(env["svc"], audit=sampled)
    try:
        _corrupt(env)
        assert isinstance(select(env["ctx"], q), Rewrite)  # answered; audited behind it
        deadline = time.monotonic() + 120
        while (env["catalog"].get_datamap(db, "agg").status == "ENABLED"
               and time.monotonic() < deadline):
            time.sleep(0.2)
        rec = env["catalog"].get_datamap(db, "agg")
        assert rec.status == "DISABLED" and rec.status_reason.startswith("audit mismatch on ")
    finally:
        sampled.close()
        select.close()
        await background.stop(30)
