"""proxy/observability/metrics/registry.py and proxy/observability/metrics/collect.py: events in, exposition text out (no
Spark, no sockets); the catalog read at scrape time is a real catalog (SQLite and
PostgreSQL)."""
from __future__ import annotations

import time

import pytest
from prometheus_client.parser import text_string_to_metric_families

from proxy.datamaps.catalog.store import Catalog
from proxy.observability.metrics import registry as metrics_mod
from proxy.observability.metrics.collect import DatamapCollector
from proxy.observability.metrics.registry import Metrics, reason_class
from proxy.observability.observe import StatementEvent
from proxy.observability.querylog.reasons import reason_class as querylog_class


def samples(m: Metrics) -> dict[tuple, float]:
    """{(sample name, sorted label items): value} of one scrape."""
    out = {}
    for fam in text_string_to_metric_families(m.render().decode()):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(got: dict, name: str, **labels) -> float | None:
    return got.get((name, tuple(sorted(labels.items()))))


def event(statement="SELECT a FROM t", decision="forwarded", **kw) -> StatementEvent:
    return StatementEvent(at=time.time(), session_id="s1", user="ann", client="",
                          statement=statement, current_db="default", decision=decision, **kw)


P = "datamap_proxy_"


def test_connections_sessions_and_rpcs():
    m = Metrics()
    m.connection("open", "binary")
    m.connection("open", "http")
    m.connection("open", "binary")
    m.connection("close", "binary")
    m.session("open", "ann")
    m.session("open", "bob")
    m.session("close", "bob")
    m.session("refused", "mallory")
    m.rpc("ExecuteStatement", 0.0002, True)
    m.rpc("ExecuteStatement", 3.0, False)
    got = samples(m)
    assert value(got, P + "connections_open", transport="binary") == 1
    assert value(got, P + "connections_open", transport="http") == 1
    assert value(got, P + "connections_total", transport="binary") == 2
    assert value(got, P + "sessions_open", user="ann") == 1
    assert value(got, P + "sessions_open", user="bob") == 0
    assert value(got, P + "sessions_opened_total") == 2
    assert value(got, P + "sessions_refused_total") == 1
    assert not any("mallory" in str(k) for k in got)        # refused logins are no label
    h = P + "rpc_duration_seconds_bucket"
    assert value(got, h, method="ExecuteStatement", le="0.00025") == 1
    assert value(got, h, method="ExecuteStatement", le="2.5") == 1
    assert value(got, h, method="ExecuteStatement", le="5.0") == 2
    assert value(got, P + "rpc_errors_total", method="ExecuteStatement") == 1


def test_user_labels_are_capped(monkeypatch):
    monkeypatch.setattr(metrics_mod, "MAX_USER_LABELS", 2)
    m = Metrics()
    for u in ("a", "b", "c", "d"):
        m.session("open", u)
    m.session("close", "d")
    got = samples(m)
    assert value(got, P + "sessions_open", user="a") == 1
    assert value(got, P + "sessions_open", user="other") == 1     # c open, d closed
    assert value(got, P + "sessions_open", user="c") is None


def test_statements_decisions_and_datamap_hits():
    m = Metrics()
    m.statement(event(decision="rewritten", datamaps=("default.agg",), duration_s=0.3))
    m.statement(event(decision="served", datamaps=("default.agg",), duration_s=0.002))
    m.statement(event(decision="served", datamaps=("default.agg",),
                      note="rewrite:mv:agg served=local cache=hit"))
    # a hit that failed (a decision, no answer): not the datamap's hit
    m.statement(event(decision="rewritten", datamaps=("default.agg",), outcome="ERROR"))
    m.statement(event(why_not=(("default.agg", "query range on ts is wider than the "
                                "datamap's"),)))
    m.statement(event(why_not=(("default.agg", "stale: base table files changed (x)"),)))
    m.statement(event())                                    # no datamap over its tables
    m.statement(event(decision="bypassed"))
    m.statement(event("CREATE TABLE x (a INT)"))            # not a query: no rewrite decision
    m.statement(event("SELECT nope", outcome="ERROR", sqlstate="42000"))
    m.statement(event("CREATE DATAMAP d AS SELECT 1", decision="local"))
    got = samples(m)
    d = P + "rewrite_decisions_total"
    assert value(got, d, result="hit", reason="") == 4
    assert value(got, d, result="miss", reason="filters") == 1
    assert value(got, d, result="miss", reason="stale") == 1
    assert value(got, d, result="miss", reason="no_datamap") == 2
    assert value(got, d, result="bypassed", reason="bypassed") == 1
    assert value(got, P + "datamap_hits_total", datamap="default.agg") == 3
    assert value(got, P + "datamap_served_total", datamap="default.agg") == 2
    o = P + "operations_total"
    assert value(got, o, kind="forwarded", outcome="finished") == 4
    assert value(got, o, kind="forwarded", outcome="error") == 1
    assert value(got, o, kind="local", outcome="finished") == 1
    s = P + "statement_duration_seconds_bucket"
    assert value(got, s, decision="served", le="0.0025") == 2
    assert value(got, s, decision="rewritten", le="0.25") == 1
    assert value(got, s, decision="rewritten", le="0.5") == 2


