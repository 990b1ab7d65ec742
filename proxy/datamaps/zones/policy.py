"""Which time zone the datamaps' rows were computed under, and what happens when it changes.

Datamaps that bucket timestamps (hour(), date_trunc, timeseries(), ...) hold rows that
depend on the session time zone. The catalog records the zone they were computed under;
when the zone queries run in changes, those datamaps are hidden and rebuilt. In remote
mode, while the pipeline's zone may differ from the upstream's (`problem`), they are not
offered to the rewriter at all (EXPLAIN says why). The engine's other result-affecting
settings (proxy/engine/semantics.py) are recorded the same way; any datamap may depend on
them, so a change invalidates every datamap.
"""
from __future__ import annotations

import logging
from contextlib import ExitStack
from typing import TYPE_CHECKING, Callable, Iterable

from proxy.datamaps.catalog.records import DatamapRecord
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.failures import describe, logged
from proxy.datamaps.locks import KeyedLocks
from proxy.datamaps.schemas import SchemaCache
from proxy.engine.timezone import same_zone, time_dependent

if TYPE_CHECKING:
    from proxy.datamaps.upkeep.maintenance import Maintenance

log = logging.getLogger("proxy.datamaps")

# the catalog's record of the engine's result-affecting settings datamap rows were computed
# under (proxy/engine/semantics.py fingerprint)
SETTINGS_KEY = "engine_settings"


class ZoneReader:
    """The read side: why a datamap's rows depend on the zone, and (remote mode) why the
    pipeline's zone may differ from the upstream's. The rewrite index asks it."""

    def __init__(self, schemas: SchemaCache):
        self._schemas = schemas
        # Remote mode, set when the pipeline session opens (zones/pipeline.py): why the
        # pipeline's time zone may differ from the upstream's.
        self.problem: str | None = None

    def time_dependent(self, rec: DatamapRecord) -> str | None:
        """Why the datamap's rows depend on the session time zone, or None."""
        # The index needs these schemas anyway (it loads them right after).
        schemas = self._schemas.schemas(rec.definition.base_tables)
        return time_dependent(rec.definition.select_sql, schemas)


class TimeZonePolicy:
    """The act side: a changed zone hides, disables and rebuilds the datamaps it concerns."""

    def __init__(self, catalog: Catalog, reader: ZoneReader, locks: KeyedLocks,
                 maintenance: "Maintenance"):
        self.catalog = catalog
        self.reader = reader
        self._locks = locks
        self._maintenance = maintenance

    def adopt(self, zone: str, align: Callable[[str], object] | None = None,
              rebuild: bool = True, lock: bool = True) -> list[str]:
        """The zone queries bucket timestamps in is now `zone` (the upstream's default in
        remote mode, the engine's in embedded mode). `align(zone)` makes the pipeline
        session use it too. The catalog records the zone its datamaps were computed under;
        when that differs, the datamaps whose rows depend on it are hidden and disabled
        (the reason says why), and with `rebuild` the non-lazy ones are built again under
        the new zone (lazy ones wait for REBUILD). The switch happens while no job of such
        a datamap runs (their locks are held), so no segment mixes two zones. Returns the
        datamaps invalidated.

        `lock=False` is for the moment the pipeline session opens: a thread holding a
        datamap's lock may be waiting for that very session (taking the lock there would
        deadlock), and no job has computed anything yet. Jobs read the visible segments
        only after their first use of Spark, except compaction, whose publish is refused
        when the segments it merged were hidden meanwhile (Catalog.publish_segment)."""

        def dependent(rec: DatamapRecord) -> bool:
            try:
                return self.reader.time_dependent(rec) is not None
            except Exception:  # noqa: BLE001 - schema unreadable: assume it depends
                return True
        recorded = self.catalog.setting("time_zone")
        if recorded is None or same_zone(recorded, zone):
            if align is not None:
                align(zone)
            if recorded is None:    # the first record (or a catalog from before it was kept)
                self.catalog.set_setting("time_zone", zone)
            return []
        recs = sorted(filter(dependent, self.catalog.list_datamaps()), key=lambda r: r.qualified)
        self._invalidate(recs, f"the session time zone changed from {recorded} to {zone}",
                         lambda: align(zone) if align is not None else None, lock,
                         ("time_zone", zone))
        log.warning("time zone %s (datamaps were computed under %s): datamaps %s invalidated",
                    zone, recorded, ", ".join(r.qualified for r in recs) or "(none)")
        if rebuild:
            self.rebuild_invalidated([r.qualified for r in recs])
        return [rec.qualified for rec in recs]

    def adopt_settings(self, settings: str, align: Callable[[], object] | None = None,
                       rebuild: bool = True, lock: bool = True) -> list[str]:
        """The engine's result-affecting settings are now `settings` (those away from
        Spark's defaults, proxy/engine/semantics.py `fingerprint`). As `adopt` for the zone,
        with every datamap concerned (any row may depend on them): when the catalog
        recorded others, they are invalidated, and with `rebuild` the non-lazy ones built
        again. Returns the datamaps invalidated."""
        recorded = self.catalog.setting(SETTINGS_KEY)
        if recorded is None or recorded == settings:
            if align is not None:
                align()
            if recorded is None:
                self.catalog.set_setting(SETTINGS_KEY, settings)
            return []
        recs = sorted(self.catalog.list_datamaps(), key=lambda r: r.qualified)
        self._invalidate(recs, f"the engine's settings changed from {recorded} to {settings}",
                         align or (lambda: None), lock, (SETTINGS_KEY, settings))
        log.warning("engine settings %s (datamaps were computed under %s): datamaps %s "
                    "invalidated", settings, recorded,
                    ", ".join(r.qualified for r in recs) or "(none)")
        if rebuild:
            self.rebuild_invalidated([r.qualified for r in recs])
        return [rec.qualified for rec in recs]

    def _invalidate(self, recs: list[DatamapRecord], change: str, align: Callable[[], object],
                    lock: bool, record: tuple[str, str]) -> None:
        """Invalidate `recs` (`change` says why) and record the new value, with their
        locks held (`lock`) so that no job computes across the switch."""
        with ExitStack() as held:
            for rec in recs if lock else ():
                held.enter_context(self._locks(rec.qualified))
            align()
            for rec in recs:
                self.catalog.invalidate_datamap(
                    rec.db, rec.name, f"{change} after datamap {rec.qualified} was built: "
                    "REBUILD DATAMAP rebuilds it")
            self.catalog.set_setting(*record)

    def rebuild_invalidated(self, names: Iterable[str]) -> None:
        """Build the non-lazy datamaps among `names` ("db.name") again; failures are logged
        and leave them DISABLED with their reason."""
        for qualified in dict.fromkeys(names):      # a zone and a settings change alike
            db, _, name = qualified.partition(".")
            rec = self.catalog.get_datamap(db, name)
            if rec is None or rec.lazy:
                continue
            try:
                self._maintenance.refresh(db, name)
            except Exception as e:  # noqa: BLE001 - see the docstring
                log.warning("rebuilding datamap %s failed: %s", qualified, describe(e)[0],
                            exc_info=not logged(e))
