"""`<name>_table` follows the catalog: after every publish, the view of the live segments
(pipeline/live.py) is replaced with the catalog's visible segments.

The catalog commit decides visibility (rewritten queries read the storage table by the
segment ids the catalog lists); the view is the metastore's copy for plain readers. If
replacing it fails, the datamap shows no half state: the view still shows the whole
previous set, whose partitions SegmentGarbage keeps while the view names them; the next
publish, maintenance run of the datamap or start (Maintenance.recover) replaces it again.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Callable

from pipeline import adopt_table, show_live, shown_segments
from proxy.datamaps.catalog.records import CatalogError, DatamapRecord
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.failures import describe

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("proxy.datamaps")


class LiveViews:
    def __init__(self, catalog: Catalog, spark: Callable[[], "SparkSession"]):
        self.catalog = catalog
        self._spark = spark

    def show(self, rec: DatamapRecord, strict: bool = False) -> bool:
        """Make `<name>_table` show the visible segments (caller holds the datamap's lock).
        False when that failed: logged and recorded as an event, not raised (the publish
        stands) unless `strict`."""
        ids = [s.id for s in self.catalog.visible_segments(rec.db, rec.name)]
        try:
            show_live(self._spark(), rec.definition, ids, rec.properties)
            return True
        except Exception as e:  # noqa: BLE001 - see the module docstring
            if strict:
                raise
            why = describe(e)[0]
            log.warning("datamap %s: %s still shows older segments: %s", rec.qualified,
                        rec.definition.table, why)
            try:
                self.catalog.record_event(rec.db, rec.name, "live-view-failed",
                                          detail=f"segments {','.join(ids)}: {why}"[:500])
            except CatalogError:
                pass   # dropped meanwhile
            return False

    def named(self, rec: DatamapRecord) -> frozenset[str] | None:
        """Segment ids the view names now; None when unknown (every partition is kept)."""
        shown = shown_segments(self._spark(), rec.definition)
        return None if shown is None else frozenset(shown)

    def adopt(self, rec: DatamapRecord) -> None:
        """At start: a datamap table from before the view becomes the storage table (its
        files move with it, and the catalog's record of them follows); the caller then
        shows the view. A failure leaves both as they were and is raised."""
        moved = adopt_table(self._spark(), rec.definition)
        if moved is not None:
            if moved[0] != moved[1]:
                self.catalog.relocate_files(rec.db, rec.name, *moved)
            log.info("datamap %s: %s is now its storage table %s", rec.qualified,
                     rec.definition.table, rec.definition.storage)