def test_datamap_answers_spark_computed_are_counted_by_reason_class():
    m = Metrics()
    m.statement(event(decision="rewritten", datamaps=("default.agg",),
                      not_served="not served locally: INITCAP(agg.country) is outside what "
                                 "the local engine computes"))
    m.statement(event(decision="rewritten", datamaps=("default.agg",),
                      not_served="local engine: no answer within 5 s"))
    m.statement(event(decision="rewritten", datamaps=("default.agg",),
                      not_served="a reason added later"))
    m.statement(event(decision="served", datamaps=("default.agg",)))
    got = samples(m)
    n = P + "not_served_total"
    assert value(got, n, reason="construct") == 1
    assert value(got, n, reason="timeout") == 1
    assert value(got, n, reason="other") == 1
    assert sum(v for (name, _), v in got.items() if name == n) == 3


@pytest.mark.parametrize("reason", [
    "datamap is DISABLED: audit mismatch",
    "query is not an aggregate; the datamap holds one row per group",
    "column sales.price is not in datamap agg",
    "something new",
])
def test_misses_are_classed_as_the_query_log_classes_them(reason):
    """One classifier (proxy/observability/querylog/reasons.py) for the metrics and the query log."""
    assert reason_class((("default.agg", reason),)) == querylog_class((("default.agg", reason),))


def _catalog_with_history(catalog: Catalog, files_dir) -> None:
    catalog.create_datamap("default", "agg", provider="mv", select_sql="SELECT 1",
                           base_tables=["default.sales"])
    catalog.create_datamap("default", "lazy", provider="mv", select_sql="SELECT 1",
                           base_tables=["default.sales"], lazy=True)
    b0 = catalog.add_base_segment("default.sales", ["file:/x/0"], load_start=1000.0,
                                  load_seconds=1.0)
    f = files_dir / "part-0.parquet"
    f.write_bytes(b"x" * 1234)
    sid = catalog.begin_segment("default", "agg", {"default.sales": [b0.id]})
    catalog.publish_segment("default", "agg", sid, rows=7, files=[f"file:{f}"], seconds=2.5,
                            kind="built")
    bad = catalog.begin_segment("default", "agg", {"default.sales": [b0.id]})
    catalog.fail_segment("default", "agg", bad, "disk full", disable=False)
    catalog.add_base_segment("default.sales", ["file:/x/1"], load_start=2000.0, load_seconds=0.5)


@pytest.fixture
def catalog(catalog_location):
    c = Catalog(catalog_location)
    yield c
    c.close()


