"""Merging datamap segments: COMPACT DATAMAP and auto-compaction, and dropping the
partitions of segments nobody may read any more.

A merge writes one new segment from visible ones and publishes it in one catalog commit
that hides them (COMPACTED); `<name>_table` then shows the new segment instead
(`LiveViews`); their partitions are garbage from then on, dropped after a grace period
(`SegmentGarbage`).
"""
from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Callable, Mapping, Sequence

from pipeline import compact
from pipeline.table import drop_segments
from proxy.datamaps.catalog.records import CatalogError, DatamapRecord, DatamapStatus
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.failures import describe, job_failed, logged
from proxy.datamaps.locks import KeyedLocks
from proxy.datamaps.upkeep.job_progress import spark_progress, stage
from proxy.datamaps.upkeep.live_view import LiveViews
from proxy.errors import ClientError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("proxy.datamaps")

MINOR_THRESHOLD_PROPERTY = "minor_compaction_threshold"
DEFAULT_MINOR_THRESHOLD = 4
AUTO_COMPACTION_PROPERTY = "auto_compaction"


def minor_threshold(props: Mapping[str, str]) -> int:
    """How many of the newest segments COMPACT 'MINOR' merges (DMPROPERTIES, default 4)."""
    raw = str(props.get(MINOR_THRESHOLD_PROPERTY, DEFAULT_MINOR_THRESHOLD)).strip()
    if not raw.isdigit() or int(raw) < 2:
        raise ClientError(f"DMPROPERTIES '{MINOR_THRESHOLD_PROPERTY}'='{raw}': expected a whole "
                          "number of segments, at least 2", "42000")
    return int(raw)


def auto_compaction(props: Mapping[str, str], default: bool) -> bool:
    """DMPROPERTIES('auto_compaction'='true'|'false'); the server setting otherwise."""
    raw = props.get(AUTO_COMPACTION_PROPERTY)
    return default if raw is None else str(raw).strip().lower() == "true"


class SegmentGarbage:
    """Drops the partitions of invisible segments. A superseded segment (rebuild,
    compaction) is kept for `grace_s` after it was first seen hidden: a query rewritten just
    before the publish still names it and must find its rows. Such segments are dropped by a
    later maintenance run on the datamap (or at restart by recovery), never while the view
    `<name>_table` names them (a replace of the view that failed). Failed segments were
    never visible and go at once."""

    def __init__(self, catalog: Catalog, spark: Callable[[], "SparkSession"], live: LiveViews):
        self.catalog = catalog
        self._spark = spark
        self.live = live
        self._hidden_at: dict[tuple[str, str], float] = {}
        self.grace_s = 120.0

    def published(self, rec: DatamapRecord) -> None:
        """After a publish (datamap lock held): the view follows the catalog, then what was
        superseded long enough ago goes."""
        self.live.show(rec)
        self.drop(rec)

    def drop(self, rec: DatamapRecord) -> None:
        now = time.monotonic()
        failed, superseded = [], []
        for seg in self.catalog.garbage_segments(rec.db, rec.name):
            hidden_at = self._hidden_at.setdefault((rec.qualified, seg.id), now)
            if seg.status == "FAILED":
                failed.append(seg.id)
            elif now - hidden_at >= self.grace_s:
                superseded.append(seg.id)
        garbage = failed + (self._unnamed(rec, superseded) if superseded else [])
        if garbage:
            try:
                drop_segments(self._spark(), rec.definition, garbage)
                self.catalog.mark_dropped(rec.db, rec.name, garbage)
                for sid in garbage:
                    self._hidden_at.pop((rec.qualified, sid), None)
            except Exception:  # noqa: BLE001 - invisible anyway; recovery retries
                log.warning("could not drop segments %s of %s", garbage, rec.qualified,
                            exc_info=True)

    def _unnamed(self, rec: DatamapRecord, ids: list[str]) -> list[str]:
        """`ids` less those the view names. A view that names some (its replace failed) or
        cannot be read is replaced first; if that fails too, none of `ids` may go."""
        named = self.live.named(rec)
        if named is not None and not named.intersection(ids):
            return ids
        return ids if self.live.show(rec) else []   # now it names visible segments only


