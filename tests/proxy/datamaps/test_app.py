"""proxy/app.py: serve's App (its Router, start and stop), the lazy pipeline session
(proxy/engine/pipeline_session.py) and the background work's shutdown (pure logic: fake
sessions, no Spark)."""
from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace

import pytest

from proxy.app import App
from proxy.config import (DatamapsSettings, ServerSettings, Settings, StateSettings,
                          UpstreamSettings)
from proxy.datamaps import startup
from proxy.datamaps.handler import DatamapDdlHandler, DatamapLoadHandler, DatamapSelectHandler
from proxy.datamaps.indexes.pruning import watch_temp_views
from proxy.datamaps.service import DatamapService
from proxy.engine import semantics, spark as engine_mod, timezone
from proxy.engine.pipeline_session import LazySpark, SparkNotReady
from proxy.external.handler import ExternalHandler
from proxy.routing import statements
from proxy.routing.router import Local, PassThrough, Rewrite, StatementContext


def _ctx(**conf):
    return StatementContext("s", "me", "default", dict(conf), 10)


def _settings(state_dir, **datamaps) -> Settings:
    """Remote mode towards a port nobody answers on, unless _start is given an engine."""
    return Settings(state=StateSettings(dir=str(state_dir)), datamaps=DatamapsSettings(**datamaps),
                    server=ServerSettings(host="127.0.0.1", port=0),
                    upstream=UpstreamSettings(host="127.0.0.1", port=1))


async def _start(settings: Settings, engine=None):
    """serve's App started (an engine given: embedded mode with it) -> (router, close)."""
    app = await App(settings, engine=engine).start()
    return app.router, app.close


def test_lazy_spark_opens_once_in_a_thread_never_on_the_loop():
    calls = []
    gate = threading.Event()

    def opener():
        calls.append(threading.current_thread().name)
        gate.wait(5)
        return "session"
    opened = []
    lazy = LazySpark(opener, on_open=opened.append)

    async def on_loop():
        with pytest.raises(SparkNotReady) as e:
            lazy.get()
        assert e.value.forward_quietly
        with pytest.raises(SparkNotReady):
            lazy()            # still starting: no second opener call
    asyncio.run(on_loop())
    gate.set()
    deadline = time.monotonic() + 5
    while not lazy.ready and time.monotonic() < deadline:
        time.sleep(0.01)
    assert lazy.get() == "session" and calls == ["pipeline-session"] and opened == ["session"]

    async def ready_on_loop():
        return lazy.get()
    assert asyncio.run(ready_on_loop()) == "session"


def test_lazy_spark_failure_is_reported_and_retried():
    attempts = []

    def opener():
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("no java")
        return "s"
    lazy = LazySpark(opener)
    with pytest.raises(RuntimeError):
        lazy.get()
    assert not lazy.ready and lazy.get() == "s" and len(attempts) == 2
    closed = []
    lazy2 = LazySpark(lambda: "x", closer=closed.append)
    lazy2.close()
    assert closed == []          # never opened: nothing to close
    lazy2.get()
    lazy2.close()
    assert closed == ["x"] and not lazy2.ready


def test_lazy_spark_on_open_may_use_the_session():
    seen = []
    holder = {}
    lazy = LazySpark(lambda: "s", on_open=lambda s: seen.append(holder["lazy"].get()))
    holder["lazy"] = lazy
    assert lazy.get() == "s" and seen == ["s"] and lazy.ready


async def test_embedded_router_order_timeseries_and_rewrite_switch(tmp_path):
    engine = SimpleNamespace(spark=object())
    router, closer = await _start(_settings(tmp_path / "state"), engine)
    try:
        kinds = [type(h) for h in router.handlers]
        assert router.handlers[0] is statements.set_rewrite_enabled
        assert router.handlers[1] is statements.watch_semantic_settings
        assert router.handlers[2] is watch_temp_views
        assert kinds[3:] == [ExternalHandler, DatamapDdlHandler, DatamapLoadHandler,
                             DatamapSelectHandler]
        assert (tmp_path / "state" / "catalog.db").is_file()
        assert isinstance(router.decide(_ctx(), "SELECT 1"), PassThrough)
        assert isinstance(router.decide(_ctx(), "SHOW DATAMAP"), Local)
        q = "SELECT timeseries(ts, 'hour'), count(*) FROM t GROUP BY timeseries(ts, 'hour')"
        for conf in ({}, {"datamap.rewrite.enabled": "false"}):
            d = router.decide(_ctx(**conf), q)
            assert isinstance(d, Rewrite) and "timeseries(ts" not in d.sql.lower().replace(
                "`timeseries(ts, hour)`", ""), d
            assert "date_trunc('hour', ts)" in d.sql.lower(), d
    finally:
        await closer()