def test_collector_reads_the_catalog(catalog, tmp_path):
    _catalog_with_history(catalog, tmp_path)

    class Totals:             # the query log's reader (datamap_totals) as the collector sees it
        def datamap_totals(self):
            return {"default.agg": (4, 12.5)}
    m = Metrics(DatamapCollector(catalog, querylog=Totals(), clock=lambda: 2100.5))
    got = samples(m)
    assert value(got, P + "catalog_up") == 1
    st = P + "datamap_status"
    assert value(got, st, datamap="default.agg", provider="mv", status="ENABLED") == 1
    assert value(got, st, datamap="default.lazy", provider="mv", status="DISABLED") == 1
    assert value(got, st, datamap="default.lazy", provider="mv", status="ENABLED") == 0
    seg = P + "datamap_segments"
    assert value(got, seg, datamap="default.agg", status="SUCCESS") == 1
    assert value(got, seg, datamap="default.agg", status="FAILED") == 1
    assert value(got, P + "datamap_rows", datamap="default.agg") == 7
    assert value(got, P + "datamap_size_bytes", datamap="default.agg") == 1234
    # segment 1 of sales (ended at 2000.5) is not in the datamap: 100 s behind
    assert value(got, P + "datamap_staleness_seconds", datamap="default.agg") == 100.0
    assert value(got, P + "datamap_staleness_seconds", datamap="default.lazy") == 1099.5
    job = P + "datamap_job_duration_seconds"
    assert value(got, job + "_count", datamap="default.agg", job="built") == 1
    assert value(got, job + "_sum", datamap="default.agg", job="built") == 2.5
    assert value(got, P + "datamap_job_last_duration_seconds", datamap="default.agg",
                 job="built") == 2.5
    assert value(got, P + "datamap_job_failures_total", datamap="default.agg") == 1
    assert value(got, P + "datamap_saved_seconds_total", datamap="default.agg") == 12.5
    # an estimate, and said so where it is scraped
    assert "# HELP datamap_proxy_datamap_saved_seconds_total Estimated base-table seconds " \
           "saved by datamap answers: an estimate from the base-table time of their shapes, " \
           "scaled by the base tables' rows" in m.render().decode()
    version = [k for k in got if k[0] == P + "build_info"]
    assert version and dict(version[0][1])["version"]


def test_collector_without_catalog_still_answers(tmp_path):
    catalog = Catalog(str(tmp_path / "c.db"))
    catalog.close()                   # every read now fails
    got = samples(Metrics(DatamapCollector(catalog)))
    assert value(got, P + "catalog_up") == 0
    assert any(k[0] == P + "build_info" for k in got)


def test_observer_cost_per_statement_is_a_few_microseconds():
    m = Metrics()
    evs = [event(decision="rewritten", datamaps=("default.agg",)), event(),
           event(why_not=(("default.agg", "column price is not in the datamap"),))]
    for ev in evs:
        m.statement(ev)
    n = 3000
    t0 = time.process_time()        # the CPU it costs: a loaded box stretches wall time
    for i in range(n):
        m.statement(evs[i % 3])
        m.rpc("ExecuteStatement", 0.001, True)
    per = (time.process_time() - t0) / n
    assert per < 100e-6, f"{per * 1e6:.1f} µs per statement"


def test_every_metric_is_documented_and_every_documented_one_exported(tmp_path):
    import re
    from pathlib import Path

    from proxy.hs2.recovery import UpstreamHealth
    from proxy.serving import ServingTier
    doc = (Path(__file__).resolve().parents[3] / "docs" / "metrics.md").read_text()
    documented = {re.sub(r"_total$", "", n) for row in doc.splitlines()
                  if row.startswith("| `datamap_proxy_")
                  for n in re.findall(r"`(datamap_proxy_\w+)`", row.split(" | ")[0])}
    catalog = Catalog(str(tmp_path / "c.db"))
    _catalog_with_history(catalog, tmp_path)

    class Totals:
        def datamap_totals(self):
            return {"default.agg": (1, 2.0)}
    from proxy.serving.mirror import SegmentMirror
    from proxy.serving.tier import local_path
    from tests.support.mirror import LocalFiles
    serving = ServingTier(catalog, mirror=SegmentMirror(catalog, tmp_path / "mirror",
                                                        LocalFiles(), local=local_path))
    health = UpstreamHealth("sts:10000")
    m = Metrics(DatamapCollector(catalog, serving, Totals(), lambda: health))
    m.connection("open", "binary")
    m.session("open", "ann")
    m.session("refused", "bob")
    m.rpc("OpenSession", 0.01, False)
    m.statement(event(decision="served", datamaps=("default.agg",)))
    exported = {f.name for f in text_string_to_metric_families(m.render().decode())
                if not f.name.endswith("_created")}      # prometheus-client's, noted in the doc
    catalog.close()
    assert exported - documented == set(), "exported but not in docs/metrics.md"
    assert documented - exported == set(), "documented but not exported"
