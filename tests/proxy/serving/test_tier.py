"""The serving tier's decisions and answers without Spark: a real catalog (SQLite), real
Parquet files written by DuckDB in the datamap table's layout, the real DuckDB engine.
What Spark would answer is checked by the Spark tiers (tests/e2e/test_serving.py,
test_types_spark.py); here: which queries are served, the cache keys, the fall-backs."""
from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from contextlib import contextmanager

import duckdb
import pytest

from proxy.config import ServingSettings
from proxy.datamaps.explain import served_lines
from proxy.datamaps.handler import DatamapSelectHandler
from proxy.routing.router import Rewrite, Serve, StatementContext
from proxy.serving import ServingTier
from proxy.serving.engine import LocalEngine
from proxy.serving.tier import local_path
from tests.support.datamaps import add_datamap, decision_service
from tests.support.serving_tier import TIER_AGG, TIER_QUERY, TIER_SCHEMAS, publish


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path / "state", TIER_SCHEMAS)


def _ctx(**conf):
    return StatementContext("s1", "me", "db1", dict(conf), 10)


@pytest.fixture
def setup(service, tmp_path):
    d = add_datamap(service, TIER_SCHEMAS, "db1", "agg", TIER_AGG, build=False)
    assert [c.name for c in d.columns] == ["country", "sum_qty", "sum_amount", "count_amount",
                                           "count_star"]
    service.catalog.add_base_segment("db1.sales", ["file:/w/a.parquet"])
    publish(service, tmp_path, [("de", 3, "1.50", 1, 1), ("fr", None, None, 0, 2)])
    return service


@contextmanager
def handler(service, **settings):
    """(the SELECT handler, its serving tier), both closed afterwards."""
    tier = ServingTier(service.catalog, ServingSettings(**settings))
    h = DatamapSelectHandler(service, serving=tier)
    try:
        yield h, tier
    finally:
        h.close()
        tier.close()


def answer(decision):
    return asyncio.run(decision.attempt())


def test_a_datamap_hit_is_served_and_then_cached(setup):
    with handler(setup) as (h, tier):
        d = h(_ctx(), TIER_QUERY)
        assert isinstance(d, Serve) and isinstance(d.fallback, Rewrite)
        result, how = answer(d)
        assert how == "local cache=miss"
        assert list(result.columns) == [("country", "string"), ("q", "bigint"),
                                        ("a", "decimal(14,6)")]
        rows = sorted(result.rows, key=repr)
        assert [r[:2] for r in rows] == [("de", 3), ("fr", None)]
        assert str(rows[0][2]) == "1.500000" and rows[1][2] is None
        assert answer(h(_ctx(), TIER_QUERY))[1] == "local cache=hit"
        assert answer(h(_ctx(**{"datamap.cache.enabled": "false"}), TIER_QUERY))[1] == \
            "local cache=bypassed"


def test_a_new_segment_changes_the_answer_and_the_key(setup, tmp_path):
    with handler(setup) as (h, tier):
        first = answer(h(_ctx(), TIER_QUERY))[0]
        publish(setup, tmp_path, [("de", 4, "2.00", 1, 1)])
        setup.catalog._seen = None          # read the new version now, not within 1 s
        d = h(_ctx(), TIER_QUERY)
        result, how = answer(d)
        assert how == "local cache=miss"
        assert dict((r[0], r[1]) for r in result.rows)["de"] == 7 != \
            dict((r[0], r[1]) for r in first.rows)["de"]


def test_what_goes_to_spark(setup, tmp_path):
    with handler(setup) as (h, tier):
        # outside the allow-list
        d = h(_ctx(), "SELECT initcap(country) AS u, sum(qty) AS s FROM db1.sales "
                 "GROUP BY initcap(country)")
        assert isinstance(d, Rewrite)
        # switched off for the session
        assert isinstance(h(_ctx(**{"datamap.serving.enabled": "false"}), TIER_QUERY), Rewrite)
    with handler(setup, max_datamap_bytes=10) as (h, tier):
        assert isinstance(h(_ctx(), TIER_QUERY), Rewrite)
        result = setup.index().rewrite(TIER_QUERY, "db1")
        lines = served_lines(tier, result, {})
        assert lines[0].startswith("Served by: spark (not served locally: db1.agg_table reads ")
        assert "max_datamap_bytes (10)" in lines[0]
    with handler(setup, enabled=False) as (h, tier):
        assert isinstance(h(_ctx(), TIER_QUERY), Rewrite)


def test_files_the_proxy_cannot_read_go_to_spark(setup, tmp_path):
    publish(setup, tmp_path, [("it", 1, "1.00", 1, 1)],
            files=["hdfs://nn:8020/warehouse/agg_table/dm_segment_id=2/part-0.parquet"])
    setup.catalog._seen = None
    with handler(setup) as (h, tier):
        assert isinstance(h(_ctx(), TIER_QUERY), Rewrite)
        lines = served_lines(tier, setup.index().rewrite(TIER_QUERY, "db1"), {})
        assert "its files are on hdfs://, which the proxy does not read" in lines[0]


def test_an_engine_failure_falls_back(setup, tmp_path):
    with handler(setup) as (h, tier):
        d = h(_ctx(), TIER_QUERY)
        assert isinstance(d, Serve)
        for f in (tmp_path / "agg_table").rglob("*.parquet"):
            f.unlink()                      # e.g. removed behind the catalog's back
        result, how = answer(d)
        assert result is None and how.startswith("spark (local engine: ")


