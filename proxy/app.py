"""Assembles the statement Router that `datamap-proxy serve` runs with.

    router, closer = await build_router(settings, engine)   # engine: EmbeddedEngine | None
    ...serve...
    await closer()

Order of handlers: the gateway's own (`SET datamap.rewrite.enabled`, proxy/statements.py),
then datamap DDL / EXPLAIN, loads into base tables, and the SELECT rewrite
(proxy/datamaps/handler.py). The datamap catalog is SQLite at `<state dir>/catalog.db`.

The SparkSession that pipeline jobs run on:
  - embedded mode: the engine's own session (shared with its Thrift server);
  - remote mode (`--upstream`): `open_pipeline_session` (a JVM of our own), opened lazily,
    in a worker thread, by the first statement that needs it (datamap DDL, a load into a
    base table of a datamap, a query while datamaps exist and their schemas are unknown),
    or in the background at start when the catalog already holds datamaps (a restart).
    Until then nothing Spark-related is paid for. Right after it opens, its time zone is set
    to the upstream's default (proxy/timezone.py), before any pipeline job runs.
The event loop never opens the session: a handler running on the loop (or in a worker
deciding a statement for it, proxy/router.py) that would need it gets `SparkNotReady`,
forwards the original statement (always correct, only slower) and the session is opened in
the background. Recovery (crash leftovers: interrupted segments,
orphan partitions) runs once, before serving in embedded mode and right after the session
opens in remote mode.

`[datamaps] sync_interval_s` > 0 runs SYNC DATAMAPS (proxy/datamaps/sync.py) that often in an
owned task, each run in a worker thread; `[datamaps] auto_compaction` is the default of the
per-datamap DMPROPERTIES('auto_compaction').
"""
from __future__ import annotations

import asyncio
import logging
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable

from proxy import statements
from proxy.datamaps.catalog import Catalog
from proxy.datamaps.handler import DatamapDdlHandler, DatamapLoadHandler, DatamapSelectHandler
from proxy.datamaps.service import DatamapService
from proxy.router import Router, must_not_block

log = logging.getLogger("proxy.app")

Closer = Callable[[], Awaitable[None]]


class SparkNotReady(RuntimeError):
    """The pipeline session is not open yet and the caller runs on the event loop."""
    forward_quietly = True   # DatamapSelectHandler: forward the original, log at INFO


class LazySpark:
    """The pipeline SparkSession, created once on first use (thread-safe). `opener()` blocks
    (starts a JVM); `on_open(session)` runs once right after, still in the opening thread."""

    def __init__(self, opener: Callable[[], Any], on_open: Callable[[Any], None] | None = None,
                 closer: Callable[[Any], None] | None = None):
        self._opener = opener
        self._on_open = on_open
        self._closer = closer
        self._session: Any = None
        self._ready = False
        self._in_open = False
        self._lock = threading.RLock()
        self._warming: threading.Thread | None = None
        self.error: BaseException | None = None

    @property
    def ready(self) -> bool:
        return self._ready

    def get(self) -> Any:
        if self._ready:
            return self._session
        if must_not_block():          # the loop, or a worker deciding a statement for it
            self.warm()
            raise SparkNotReady("the pipeline Spark session is still starting")
        with self._lock:
            if self._ready or self._in_open:   # _in_open: on_open itself uses the session
                return self._session
            log.info("opening the pipeline Spark session")
            self._session = self._opener()
            self._in_open = True
            try:
                if self._on_open is not None:
                    self._on_open(self._session)
            finally:
                self._in_open = False
                self._ready = True
        return self._session

    __call__ = get

    def warm(self) -> None:
        """Open the session in a background thread (no-op when open or opening)."""
        if self._ready or (self._warming is not None and self._warming.is_alive()):
            return

        def run() -> None:
            try:
                self.get()
                self.error = None
            except Exception as e:  # noqa: BLE001 - reported; the next user retries
                self.error = e
                log.warning("opening the pipeline Spark session failed: %s", e, exc_info=True)
        self._warming = threading.Thread(target=run, name="pipeline-session", daemon=True)
        self._warming.start()

    def close(self) -> None:
        with self._lock:
            session, self._session, self._ready = self._session, None, False
        if session is not None and self._closer is not None:
            self._closer(session)


