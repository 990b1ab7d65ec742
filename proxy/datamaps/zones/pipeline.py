"""The pipeline session's time zone follows the one queries are answered in.

Datamap rows are computed by the pipeline session and queries are answered by the
upstream: both must bucket timestamps in the same zone. Remote mode aligns the pipeline
session to the upstream's default zone when it opens and checks again every
ZONE_CHECK_S (a Thrift server restarted with another zone); embedded mode compares the
engine's zone with the catalog's at start. Datamaps computed under another zone are
invalidated (DatamapService.adopt_time_zone). proxy/engine/timezone.py reads and sets zones.
"""
from __future__ import annotations

import logging
from typing import Any

from proxy.engine import timezone
from proxy.datamaps.service import DatamapService

log = logging.getLogger("proxy.app")

ZONE_CHECK_S = 60.0


def align_pipeline_zone(session: Any, upstream: Any, service: DatamapService,
                        at_open: bool = True) -> list[str]:
    """Remote mode: align the pipeline session to the upstream's default zone; returns the
    datamaps computed under another zone (invalidated).

    `at_open`: the session just opened (no datamap lock may be taken, the caller rebuilds
    the invalidated ones); a zone that cannot be read then keeps time-dependent datamaps
    out of rewriting (service.time_zone_problem). Otherwise this is the periodic check:
    the datamaps are rebuilt here, and a zone that cannot be read changes nothing."""
    zone = timezone.upstream_time_zone(upstream)
    if zone is None:
        if at_open:
            service.time_zone_problem = (
                f"the upstream's default {timezone.TIME_ZONE_KEY} could not be read at start, "
                "so its time buckets may differ from the pipeline's")
            log.warning("time-dependent datamaps will not answer queries: %s",
                        service.time_zone_problem)
        return []

    def follow(z: str) -> None:
        if at_open or not timezone.same_zone(session.conf.get(timezone.TIME_ZONE_KEY), z):
            timezone.set_session_zone(session, z)    # logs the zone (at open) or the change
    invalid = service.adopt_time_zone(zone, follow, rebuild=not at_open, lock=not at_open)
    if not at_open and service.time_zone_problem is not None:
        log.info("the upstream's time zone is readable again (%s): time-dependent datamaps "
                 "answer queries again", zone)
    service.time_zone_problem = None
    return invalid


def check_upstream_zone(session: Any, upstream: Any, service: DatamapService) -> list[str]:
    """The periodic check of the upstream's zone: align_pipeline_zone(at_open=False)."""
    return align_pipeline_zone(session, upstream, service, at_open=False)


def adopt_engine_zone(session: Any, service: DatamapService) -> list[str]:
    """Embedded mode: the Thrift server's sessions use the engine's zone; datamaps computed
    under another one (a restart with another TZ) are invalidated, for rebuilding."""
    try:
        return service.adopt_time_zone(str(session.conf.get(timezone.TIME_ZONE_KEY)),
                                       rebuild=False)
    except Exception:  # noqa: BLE001 - serving beats refusing to start; logged loudly
        log.error("could not compare the engine's time zone with the catalog's", exc_info=True)
        return []
