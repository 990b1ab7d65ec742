"""Assembles the statement Router that `datamap-proxy serve` runs with.

    router, closer = await build_router(settings, engine)   # engine: EmbeddedEngine | None
    ...serve...
    await closer()

Order of handlers: the gateway's own (`SET datamap.rewrite.enabled`, proxy/statements.py),
then datamap DDL / EXPLAIN, loads into base tables, and the SELECT rewrite
(proxy/datamaps/handler.py). The datamap catalog is SQLite at `<state dir>/catalog.db`, or
the PostgreSQL database `[state] catalog` names, shared by replicas (docs/replicas.md).

This module only wires parts together:
  - the pipeline SparkSession (proxy/pipeline_session.py): the engine's own session in
    embedded mode; in remote mode a JVM of our own, opened lazily, whose on_open hook is
    proxy/startup.py's RemoteStart (zone alignment, recovery, index warm-up);
  - DatamapService over the catalog and that session;
  - the background work (proxy/background.py): `[datamaps] sync_interval_s` > 0 runs SYNC
    DATAMAPS (proxy/datamaps/sync.py) that often; remote mode checks the upstream's zone
    every ZONE_CHECK_S (proxy/pipeline_zone.py). The closer stops and joins all of it.
  - the catalog leases (proxy/leader.py): the periodic sync runs only on the leader, and
    each datamap's jobs hold a lease so replicas never run them twice at once.
`[datamaps] auto_compaction` is the default of the per-datamap DMPROPERTIES('auto_compaction').
`[metrics] port` serves Prometheus metrics (proxy/metrics.py, docs/metrics.md); the
metrics observe the protocol Service through `router.with_service`, which `serve` calls.
`[querylog]`: every statement is recorded in the catalog's database (proxy/querylog.py,
docs/querylog.md); the QueryLog observes the protocol Service through `router.with_service`,
which `serve` calls, and is `router.querylog` for the console, metrics and advisor.
`[datamaps] audit_sample_rate` is the share of datamap answers the Auditor re-checks
(proxy/datamaps/audit.py; its worker is a background thread).
"""
from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable, Callable

from proxy import leader, statements
from proxy.advisor import Advisor
from proxy.background import Background
from proxy.config import Settings
from proxy.datamaps.audit import Auditor
from proxy.datamaps.catalog import Catalog
from proxy.datamaps.handler import DatamapDdlHandler, DatamapLoadHandler, DatamapSelectHandler
from proxy.serving import ServingTier
from proxy.serving.tier import RETRY_S as SERVING_RETRY_S
from proxy.datamaps.service import DatamapService
from proxy.external.handler import ExternalHandler
from proxy.external.hooks import SegmentHooks
from proxy.external.tables import ExternalTables
from proxy.indexes.pruning import Pruner, ServiceShapes, StoreForQueries, watch_temp_views
from proxy.metrics_collect import DatamapCollector
from proxy.metrics_http import start_metrics
from proxy.pipeline_session import LazySpark
from proxy.pipeline_zone import ZONE_CHECK_S, check_upstream_zone
from proxy.querylog import QueryLog
from proxy.router import Router
from proxy.startup import RemoteStart, start_embedded

if TYPE_CHECKING:
    from proxy.engine import EmbeddedEngine

log = logging.getLogger("proxy.app")

Closer = Callable[[], Awaitable[None]]

# A periodic run cancelled by shutdown is waited for this long (Spark is stopped after it).
SYNC_STOP_GRACE_S = 60.0