class Compaction:
    def __init__(self, catalog: Catalog, spark: Callable[[], "SparkSession"],
                 locks: KeyedLocks, garbage: SegmentGarbage, auto_default: bool = False):
        self.catalog = catalog
        self._spark = spark
        self._locks = locks
        self._garbage = garbage
        # [datamaps] auto_compaction: MINOR compaction after a refresh once enough incremental
        # segments piled up; DMPROPERTIES('auto_compaction'=...) overrides it per datamap.
        self.auto_default = auto_default

    def compact(self, rec: DatamapRecord, mode: str, segment_ids: Sequence[str] = ()) -> None:
        """COMPACT DATAMAP ... 'MINOR' | 'MAJOR' | 'CUSTOM' (segment_ids)."""
        with self._locks(rec.qualified):
            visible = [s.id for s in self.catalog.visible_segments(rec.db, rec.name)]
            if mode == "custom":
                unknown = [i for i in segment_ids if i not in visible]
                if unknown:
                    raise ClientError(f"Segment {', '.join(unknown)} of datamap {rec.qualified}"
                                      f" is not a valid segment (valid: {', '.join(visible)})",
                                      "42S02")
                ids = list(segment_ids)
            elif mode == "minor":
                # CarbonData's minor compaction: the newest `threshold` segments merge into
                # one; with fewer there is nothing to do yet.
                threshold = minor_threshold(rec.properties)
                if len(visible) < threshold:
                    return
                ids = visible[-threshold:]
            else:
                ids = visible           # MAJOR: everything, one row per group afterwards
            if len(ids) >= 2:
                self.merge(rec, ids)

    def merge(self, rec: DatamapRecord, ids: list[str]) -> str:
        """Merge visible segments `ids` into a new one (caller holds the datamap's lock)."""
        merged: dict[str, set[str]] = {}
        for seg in self.catalog.visible_segments(rec.db, rec.name):
            if seg.id in ids:
                for t, bids in seg.extra_info.items():
                    merged.setdefault(t, set()).update(bids)
        spark = self._spark()
        sid = self.catalog.begin_segment(rec.db, rec.name, merged)
        stage(f"compacting datamap {rec.qualified}: segment {sid} reads its segments "
              f"{', '.join(ids)} and writes its files")
        try:
            with spark_progress(spark):
                w = compact(spark, rec.definition, ids, sid, rec.properties)
        except Exception as e:
            self.catalog.fail_segment(rec.db, rec.name, sid, f"compaction failed: {describe(e)[0]}",
                                      disable=False)
            raise job_failed(e, f"Compacting datamap {rec.qualified} "
                                f"(segments {', '.join(ids)})") from e
        stage(f"publishing segment {sid} of {rec.qualified} ({w.rows} rows, {len(w.files)} "
              "files)")
        try:
            self.catalog.publish_segment(rec.db, rec.name, sid, rows=w.rows, files=w.files,
                                         seconds=w.seconds, supersedes=ids, kind="compacted",
                                         enable=rec.status == DatamapStatus.ENABLED)
        except CatalogError as e:
            self.catalog.fail_segment(rec.db, rec.name, sid, str(e), disable=False)
            raise ClientError(str(e), e.sqlstate) from e
        self._garbage.published(rec)
        stage(f"segment {sid} of {rec.qualified} published")
        return sid

    def after_refresh(self, rec: DatamapRecord) -> None:
        """After a refresh published a segment (datamap lock held): with auto-compaction on
        and at least `minor_compaction_threshold` incremental segments visible, merge the
        newest of them (CarbonData's auto load merge). Built and compacted segments are left
        alone, so the cost follows the recent loads, not the table. A failure is logged and
        recorded; it never fails the load or disables the datamap: the refreshed segments
        stay visible and correct."""
        if not auto_compaction(rec.properties, self.auto_default):
            return
        try:
            rec = self.catalog.require_datamap(rec.db, rec.name)   # status after the publish
            threshold = minor_threshold(rec.properties)
            incremental = [s.id for s in self.catalog.visible_segments(rec.db, rec.name)
                           if s.kind == "refreshed"]
            if len(incremental) < threshold:
                return
            ids = incremental[-threshold:]
            t0 = time.monotonic()
            sid = self.merge(rec, ids)
            log.info("datamap %s: auto-compaction merged segments %s into %s in %.2fs",
                     rec.qualified, ",".join(ids), sid, time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - see the docstring
            log.warning("auto-compaction of datamap %s failed: %s", rec.qualified, describe(e)[0],
                        exc_info=not logged(e))
            try:
                self.catalog.record_event(rec.db, rec.name, "auto-compaction-failed",
                                          detail=describe(e)[0][:500])
            except CatalogError:
                pass   # dropped meanwhile