def test_a_slow_local_answer_falls_back(setup, monkeypatch):
    """The engine's own query is held until the answer has timed out (a 1 µs timeout alone
    raced the worker thread on a loaded box), so the timeout decides, not the scheduler."""
    real = LocalEngine._run
    timed_out = threading.Event()

    def slow(self, plan, box):
        timed_out.wait(30)
        return real(self, plan, box)
    monkeypatch.setattr(LocalEngine, "_run", slow)
    with handler(setup, timeout=0.2) as (h, tier):
        try:
            result, how = answer(h(_ctx(), TIER_QUERY))
        finally:
            timed_out.set()
        assert result is None and "no answer within" in how


def test_an_empty_segment_is_an_empty_read(service, tmp_path):
    add_datamap(service, TIER_SCHEMAS, "db1", "agg", TIER_AGG, build=False)
    service.catalog.add_base_segment("db1.sales", ["file:/w/a.parquet"])
    publish(service, tmp_path, [], files=[])
    with handler(service) as (h, tier):
        d = h(_ctx(), TIER_QUERY)
        assert isinstance(d, Serve)
        result, _ = answer(d)
        assert list(result.rows) == []


def test_local_paths():
    assert local_path("file:/tmp/a%20b/x.parquet") == "/tmp/a b/x.parquet"
    assert local_path("file:///tmp/x.parquet") == "/tmp/x.parquet"
    assert local_path("/tmp/x.parquet") == "/tmp/x.parquet"
    assert local_path("hdfs://nn/x") is None and local_path("s3a://b/x") is None
    assert local_path("file://otherhost/x") is None


def test_settings_are_frozen_defaults():
    s = ServingSettings()
    assert s.enabled and s.cache and s.max_datamap_bytes == 1 << 30
    assert dataclasses.replace(s, timeout=1.0).timeout == 1.0


def test_concurrent_answers_share_a_bounded_pool(setup):
    """Forty sessions at once, two engine workers, the cache off: every one answered, and
    the same rows."""
    with handler(setup, workers=2) as (h, tier):
        tier.warm()
        conf = {"datamap.cache.enabled": "false"}

        async def many():
            decisions = [h(_ctx(**conf), TIER_QUERY) for _ in range(40)]
            return await asyncio.gather(*(d.attempt() for d in decisions))
        outs = asyncio.run(many())
        assert {how for _, how in outs} == {"local cache=bypassed"}
        # the same rows as text: a small answer comes as rows of Python values after the
        # first, which came column by column as the client reads it (engine.py, SMALL)
        assert len({tuple(sorted(tuple(map(str, row)) for row in r.rows)) for r, _ in outs}) == 1


def test_timestamps_wait_for_a_known_zone(service, tmp_path):
    """Remote mode while the upstream's zone is unsure (time_zone_problem): a query that
    uses a timestamp goes to Spark; once the catalog's zone is a fixed offset, it is served
    and printed in it."""
    schemas = {"db1": {"ev": {"kind": "string", "ts": "timestamp"}}}
    d = add_datamap(service, schemas, "db1", "evm",
                    "SELECT kind, max(ts) FROM db1.ev GROUP BY kind", build=False)
    c = service.catalog
    c.add_base_segment("db1.ev", ["file:/w/ev.parquet"])
    sid = c.begin_segment("db1", "evm", {"db1.ev": ["0"]})
    path = tmp_path / "evm_table" / f"dm_segment_id={sid}" / "part-0.parquet"
    path.parent.mkdir(parents=True)
    con = duckdb.connect()
    con.execute(f"COPY (SELECT 'a' AS kind, TIMESTAMP '2024-01-01 23:30:00.5' AS max_ts) "
                f"TO '{path}' (FORMAT parquet)")
    con.close()
    c.publish_segment("db1", "evm", sid, rows=1, files=[path.as_uri()], kind="built")
    c.set_setting("time_zone", "+01:00")
    problem = ["the upstream's time zone is not known yet"]
    tier = ServingTier(c, ServingSettings(), zone_problem=lambda: problem[0])
    try:
        from rewriter import DatamapIndex
        cand = service.rewrite_index.candidates()
        idx = DatamapIndex(cand, schemas)
        result = idx.rewrite("SELECT kind, max(ts) AS m FROM db1.ev GROUP BY kind", "db1")
        assert result.used == ["db1.evm"], result.skipped
        assert tier.plan(result, {}) == ("not served locally: the session time zone is not "
                                         "known")
        problem[0] = None
        served = tier.plan(result, {})
        rows = asyncio.run(tier.answer(served, {}))[0].rows
        assert list(rows) == [("a", "2024-01-02 00:30:00.5")]      # as the client gets it
    finally:
        tier.close()
    assert d.columns[1].type == "timestamp"


def test_why_spark_answers_a_datamap_hit_rides_on_the_decision(setup):
    """The query log and the metrics record each reason a datamap answer is not served
    in-process, by class (proxy/observability/querylog/reasons.py not_served_class)."""
    from proxy.observability.querylog.reasons import not_served_class
    initcap = ("SELECT initcap(country) AS u, sum(qty) AS s FROM db1.sales "
               "GROUP BY initcap(country)")
    with handler(setup) as (h, tier):
        d = h(_ctx(), initcap)
        assert d.not_served == ("not served locally: INITCAP(agg.country) is outside what the "
                                "local engine computes")
        assert "INITCAP (INITCAP" not in d.not_served
        assert not_served_class(d.not_served) == "construct"
        off = h(_ctx(**{"datamap.serving.enabled": "false"}), TIER_QUERY)
        assert not_served_class(off.not_served) == "switched_off"
        assert h(_ctx(), TIER_QUERY).fallback.not_served == ""
    with handler(setup, max_datamap_bytes=10) as (h, tier):
        assert not_served_class(h(_ctx(), TIER_QUERY).not_served) == "size"