async def build_router(settings: Settings, engine: EmbeddedEngine | None = None
                       ) -> tuple[Router, Closer]:
    """The Router for `serve` and an async closer to await after the server stopped.

    `engine` is the started EmbeddedEngine, or None in remote mode."""
    # first, before any thread starts: a [metrics] port in use stops the start (exit 2)
    metrics, metrics_endpoint = await start_metrics(settings)
    state_dir = Path(settings.state.dir).expanduser().resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    catalog = await asyncio.to_thread(Catalog.in_state_dir, state_dir, settings.state.catalog)
    background = Background()
    dm = settings.datamaps
    log.info("datamap catalog: %s", catalog.path)     # the URL without its password
    leases = leader.LeaseKeeper(catalog, settings.state.lease_ttl_s)
    await asyncio.to_thread(leases.want, leader.LEADER)

    if engine is not None:
        spark = LazySpark(lambda: engine.spark, background=background)
    else:
        from proxy import engine as engine_mod
        spark = LazySpark(lambda: engine_mod.open_pipeline_session(state_dir, settings.spark),
                          closer=engine_mod.close_pipeline_session, background=background)
    service = DatamapService(catalog, spark, leases=leases, auto_compaction=dm.auto_compaction,
                             max_bloom_bytes=settings.indexes.max_bloom_bytes)

    if engine is not None:
        await start_embedded(await asyncio.to_thread(spark.get), service, background)
    else:
        spark.after_open(RemoteStart(settings.upstream, service, background))
        if catalog.list_datamaps():
            # A restart with datamaps: open the session now, in the background, so that
            # queries are answered from datamaps again without waiting for a first
            # statement to ask for it (until then they are forwarded unchanged).
            spark.warm()

    # external-format tables (docs/external.md): links reconciled with the catalog first
    indexes = service.indexes     # index datamaps (docs/indexes.md) follow the segments
    external = ExternalTables(catalog, spark.get, state_dir, service, SegmentHooks(
        indexes.on_segment_files, indexes.on_files_gone, indexes.on_compacted))
    await asyncio.to_thread(external.recover)

    # called by `serve` (cli.py) with the protocol Service once it exists
    with_service: list[Callable] = []
    querylog = None
    if settings.querylog.enabled:
        location = settings.state.catalog or str(state_dir / "catalog.db")
        querylog = await asyncio.to_thread(QueryLog, location, settings.querylog,
                                           unavailable=service.unavailable)
        with_service.append(lambda proto_service: proto_service.observers.add(querylog))
    serving = ServingTier(catalog, settings.serving,
                          zone_problem=lambda: service.time_zone_problem)
    if settings.serving.enabled:    # DuckDB ready before the first hit (~75 ms otherwise)
        background.thread("serving-warm", serving.warm)
        # an engine that could not start is tried again, off the clients' path
        background.periodic("serving-retry", SERVING_RETRY_S, serving.retry,
                            "starting the serving engine again", 10.0)
    auditor = Auditor(service, dm.audit_sample_rate, serving)
    auditor.start(background)
    # index datamaps skip files of the SQL about to be sent (docs/indexes.md)
    shapes = ServiceShapes(service.schema_cache, spark.get)
    indexed = StoreForQueries(indexes.store, lambda t: catalog.datamap_by_table(t) is not None,
                              shapes.warm)
    indexes.on_indexed = lambda table: shapes.warm(indexed.read_as(table))
    pruner = Pruner(indexed, shapes)
    # the advisor reads the query log (docs/advisor.md); the console shows its suggestions
    advisor = Advisor(service, querylog, settings.advisor)
    select = DatamapSelectHandler(service, dm.rewrite_max_sql_bytes, serving=serving,
                                  audit=auditor, max_staleness_s=dm.max_staleness_s,
                                  pruner=pruner)
    router = Router(handlers=[
        *statements.HANDLERS, watch_temp_views,
        ExternalHandler(external, dm.rewrite_max_sql_bytes),
        DatamapDdlHandler(service, dm.rewrite_max_sql_bytes, serving=serving, audit=auditor,
                          max_staleness_s=dm.max_staleness_s, pruner=pruner, advisor=advisor),
        DatamapLoadHandler(service, dm.rewrite_max_sql_bytes), select])
    # for the web console (proxy/console) and `serve` (cli.py)
    router.datamap_service, router.serving, router.advisor = service, serving, advisor
    router.querylog, router.with_service = querylog, with_service

    if metrics is not None:          # docs/metrics.md
        collector = DatamapCollector(catalog, serving, querylog=querylog)
        metrics.add_collector(collector)

        def observe(proto_service) -> None:
            proto_service.observers.add(metrics)
            collector.health = lambda: proto_service.health
        with_service.append(observe)

    if dm.sync_interval_s > 0:
        log.info("datamap sync every %gs", dm.sync_interval_s)

        def sync_if_leader() -> None:
            if leases.holds(leader.LEADER):   # one replica syncs; the others see its commits
                service.sync_all()
        background.periodic("datamap-sync", dm.sync_interval_s, sync_if_leader,
                            "periodic datamap sync", SYNC_STOP_GRACE_S)
    if engine is None:
        upstream = settings.upstream

        def check_zone() -> None:
            if spark.ready:      # else aligned when it opens
                check_upstream_zone(spark.get(), upstream, service)
        background.periodic("zone-watch", ZONE_CHECK_S, check_zone,
                            "checking the upstream's time zone", SYNC_STOP_GRACE_S)

    async def closer() -> None:
        if metrics_endpoint is not None:
            await metrics_endpoint.close()
        if querylog is not None:     # the server has stopped: write what it saw
            await asyncio.to_thread(querylog.close)
        auditor.close()          # before the threads are joined: its Spark jobs are cancelled
        await background.stop()
        router.close()
        await asyncio.to_thread(select.close)     # the large-statement rewrite process
        serving.close()
        shapes.close()
        indexed.close()
        service.close()
        if engine is None:       # the engine's own session is the engine's to stop
            await asyncio.to_thread(spark.close)
        await asyncio.to_thread(leases.stop)
        catalog.close()
    return router, closer
