"""The pipeline session's time zone follows the one queries are answered in.

Datamap rows are computed by the pipeline session and queries are answered by the
upstream: both must bucket timestamps in the same zone. Remote mode aligns the pipeline
session to the upstream's default zone when it opens and checks again every
ZONE_CHECK_S (a Thrift server restarted with another zone); embedded mode compares the
engine's zone with the catalog's at start. Datamaps computed under another zone are
invalidated (DatamapService.adopt_time_zone). proxy/engine/timezone.py reads and sets zones.

The engine's other result-affecting settings (ANSI mode, decimal precision loss, legacy
parsers, ...; proxy/engine/semantics.py) are read at the same moments: while any is away
from Spark's defaults no datamap answers (DatamapService.engine_settings_problem, the reason
EXPLAIN and the query log give); remote mode gives the pipeline session the upstream's
values; datamaps computed under other settings are invalidated
(DatamapService.adopt_engine_settings).
"""
from __future__ import annotations

import logging
from typing import Any

from proxy.engine import semantics, timezone
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
    """The periodic check of the upstream's zone and settings: align_pipeline_zone and
    align_pipeline_settings with at_open=False."""
    return (align_pipeline_zone(session, upstream, service, at_open=False)
            + align_pipeline_settings(session, upstream, service, at_open=False))


def align_pipeline_settings(session: Any, upstream: Any, service: DatamapService,
                            at_open: bool = True) -> list[str]:
    """Remote mode: read the upstream's result-affecting settings (a fresh session's `SET`),
    give the pipeline session the same values, and keep datamaps from answering while they
    are not Spark's defaults; returns the datamaps computed under other settings
    (invalidated). `at_open` as for align_pipeline_zone: settings that cannot be read then
    keep every datamap from answering; at the periodic check they change nothing."""
    listed = semantics.upstream_listing(upstream)
    if listed is None:
        if at_open:
            _set_problem(service, "the upstream's settings could not be read at start, so "
                         "its answers may not be those datamap answers are proven for")
        return []
    registry = semantics.jvm_registry(session)
    diffs = semantics.differences(listed, registry)
    try:
        return _adopt_settings(service, diffs,
                               lambda: semantics.align_session(session, listed, registry),
                               rebuild=not at_open, lock=not at_open)
    except Exception:  # noqa: BLE001 - the session opens all the same; logged loudly
        log.error("could not align the pipeline session's settings with the upstream's",
                  exc_info=True)
        _set_problem(service, "the pipeline session's settings could not be aligned with "
                     "the upstream's")
        return []


def adopt_engine_settings(session: Any, service: DatamapService) -> list[str]:
    """Embedded mode: the Thrift server's sessions get the engine's settings (its SparkConf,
    `[spark] conf`); datamaps computed under others are invalidated, for rebuilding."""
    try:
        diffs = semantics.differences(semantics.session_listing(session),
                                      semantics.jvm_registry(session))
        return _adopt_settings(service, diffs, None, rebuild=False, lock=True)
    except Exception:  # noqa: BLE001 - serving beats refusing to start; logged loudly
        log.error("could not compare the engine's settings with Spark's defaults",
                  exc_info=True)
        _set_problem(service, "the engine's settings could not be compared with Spark's "
                     "defaults")
        return []


def _adopt_settings(service: DatamapService, diffs: list, align, rebuild: bool,
                    lock: bool) -> list[str]:
    """Record the settings datamaps are computed under and say whether they answer; returns
    the datamaps invalidated. Rebuilt only under Spark's defaults (under others nothing
    would read them): none is returned for the caller to rebuild then."""
    problem = semantics.describe(diffs)
    if problem is not None:         # first: from now on no datamap answers
        _set_problem(service, problem)
    invalid = service.adopt_engine_settings(semantics.fingerprint(diffs), align,
                                            rebuild=rebuild and not diffs, lock=lock)
    if problem is None and service.engine_settings_problem is not None:
        log.info("the engine runs with Spark's defaults again: datamaps answer queries again")
    service.engine_settings_problem = problem      # last: after the datamaps were judged
    return [] if diffs else invalid


def _set_problem(service: DatamapService, problem: str) -> None:
    if problem != service.engine_settings_problem:
        log.warning("no datamap will answer queries: %s", problem)
    service.engine_settings_problem = problem


def adopt_engine_zone(session: Any, service: DatamapService) -> list[str]:
    """Embedded mode: the Thrift server's sessions use the engine's zone; datamaps computed
    under another one (a restart with another TZ) are invalidated, for rebuilding."""
    try:
        return service.adopt_time_zone(str(session.conf.get(timezone.TIME_ZONE_KEY)),
                                       rebuild=False)
    except Exception:  # noqa: BLE001 - serving beats refusing to start; logged loudly
        log.error("could not compare the engine's time zone with the catalog's", exc_info=True)
        return []