def _recover(service: DatamapService) -> None:
    try:
        dropped = service.recover()
    except Exception:  # noqa: BLE001 - serving beats refusing to start; logged loudly
        log.error("datamap recovery failed; continuing", exc_info=True)
        return
    n = sum(len(v) for v in dropped.values())
    if n:
        log.info("datamap recovery dropped %d orphan partition(s): %s", n, dropped)


ZONE_CHECK_S = 60.0


def align_time_zone(session: Any, upstream: Any, service: DatamapService,
                    at_open: bool = True) -> list[str]:
    """Remote mode: the pipeline session computes datamap rows, the upstream answers
    queries; both must bucket timestamps in the same zone. Align the pipeline session to
    the upstream's default zone; datamaps computed under another zone are invalidated
    (DatamapService.adopt_time_zone). Returns them.

    `at_open`: the session just opened (no datamap lock may be taken, the caller rebuilds
    the invalidated ones); a zone that cannot be read then keeps time-dependent datamaps
    out of rewriting (service.time_zone_problem). Otherwise this is the check every
    ZONE_CHECK_S (a Thrift server restarted with another zone): the datamaps are rebuilt
    here, and a zone that cannot be read changes nothing."""
    from proxy.timezone import TIME_ZONE_KEY, same_zone, set_session_zone as align
    from proxy.timezone import upstream_time_zone
    zone = upstream_time_zone(upstream)
    if zone is None:
        if at_open:
            service.time_zone_problem = (
                f"the upstream's default {TIME_ZONE_KEY} could not be read at start, so its "
                "time buckets may differ from the pipeline's")
            log.warning("time-dependent datamaps will not answer queries: %s",
                        service.time_zone_problem)
        return []

    def follow(z: str) -> None:
        if at_open or not same_zone(session.conf.get(TIME_ZONE_KEY), z):
            align(session, z)          # logs the zone (at open) or the change
    invalid = service.adopt_time_zone(zone, follow, rebuild=not at_open, lock=not at_open)
    if not at_open and service.time_zone_problem is not None:
        log.info("the upstream's time zone is readable again (%s): time-dependent datamaps "
                 "answer queries again", zone)
    service.time_zone_problem = None
    return invalid


def check_upstream_zone(session: Any, upstream: Any, service: DatamapService) -> list[str]:
    """The periodic check of the upstream's zone: align_time_zone(at_open=False)."""
    return align_time_zone(session, upstream, service, at_open=False)


async def _watch_upstream_zone(service: DatamapService, upstream: Any, spark: "LazySpark",
                               every: float) -> None:
    while True:
        await asyncio.sleep(every)
        if not spark.ready:
            continue      # aligned when it opens
        try:
            await asyncio.to_thread(check_upstream_zone, spark.get(), upstream, service)
        except Exception:  # noqa: BLE001 - logged; the next period retries
            log.warning("checking the upstream's time zone failed", exc_info=True)


def _adopt_engine_zone(session: Any, service: DatamapService) -> list[str]:
    """Embedded mode: the Thrift server's sessions use the engine's zone; datamaps computed
    under another one (a restart with another TZ) are invalidated, for rebuilding."""
    from proxy.timezone import TIME_ZONE_KEY
    try:
        return service.adopt_time_zone(str(session.conf.get(TIME_ZONE_KEY)), rebuild=False)
    except Exception:  # noqa: BLE001 - serving beats refusing to start; logged loudly
        log.error("could not compare the engine's time zone with the catalog's", exc_info=True)
        return []


def _warm_index(service: DatamapService) -> None:
    """Read the schemas of the datamaps' tables now, so the first query does not."""
    try:
        service.index()
    except Exception:  # noqa: BLE001 - the first query will retry (and forward meanwhile)
        log.warning("could not prepare the rewrite index", exc_info=True)


def _on_pipeline_open(session: Any, upstream: Any, service: DatamapService) -> None:
    """Remote mode, right after the pipeline session opened (LazySpark's lock held, so no
    job runs before these): align its time zone with the upstream's, recover, then warm
    the index in another thread. Warming it here would deadlock with a thread that holds
    the index's lock while it waits for the session (EXPLAIN's or a query's schema load,
    during the open at start)."""
    invalid = align_time_zone(session, upstream, service)
    _recover(service)
    threading.Thread(target=_after_start, args=(service, invalid), name="datamap-index-warm",
                     daemon=True).start()


