"""What runs once the pipeline session is open, before datamaps answer queries: crash
recovery (interrupted segments, orphan partitions), the time-zone and engine-settings
alignment (proxy/datamaps/zones/pipeline.py), warming the rewrite index, rebuilding what a
zone or settings change invalidated. Embedded mode runs it before serving; remote mode right after the pipeline
session opens (proxy/engine/pipeline_session.py), in the opening thread, then in the background.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from proxy.background import Background
from proxy.datamaps.service import DatamapService
from proxy.datamaps.zones.pipeline import (adopt_engine_settings, adopt_engine_zone,
                                           align_pipeline_settings, align_pipeline_zone)

log = logging.getLogger("proxy.app")


def recover(service: DatamapService) -> None:
    try:
        dropped = service.recover()
    except Exception:  # noqa: BLE001 - serving beats refusing to start; logged loudly
        log.error("datamap recovery failed; continuing", exc_info=True)
        return
    n = sum(len(v) for v in dropped.values())
    if n:
        log.info("datamap recovery dropped %d orphan partition(s): %s", n, dropped)


# how long start-up waits for the rewrite index to be warm (every datamap compiled): a
# small catalog answers from its first statement; a large one's queries go to Spark until
# its datamaps are compiled (the warm-up goes on in the background)
WARM_WAIT_S = 5.0


def warm_index(service: DatamapService) -> None:
    """Read the schemas of the datamaps' tables now, so the first query does not, and give
    the warm-up up to WARM_WAIT_S."""
    try:
        service.rewrite_index.warmed(WARM_WAIT_S)
    except Exception:  # noqa: BLE001 - the first query will retry (and forward meanwhile)
        log.warning("could not prepare the rewrite index", exc_info=True)


def after_start(service: DatamapService, invalid: list[str]) -> None:
    """Background work once the pipeline session is open: warm the rewrite index, then
    rebuild the datamaps a time-zone change invalidated."""
    warm_index(service)
    if invalid:
        service.rebuild_invalidated(invalid)


class RemoteStart:
    """Remote mode's on_open hook for the pipeline session (LazySpark's lock held, so no job
    runs before it): align the session's zone with the upstream's, recover, then warm the
    index in another thread. Warming it here would deadlock with a thread that holds the
    index's lock while it waits for the session (EXPLAIN's or a query's schema load,
    during the open at start)."""

    def __init__(self, upstream: Any, service: DatamapService, background: Background):
        self.upstream = upstream
        self.service = service
        self.background = background

    def __call__(self, session: Any) -> None:
        invalid = align_pipeline_zone(session, self.upstream, self.service)
        invalid += align_pipeline_settings(session, self.upstream, self.service)
        recover(self.service)
        self.background.thread("datamap-index-warm", after_start, self.service, invalid)


async def start_embedded(session: Any, service: DatamapService, background: Background) -> None:
    """Embedded mode, before serving: the engine's zone, recovery, the index; rebuilding
    what a zone change invalidated goes on in the background."""
    invalid = await asyncio.to_thread(adopt_engine_zone, session, service)
    invalid += await asyncio.to_thread(adopt_engine_settings, session, service)
    await asyncio.to_thread(recover, service)
    await asyncio.to_thread(warm_index, service)
    if invalid:
        background.thread("datamap-rebuild", service.rebuild_invalidated, invalid)