async def test_remote_router_opens_no_session_until_needed(tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr(engine_mod, "open_pipeline_session",
                        lambda state_dir, spark=None: opened.append(state_dir) or "session")
    monkeypatch.setattr(engine_mod, "close_pipeline_session", lambda s: opened.append("closed"))
    router, closer = await _start(_settings(tmp_path), None)
    assert isinstance(router.decide(_ctx(), "SELECT a FROM t"), PassThrough)
    assert isinstance(router.decide(_ctx(), "INSERT INTO t VALUES (1)"), PassThrough)
    assert opened == []
    await closer()
    assert opened == []


async def test_periodic_sync_and_auto_compaction_settings(tmp_path, monkeypatch):
    calls = []

    def fake_sync_all(self):
        calls.append(self.auto_compaction)
        if len(calls) == 2:
            raise RuntimeError("one bad run")    # logged; the next period runs again
    monkeypatch.setattr(DatamapService, "sync_all", fake_sync_all)
    settings = _settings(tmp_path / "state", sync_interval_s=0.02, auto_compaction=True)
    router, closer = await _start(settings, SimpleNamespace(spark=object()))
    deadline = time.monotonic() + 10
    while len(calls) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    await closer()
    assert len(calls) >= 3 and all(calls)
    n = len(calls)
    await asyncio.sleep(0.1)
    assert len(calls) == n              # stopped by the closer
    # off by default
    calls.clear()
    router, closer = await _start(_settings(tmp_path / "state"), SimpleNamespace(spark=object()))
    await asyncio.sleep(0.1)
    await closer()
    assert calls == []


async def test_shutdown_waits_for_a_running_periodic_sync(tmp_path, monkeypatch):
    state = {"started": threading.Event(), "finished": False}

    def slow_sync_all(self):
        state["started"].set()
        time.sleep(0.3)
        state["finished"] = True
    monkeypatch.setattr(DatamapService, "sync_all", slow_sync_all)
    settings = _settings(tmp_path / "state", sync_interval_s=0.01)
    router, closer = await _start(settings, SimpleNamespace(spark=object()))
    assert await asyncio.to_thread(state["started"].wait, 10)
    await closer()
    assert state["finished"]     # Spark would be stopped only after the run ended


class _FakeSession:
    """Just what recovery and the rewrite index ask of a SparkSession."""

    def __init__(self, schemas: dict[str, dict[str, str]]):
        self._schemas = schemas
        self.catalog = SimpleNamespace(tableExists=lambda table: False)
        self.conf = SimpleNamespace(getAll={})     # no setting made: Spark's defaults

    def table(self, name: str):
        fields = [SimpleNamespace(name=c, dataType=SimpleNamespace(simpleString=lambda t=t: t))
                  for c, t in self._schemas[name].items()]
        return SimpleNamespace(schema=SimpleNamespace(fields=fields))


def _catalog_with_a_datamap(state_dir):
    from proxy.datamaps.catalog.store import Catalog
    from rewriter import compile_datamap
    schemas = {"db1": {"sales": {"country": "string", "qty": "int"}}}
    sql = "SELECT country, sum(qty) FROM db1.sales GROUP BY country"
    d = compile_datamap("agg", sql, schemas, "db1")
    catalog = Catalog.in_state_dir(state_dir)
    catalog.create_datamap("db1", "agg", provider="mv", select_sql=sql,
                           base_tables=d.base_tables, definition=d)
    catalog.add_base_segment("db1.sales", ["file:/w/a.parquet"])
    sid = catalog.begin_segment("db1", "agg", {"db1.sales": ["0"]})
    catalog.publish_segment("db1", "agg", sid, rows=2, kind="built")
    return catalog, {"db1.sales": schemas["db1"]["sales"]}


def test_first_index_in_a_worker_thread_opens_the_session_without_deadlock(tmp_path):
    """Remote mode: EXPLAIN's worker thread asks for the index, which has the warm-up
    thread read the schemas: that opens the pipeline session, whose on_open warms the
    index again in the warm-up thread."""
    catalog, schemas = _catalog_with_a_datamap(tmp_path)
    lazy = LazySpark(lambda: _FakeSession(schemas))
    service = DatamapService(catalog, lazy)
    lazy.after_open(lambda _s: startup.warm_index(service))
    got = []
    t = threading.Thread(target=lambda: got.append(service.index()), daemon=True)
    t.start()
    t.join(10)
    try:
        assert not t.is_alive(), "index() deadlocked opening the pipeline session"
        assert got and service.rewrite_index.warmed(10) and lazy.ready
        assert service.index().rewrite("SELECT country, sum(qty) FROM db1.sales GROUP BY country",
                              "db1").used == ["db1.agg"]
    finally:
        service.close()
        catalog.close()


async def test_remote_router_opens_the_session_at_start_when_datamaps_exist(tmp_path,
                                                                            monkeypatch):
    catalog, schemas = _catalog_with_a_datamap(tmp_path)
    catalog.close()
    opened = []
    monkeypatch.setattr(engine_mod, "open_pipeline_session",
                        lambda state_dir, spark=None: opened.append(state_dir)
                        or _FakeSession(schemas))
    monkeypatch.setattr(engine_mod, "close_pipeline_session", lambda s: opened.append("closed"))
    monkeypatch.setattr(timezone, "upstream_time_zone", lambda upstream: None)   # no upstream
    # whose listing of settings (`SET`) holds none away from Spark's defaults
    monkeypatch.setattr(semantics, "upstream_listing", lambda upstream: {"spark.app.name": "t"})
    router, closer = await _start(_settings(tmp_path), None)
    try:
        deadline = time.monotonic() + 10
        while True:   # opened in the background: a query is answered from the datamap
            d = router.decide(_ctx(), "SELECT country, sum(qty) FROM db1.sales GROUP BY country")
            if isinstance(d, Rewrite) or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.05)
        assert isinstance(d, Rewrite) and "agg_table" in d.sql, d
        assert opened == [tmp_path.resolve()]
    finally:
        await closer()
    assert opened[-1] == "closed"