def _after_start(service: DatamapService, invalid: list[str]) -> None:
    """Background work once the pipeline session is open: warm the rewrite index, then
    rebuild the datamaps a time-zone change invalidated."""
    _warm_index(service)
    if invalid:
        service.rebuild_invalidated(invalid)


SYNC_STOP_GRACE_S = 60.0


async def _sync_periodically(service: DatamapService, interval: float) -> None:
    """SYNC DATAMAPS every `interval` seconds until cancelled. A run that fails is logged
    and the next one tries again. Cancelled during a run (shutdown), it waits up to
    SYNC_STOP_GRACE_S for the run's thread (a cancelled await would not stop it) so that
    Spark is not stopped under a refresh."""
    log.info("datamap sync every %gs", interval)
    while True:
        await asyncio.sleep(interval)
        run = asyncio.ensure_future(asyncio.to_thread(service.sync_all))
        try:
            await asyncio.shield(run)
        except asyncio.CancelledError:
            done, _ = await asyncio.wait([run], timeout=SYNC_STOP_GRACE_S)
            if not done:
                log.warning("periodic datamap sync still running at shutdown; not waiting")
            elif run.exception() is not None:
                log.warning("periodic datamap sync failed", exc_info=run.exception())
            raise
        except Exception:  # noqa: BLE001 - logged; the next period retries
            log.warning("periodic datamap sync failed", exc_info=True)


async def build_router(settings: Any, engine: Any = None) -> tuple[Router, Closer]:
    """The Router for `serve` and an async closer to await after the server stopped.

    `engine` is the started EmbeddedEngine, or None in remote mode."""
    state_dir = Path(settings.state.dir).expanduser().resolve()
    state_dir.mkdir(parents=True, exist_ok=True)
    catalog = Catalog.in_state_dir(state_dir)
    holder: dict[str, DatamapService] = {}

    if engine is not None:
        spark = LazySpark(lambda: engine.spark)
    else:
        from proxy.engine import close_pipeline_session, open_pipeline_session
        spark = LazySpark(lambda: open_pipeline_session(state_dir, settings.spark),
                          on_open=lambda s: _on_pipeline_open(s, settings.upstream,
                                                              holder["service"]),
                          closer=close_pipeline_session)
    service = DatamapService(catalog, spark)
    holder["service"] = service
    dm_settings = getattr(settings, "datamaps", None)
    service.auto_compaction = bool(getattr(dm_settings, "auto_compaction", False))
    interval = float(getattr(dm_settings, "sync_interval_s", 0.0) or 0.0)

    if engine is not None:
        session = await asyncio.to_thread(spark.get)
        invalid = await asyncio.to_thread(_adopt_engine_zone, session, service)
        await asyncio.to_thread(_recover, service)
        await asyncio.to_thread(_warm_index, service)
        if invalid:
            threading.Thread(target=service.rebuild_invalidated, args=(invalid,),
                             name="datamap-rebuild", daemon=True).start()
    elif catalog.list_datamaps():
        # Remote mode with datamaps (a restart): open the session now, in the background,
        # so that queries are answered from datamaps again without waiting for a first
        # statement to ask for it (until then they are forwarded unchanged).
        spark.warm()

    router = Router()
    statements.install(router)
    max_sql = getattr(dm_settings, "rewrite_max_sql_bytes", None)
    router.handlers += [DatamapDdlHandler(service, max_sql), DatamapLoadHandler(service, max_sql),
                        DatamapSelectHandler(service, max_sql)]

    syncer = (asyncio.create_task(_sync_periodically(service, interval), name="datamap-sync")
              if interval > 0 else None)
    upstream = getattr(settings, "upstream", None)
    zone_watch = (asyncio.create_task(_watch_upstream_zone(service, upstream, spark,
                                                           ZONE_CHECK_S), name="zone-watch")
                  if engine is None and upstream is not None else None)

    async def closer() -> None:
        for task in (syncer, zone_watch):
            if task is not None:
                task.cancel()
                try:
                    await task
                except asyncio.CancelledError:
                    pass
        router.close()
        service.close()
        if engine is None:
            await asyncio.to_thread(spark.close)
        catalog.close()
    return router, closer
