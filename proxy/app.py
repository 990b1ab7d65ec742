"""The composition root: one `datamap-proxy serve` process, built in dependency order.

    async with App(settings, reload_from=(config_file, flags)) as app:
        return await app.run()        # until SIGTERM / SIGINT; SIGHUP reloads

`App.start()` builds every part, each getting its collaborators in its constructor, and
pushes each part's closer on one AsyncExitStack, so that a start failing half-way closes
what it had built and the stop runs in reverse (the order is in `_build`). A setting that
cannot be honoured raises ConfigError (`serve` exits 2), anything else that stops the start
raises StartFailed (exit 1).

The parts:
  - the checks that must fail before a minute of Spark start: audit log, console settings,
    the authenticator, the Kerberos acceptor;
  - `[metrics] port` (proxy/observability/metrics/registry.py, docs/metrics.md), first: a
    port in use stops the start before any thread does;
  - the embedded Spark (proxy/engine/spark.py) when there is no `[upstream]`;
  - the datamap catalog: SQLite at `<state dir>/catalog.db`, or the PostgreSQL database
    `[state] catalog` names, shared by replicas (docs/replicas.md), and its leases
    (proxy/ha/leader.py): the periodic sync runs only on the leader, and each datamap's jobs
    hold a lease so replicas never run them twice at once;
  - the pipeline SparkSession (proxy/engine/pipeline_session.py): the engine's own session in
    embedded mode; in remote mode a JVM of our own, opened lazily, whose on_open hook is
    proxy/datamaps/startup.py's RemoteStart (zone alignment, recovery, index warm-up);
  - DatamapService over the catalog and that session, external tables, the query log
    (`[querylog]`, docs/querylog.md), the serving tier and its segment mirror
    (`<state dir>/serving-mirror`, proxy/serving/mirror.py), the Auditor (`[datamaps]
    audit_sample_rate`, proxy/datamaps/verify/auditor.py), the index pruner, the advisor;
  - the background work (proxy/background.py): `[datamaps] sync_interval_s` > 0 runs SYNC
    DATAMAPS that often; remote mode checks the upstream's zone every ZONE_CHECK_S
    (proxy/datamaps/zones/pipeline.py). The stop joins all of it;
  - the statement Router, its handlers in order: the gateway's own (`SET
    datamap.rewrite.enabled`, proxy/routing/statements.py), temporary views, external tables, then
    datamap DDL / EXPLAIN, loads into base tables, and the SELECT rewrite
    (proxy/datamaps/handler.py);
  - the protocol Frontend with its Observers (query log, metrics, audit log) and
    ProxyServer; the web console (proxy/console); the Reloader (SIGHUP,
    proxy/gateway/reload.py); the ZooKeeper registration (proxy/ha/discovery.py) once ready.
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import signal
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Awaitable, Callable

from proxy.engine import spark as engine_mod
from proxy.routing import statements
from proxy.advisor.core import Advisor
from proxy.advisor.results import answers
from proxy.observability.audit_log import AuditLog, AuditLogError
from proxy.gateway.auth import build_authenticator
from proxy.gateway.auth.base import AuthError
from proxy.background import Background
from proxy.config import ConfigError, Settings
from proxy.console import ConsoleRefused, check as check_console, start_console
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.handler import DatamapDdlHandler, DatamapLoadHandler, DatamapSelectHandler
from proxy.datamaps.indexes.pruning import Pruner, ServiceShapes, StoreForQueries, watch_temp_views
from proxy.datamaps.service import DatamapService
from proxy.datamaps.startup import RemoteStart, start_embedded
from proxy.datamaps.verify.auditor import Auditor
from proxy.datamaps.zones.pipeline import ZONE_CHECK_S, check_upstream_zone
from proxy.ha.discovery import Registration
from proxy.external.handler import ExternalHandler
from proxy.external.hooks import SegmentHooks
from proxy.external.tables import ExternalTables
from proxy.gateway.auth.kerberos import Acceptor, KerberosError
from proxy.ha.leader import LEADER, LeaseKeeper
from proxy.observability.metrics.collect import DatamapCollector
from proxy.observability.metrics.endpoint import start_metrics
from proxy.observability.observe import Observers
from proxy.engine.pipeline_session import LazySpark
from proxy.observability.querylog.log import QueryLog
from proxy.hs2.recovery import HEALTH_FILE, watch_upstream
from proxy.upstream.client import UpstreamSession
from proxy.gateway.reload import Reloader, apply_to_server
from proxy.routing.router import Router, share_the_interpreter
from proxy.gateway.server import ProxyServer
from proxy.hs2.frontend import Frontend
from proxy.serving import ServingTier
from proxy.serving.mirror import DIR_NAME as MIRROR_DIR, SegmentMirror, SparkFiles
from proxy.serving.tier import RETRY_S as SERVING_RETRY_S, local_path

log = logging.getLogger("proxy.app")
# serve's own lines (starting, listening, ready, shutting down), under the name they had
serve_log = logging.getLogger("proxy")

# A periodic run cancelled by shutdown is waited for this long (Spark is stopped after it).
SYNC_STOP_GRACE_S = 60.0


class StartFailed(Exception):
    """`serve` could not start (exit 1); the message says why."""


def _once(close: Callable[[], object] | None) -> Callable[[], Awaitable[None]]:
    """`close` (sync or async; None: nothing) as an async closer that runs it the first
    time only. A part whose stop comes later than its construction allows is pushed twice:
    where it is made (a start failing half-way closes it) and where the stop order puts it."""
    done = False

    async def closer() -> None:
        nonlocal done
        if not done and close is not None:
            done = True
            result = close()
            if asyncio.iscoroutine(result):
                await result
    return closer


class App:
    """One `serve` process: builds every part in dependency order and owns their stop order.

    `engine`: an EmbeddedEngine already started by the caller (who stops it), else App
    starts one when `[upstream] host` is unset. `reload_from`: (config file, flags) that
    SIGHUP reads again (proxy/gateway/reload.py)."""

    def __init__(self, settings: Settings, *, reload_from: tuple | None = None,
                 engine=None):
        self.settings = self.as_loaded = settings
        self.reload_from = reload_from or (None, None)
        self.engine = engine
        self._stack = AsyncExitStack()
        self._early_reload = asyncio.Event()
        self._stop = asyncio.Event()
        self.authenticator = self.kerberos = None
        self.metrics = self.querylog = self.serving = self.advisor = self.auditor = None
        self.shapes: ServiceShapes | None = None
        self.indexed: StoreForQueries | None = None
        self.console = None
        self.audit: AuditLog | None = None
        self.address: tuple[str, int] | None = None

    async def __aenter__(self) -> App:
        return await self.start()

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def start(self) -> App:
        try:
            await self._build()
        except BaseException:
            await self._stack.aclose()
            raise
        return self

    async def close(self) -> None:
        """Stop every part, in the reverse of the build order."""
        await self._stack.aclose()

    def stop(self) -> None:
        """Make `run()` return, as SIGTERM does."""
        self._stop.set()

    async def _build(self) -> None:
        """Stop order (the stack's reverse): ZooKeeper (in run), console (its running
        actions use the datamaps), server (drains), metrics endpoint, query log (writes what
        the server saw), auditor (cancels its Spark jobs before the threads are joined),
        background, router, SELECT handler, serving tier, shapes, index store, datamap
        service, pipeline session (remote mode), leases, catalog, embedded Spark, audit
        log."""
        loop = asyncio.get_running_loop()
        # SIGHUP's default action ends the process: one sent while starting (an embedded
        # Spark takes a minute) is kept, and the reload runs once serving
        loop.add_signal_handler(signal.SIGHUP, self._early_reload.set)
        self._stack.callback(loop.remove_signal_handler, signal.SIGHUP)
        await self._check_settings()
        # first, before any thread starts: a [metrics] port in use stops the start (exit 2)
        self.metrics, endpoint = await start_metrics(self.settings)
        close_metrics = _once(endpoint.close if endpoint is not None else None)
        self._stack.push_async_callback(close_metrics)
        await self._start_engine()
        try:
            await self._open_datamaps()
            await self._build_router()
        except (ConfigError, StartFailed):
            raise
        except Exception as e:  # noqa: BLE001 - e.g. an unreadable catalog: exit 1
            raise StartFailed(f"cannot set up datamaps: {e}") from e
        # the stop order, for the parts made before the router that stop after it
        for closer in (self._stop_background, self._close_auditor, self._close_querylog,
                       close_metrics):
            self._stack.push_async_callback(closer)
        await self._start_server()
        await self._start_console()
        self.reloader = Reloader(self.settings, *self.reload_from, loaded=self.as_loaded)
        self.reloader.register(apply_to_server(self.server))
        self.reloader.register(self._reload_audit_rate)

    def _reload_audit_rate(self, settings) -> None:
        """SIGHUP: the auditor samples at the reloaded rate (none without datamaps)."""
        if self.auditor is not None:
            self.auditor.set_rate(settings.datamaps.audit_sample_rate)

    async def _check_settings(self) -> None:
        """What must fail before anything starts (exit 2)."""
        s = self.settings
        try:
            self.audit = AuditLog(s.server.audit_log)  # an unwritable file stops us here
            self._stack.callback(self.audit.close)     # after the server's last lines
            check_console(s)                           # before a minute of Spark start
            self.authenticator = await asyncio.to_thread(build_authenticator, s)
            if s.server.auth == "kerberos":
                self.kerberos = Acceptor(s.server)
        except (AuthError, AuditLogError, ConsoleRefused, KerberosError) as e:
            raise ConfigError(str(e)) from e

    async def _start_engine(self) -> None:
        s = self.settings
        if self.engine is not None or s.upstream.host is not None:
            return
        engine = engine_mod.EmbeddedEngine(Path(s.state.dir), s.spark)
        self._stack.push_async_callback(asyncio.to_thread, engine.stop)
        serve_log.info("starting embedded Spark (state dir %s)", s.state.dir)
        try:
            host, port = await asyncio.to_thread(engine.start)
        except Exception as e:  # noqa: BLE001 - report and exit non-zero
            raise StartFailed(f"embedded Spark failed to start: {e}") from e
        self.engine = engine
        self.settings = dataclasses.replace(s, upstream=dataclasses.replace(
            s.upstream, host=host, port=port))

    async def _open_datamaps(self) -> None:
        """Catalog, leases, the pipeline session, DatamapService, start-up recovery and
        the external tables."""
        s, stack = self.settings, self._stack
        self.state_dir = state_dir = Path(s.state.dir).expanduser().resolve()
        state_dir.mkdir(parents=True, exist_ok=True)
        self.catalog = catalog = await asyncio.to_thread(Catalog.in_state_dir, state_dir,
                                                         s.state.catalog)
        stack.callback(catalog.close)
        log.info("datamap catalog: %s", catalog.path)     # the URL without its password
        self.leases = leases = LeaseKeeper(catalog, s.state.lease_ttl_s)
        stack.push_async_callback(asyncio.to_thread, leases.stop)
        await asyncio.to_thread(leases.want, LEADER)

        self.background = background = Background()
        if self.engine is not None:
            engine = self.engine
            spark = LazySpark(lambda: engine.spark, background=background)
        else:     # the engine's own session is the engine's to stop; this one is ours
            spark = LazySpark(lambda: engine_mod.open_pipeline_session(state_dir, s.spark),
                              closer=engine_mod.close_pipeline_session, background=background)
            stack.push_async_callback(asyncio.to_thread, spark.close)
        self.spark = spark
        dm = s.datamaps
        self.datamaps = service = DatamapService(
            catalog, spark, leases=leases, auto_compaction=dm.auto_compaction,
            max_bloom_bytes=s.indexes.max_bloom_bytes, on_indexed=self._prepare_pruning)
        stack.callback(service.close)
        self._stop_background = _once(self._stop_background_work)
        stack.push_async_callback(self._stop_background)

        if self.engine is not None:
            await start_embedded(await asyncio.to_thread(spark.get), service, background)
        else:
            spark.after_open(RemoteStart(s.upstream, service, background))
            if catalog.list_datamaps():
                # A restart with datamaps: open the session now, in the background, so that
                # queries are answered from datamaps again without waiting for a first
                # statement to ask for it (until then they are forwarded unchanged).
                spark.warm()
        # external-format tables (docs/external.md): links reconciled with the catalog first
        indexes = service.indexes     # index datamaps (docs/indexes.md) follow the segments
        self.external = ExternalTables(catalog, spark.get, state_dir, service, SegmentHooks(
            indexes.on_segment_files, indexes.on_files_gone, indexes.on_compacted))
        await asyncio.to_thread(self.external.recover)

    async def _stop_background_work(self) -> None:
        """The serving mirror's loop is told to end first (its thread runs until then),
        then every background task and thread is stopped."""
        if self.serving is not None and self.serving.mirror is not None:
            self.serving.mirror.close()
        await self.background.stop()

    def _prepare_pruning(self, table: str) -> None:
        """An index datamap on `table` was built: the pruner loads its shape now, so that
        the first query on it is pruned too (none is built before the pruner exists)."""
        if self.shapes is not None and self.indexed is not None:
            self.shapes.warm(self.indexed.read_as(table))

    async def _build_router(self) -> None:
        """The query log, pruning, serving tier, auditor, advisor and the Router."""
        s, stack, service, catalog = self.settings, self._stack, self.datamaps, self.catalog
        dm, background = s.datamaps, self.background
        if s.querylog.enabled:
            location = s.state.catalog or str(self.state_dir / "catalog.db")
            # time saved is scaled by the base tables' rows the catalog counts
            self.querylog = await asyncio.to_thread(
                functools.partial(QueryLog, location, s.querylog, base_rows=catalog.base_rows))
        querylog = self.querylog       # closed once the server stopped: it writes what it saw
        self._close_querylog = _once(
            functools.partial(asyncio.to_thread, querylog.close) if querylog is not None else None)
        stack.push_async_callback(self._close_querylog)
        # index datamaps skip files of the SQL about to be sent (docs/indexes.md)
        shapes = ServiceShapes(service.schema_cache, self.spark.get)
        indexed = StoreForQueries(service.indexes.store,
                                  lambda t: catalog.datamap_by_table(t) is not None, shapes.warm)
        stack.callback(indexed.close)
        stack.callback(shapes.close)
        self.shapes, self.indexed = shapes, indexed
        pruner = Pruner(indexed, shapes)
        # a compensation's new base files, and base tables read whole, are read with the
        # freshness guard's layouts and listings
        mirror = await asyncio.to_thread(self._mirror)
        self.serving = serving = ServingTier(catalog, s.serving,
                                             zone_problem=lambda: service.time_zone_problem,
                                             layouts=service.guard.layout,
                                             tables=service.guard.table_files, mirror=mirror)
        stack.callback(serving.close)           # closes the mirror: its thread ends
        if mirror is not None:    # copies of segments the proxy cannot open (docs/serving.md)
            background.thread("serving-mirror", mirror.run)
        if s.serving.enabled:    # DuckDB ready before the first hit (~75 ms otherwise)
            background.thread("serving-warm", serving.warm)
            # an engine that could not start is tried again, off the clients' path
            background.periodic("serving-retry", SERVING_RETRY_S, serving.retry,
                                "starting the serving engine again", 10.0)
        auditor = Auditor(service, dm.audit_sample_rate, serving,
                          on_base_run=querylog.base_run if querylog is not None else None)
        self.auditor = auditor
        self._close_auditor = _once(auditor.close)
        stack.push_async_callback(self._close_auditor)
        auditor.start(background)
        # the advisor reads the query log (docs/advisor.md); the console shows its suggestions
        self.advisor = advisor = Advisor(service, querylog, s.advisor)
        select = DatamapSelectHandler(service, dm.rewrite_max_sql_bytes, serving=serving,
                                      audit=auditor, max_staleness_s=dm.max_staleness_s,
                                      pruner=pruner)
        stack.push_async_callback(asyncio.to_thread, select.close)   # the rewrite process
        self.router = Router(handlers=[
            *statements.HANDLERS, watch_temp_views,
            ExternalHandler(self.external, dm.rewrite_max_sql_bytes),
            DatamapDdlHandler(service, dm.rewrite_max_sql_bytes, serving=serving, audit=auditor,
                              max_staleness_s=dm.max_staleness_s, pruner=pruner,
                              advise=answers(advisor)),
            DatamapLoadHandler(service, dm.rewrite_max_sql_bytes), select])
        stack.callback(self.router.close)
        self._schedule()

    def _mirror(self) -> SegmentMirror | None:
        """The serving tier's segment mirror under the state dir (`[serving] mirror`), its
        copies found again; None when serving or the mirror is off."""
        s = self.settings.serving
        if not s.enabled or s.mirror == "off":
            return None
        return SegmentMirror(self.catalog, self.state_dir / MIRROR_DIR, SparkFiles(self.spark.get),
                             mode=s.mirror, max_bytes=s.mirror_max_bytes, local=local_path)

    def _schedule(self) -> None:
        """The periodic sync (on the leader only) and, in remote mode, the zone watch."""
        s, service, spark, leases = self.settings, self.datamaps, self.spark, self.leases
        if s.datamaps.sync_interval_s > 0:
            log.info("datamap sync every %gs", s.datamaps.sync_interval_s)

            def sync_if_leader() -> None:
                if leases.holds(LEADER):   # one replica syncs; the others see its commits
                    service.sync_all()
            self.background.periodic("datamap-sync", s.datamaps.sync_interval_s,
                                     sync_if_leader, "periodic datamap sync", SYNC_STOP_GRACE_S)
        if self.engine is None:       # remote mode: our own pipeline session
            upstream = s.upstream

            def check_zone() -> None:
                if spark.ready:      # else aligned when it opens
                    check_upstream_zone(spark.get(), upstream, service)
            self.background.periodic("zone-watch", ZONE_CHECK_S, check_zone,
                                     "checking the upstream's time zone", SYNC_STOP_GRACE_S)

    async def _start_server(self) -> None:
        """The protocol Frontend, observed by the query log, the metrics and the audit log,
        and its listener."""
        s = self.settings
        observers = Observers(*(o for o in (self.querylog, self.metrics, self.audit)
                                if o is not None))
        self.service = service = Frontend(s, self.router, observers=observers,
                                          health_path=self.state_dir / HEALTH_FILE)
        # the upstream's recovery seen without a client's statement (docs/recovery.md)
        self.background.task(watch_upstream(service.health, lambda: UpstreamSession(s.upstream)),
                             "upstream-watch")
        if self.metrics is not None:          # docs/metrics.md
            self.metrics.add_collector(DatamapCollector(
                self.catalog, self.serving, querylog=self.querylog,
                health=lambda: service.health))
        self.server = ProxyServer(s, self.router, service, authenticator=self.authenticator,
                                  kerberos=self.kerberos)
        self._stack.push_async_callback(self.server.shutdown)
        try:
            self.address = await self.server.start()
        except OSError as e:
            raise StartFailed(f"cannot listen on {s.server.host}:{s.server.port}: "
                              f"{e.strerror or e}") from e

    async def _start_console(self) -> None:
        s = self.settings
        if s.console.port is None:
            return
        try:
            self.console = await start_console(s, self.server, self.datamaps, self.querylog,
                                               self.advisor, self.serving, self.audit)
        except OSError as e:
            raise StartFailed(f"cannot listen for the web console on port {s.console.port}: "
                              f"{e.strerror or e}") from e
        self._stack.push_async_callback(self.console.close)

    async def run(self) -> int:
        """Serve until SIGTERM / SIGINT (or stop()); SIGHUP reloads the settings. Returns
        the exit code; the caller's `async with` then stops the parts."""
        s, loop = self.settings, asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop.set)
            self._stack.callback(loop.remove_signal_handler, sig)
        loop.add_signal_handler(signal.SIGHUP, self.reloader.reload)
        if self._early_reload.is_set():
            serve_log.info("SIGHUP received while starting: reloading the settings now")
            self.reloader.reload()
        host, port = self.address
        serve_log.info("listening on %s:%d (auth=%s%s), upstream %s:%d (%s)", host, port,
                       s.server.auth, ", TLS" if s.server.tls_cert else "", s.upstream.host,
                       s.upstream.port, s.upstream.auth)
        share_the_interpreter()
        serve_log.info("ready")
        registration = self._register(port)
        await self._stop.wait()
        if registration is not None:
            serve_log.info("shutting down: leaving ZooKeeper first, so no new client is sent "
                           "here")
            await registration.deregister()
        serve_log.info("shutting down: draining for up to %.0fs", s.server.shutdown_grace)
        return 0

    def _register(self, port: int) -> Registration | None:
        """The ZooKeeper registration ([discovery] zookeeper), started once ready; None
        without. It publishes the ports bound (http_port = 0 means any free one)."""
        s = self.settings
        if not s.discovery.zookeeper:
            return None
        http = self.server.http_address
        registration = Registration(s.discovery, s.server, port,
                                    http_port=http[1] if http else None)
        registration.start()
        return registration