@pytest.mark.timeout(30)   # a regression deadlocks: fail, do not hang
async def test_index_waiting_for_the_session_while_it_opens_at_start(tmp_path, monkeypatch):
    """A restart: the session opens in the background while EXPLAIN's worker thread builds
    the index and waits for that session (holding the index's lock). The open's own index
    warm-up must not wait for that lock inside the open: it did, and both hung."""
    catalog, schemas = _catalog_with_a_datamap(tmp_path)
    catalog.close()
    entered = threading.Event()

    def slow_open(state_dir, spark=None):
        entered.set()
        time.sleep(0.5)     # still opening when index() is asked: the window the hang needs
        return _FakeSession(schemas)
    monkeypatch.setattr(engine_mod, "open_pipeline_session", slow_open)
    monkeypatch.setattr(engine_mod, "close_pipeline_session", lambda s: None)
    monkeypatch.setattr(timezone, "upstream_time_zone", lambda upstream: None)   # no upstream
    # whose listing of settings (`SET`) holds none away from Spark's defaults
    monkeypatch.setattr(semantics, "upstream_listing", lambda upstream: {"spark.app.name": "t"})
    router, closer = await _start(_settings(tmp_path), None)
    service = router.handlers[-1].service
    try:
        assert entered.wait(5)
        got = []
        t = threading.Thread(target=lambda: got.append(service.index()), daemon=True)
        t.start()
        t.join(10)
        assert not t.is_alive(), "index() and the session's opening deadlocked"
        assert got and await asyncio.to_thread(service.rewrite_index.warmed, 10)
        assert service.index().rewrite("SELECT country, sum(qty) FROM db1.sales GROUP BY country",
                              "db1").used == ["db1.agg"]
    finally:
        await closer()


@pytest.mark.timeout(60)
async def test_shutdown_stops_and_joins_the_background_work_it_started(tmp_path, monkeypatch):
    """`serve`'s stop: the periodic tasks are cancelled (a running sync finishes first),
    and the threads the App started (the pipeline session's opening, which itself
    starts the index warm-up) are joined: none is left running, and no thread it started
    outlives it but the event loop's own executor."""
    catalog, schemas = _catalog_with_a_datamap(tmp_path)
    catalog.close()
    opening = threading.Event()
    done = []

    def slow_open(state_dir, spark=None):
        opening.set()
        time.sleep(0.3)
        return _FakeSession(schemas)

    def slow_warm(service):
        time.sleep(0.3)
        done.append("warm")

    def slow_sync_all(self):
        time.sleep(0.2)
        done.append("sync")
    monkeypatch.setattr(engine_mod, "open_pipeline_session", slow_open)
    monkeypatch.setattr(engine_mod, "close_pipeline_session", lambda s: done.append("closed"))
    monkeypatch.setattr(timezone, "upstream_time_zone", lambda upstream: None)
    monkeypatch.setattr(startup, "warm_index", slow_warm)
    monkeypatch.setattr(DatamapService, "sync_all", slow_sync_all)
    before = set(threading.enumerate())
    router, closer = await _start(_settings(tmp_path, sync_interval_s=0.05), None)
    assert await asyncio.to_thread(opening.wait, 10)
    await asyncio.sleep(0.1)                  # a sync run is under way
    await closer()
    started = [t for t in set(threading.enumerate()) - before
               if not t.name.startswith("asyncio_")]     # the loop's to_thread workers
    assert started == [], [t.name for t in started]
    assert done.index("warm") < done.index("closed")       # joined before Spark stopped
    assert "sync" in done and done[-1] == "closed"
