"""Result sets of SHOW DATAMAP and SHOW SEGMENTS, with exactly contract.md's columns.

SHOW DATAMAP's seventh column, Status Reason, was added after CarbonData's six: why a
DISABLED datamap is disabled (e.g. `audit mismatch on <digest> at <time> UTC`), empty
when it is ENABLED. Depends On, added after it, names the datamaps whose tables the
datamap reads (a datamap on datamaps: docs/stacked.md) and whether they let it be fresh,
e.g. `default.hourly (fresh)`; empty for a datamap over base tables only. Rewrite, last,
is `true` unless ALTER DATAMAP ... DISABLE QUERY REWRITE switched it off (`NA` for index
datamaps, which answer no query). Building, after it, says that a build, refresh or
compaction is writing a segment now and since when (`segment 3 since 2026-11-28
00:31:02.118 (42 s)`); empty otherwise. A CREATE DATAMAP running now (on any replica
sharing the catalog: catalog/creating.py) shows its datamap from the statement's start,
before the datamap's own row exists: DISABLED, Sync Status NA, Building `being created
since 2026-11-28 00:30:38.540 (66 s)` (then `; segment 0 since …` once it writes one).
Refresh Mode, after Building, is `incremental` (a load appends a segment of the new rows'
partials) or `full` (a construct no increment exists for: the datamap is rebuilt from the
whole base tables), and Refresh Reason says why: the construct, or what an incremental
datamap stores to merge its distinct counts (rewriter/rebuilt.py refresh_mode)."""
from __future__ import annotations

import json
import time
from typing import Iterable, Sequence

from proxy.datamaps.catalog.creating import Creating
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.catalog.records import (
    SEG_IN_PROGRESS, BaseSegment, DatamapRecord, DatamapSegment, DatamapStatus, format_time,
    one_line,
)
from proxy.datamaps.upkeep.stacking import depends_on
from proxy.routing.router import LocalResult
from rewriter import refresh_mode

SHOW_DATAMAP_COLUMNS: tuple[tuple[str, str], ...] = (
    ("DataMapName", "string"), ("ClassName", "string"), ("Associated Table", "string"),
    ("DataMap Properties", "string"), ("DataMap Status", "string"), ("Sync Status", "string"),
    ("Status Reason", "string"), ("Depends On", "string"), ("Rewrite", "string"),
    ("Building", "string"), ("Refresh Mode", "string"), ("Refresh Reason", "string"),
)
SHOW_SEGMENTS_COLUMNS: tuple[tuple[str, str], ...] = (
    ("SegmentSequenceId", "string"), ("Status", "string"), ("Load Start Time", "string"),
    ("Load Time Taken", "string"), ("Rows", "bigint"), ("Files", "int"),
    ("Extra Info", "string"),
)


def format_properties(props: dict[str, str] | Iterable[tuple[str, str]]) -> str:
    items = props.items() if isinstance(props, dict) else props
    return ", ".join(f"'{k}'='{v}'" for k, v in sorted(items))


def format_seconds(seconds: float | None) -> str:
    return "NA" if seconds is None else f"{seconds:.3f}s"


def datamap_row(rec: DatamapRecord, sync: dict[str, str] | None,
                depends: str, rewrite: bool = True, building: str = "") -> tuple[str, ...]:
    return (rec.name, rec.provider, rec.table, format_properties(dict(rec.properties)),
            rec.status, "NA" if sync is None else json.dumps(sync),
            "" if rec.status == DatamapStatus.ENABLED else one_line(rec.status_reason),
            depends, "true" if rewrite else "false", building, *refresh_mode(rec.definition))


def building(segments: Iterable[DatamapSegment], now: float | None = None) -> str:
    """SHOW DATAMAP's Building: the segment being written now and since when; "" when none."""
    writing = [s for s in segments if s.status == SEG_IN_PROGRESS]
    if not writing:
        return ""
    seg = max(writing, key=lambda s: s.load_start)
    now = time.time() if now is None else now
    return (f"segment {seg.id} since {format_time(seg.load_start)} "
            f"({max(0.0, now - seg.load_start):.0f} s)")


def being_created(entry: Creating, now: float | None = None) -> str:
    now = time.time() if now is None else now
    return (f"being created since {format_time(entry.started)} "
            f"({max(0.0, now - entry.started):.0f} s)")


def creating_row(entry: Creating, now: float | None = None) -> tuple[str, ...]:
    """SHOW DATAMAP's row of a datamap whose CREATE runs and whose own row does not exist
    yet: it answers nothing (DISABLED), and has no sync status (NA) and no refresh mode
    (its SELECT is not compiled yet)."""
    return (entry.name, entry.provider, entry.table, format_properties(entry.properties),
            DatamapStatus.DISABLED, "NA", "CREATE DATAMAP has not finished", "", "true",
            being_created(entry, now), "", "")


def show_datamaps(catalog: Catalog, records: Sequence[DatamapRecord],
                  on_table: str | None = None) -> LocalResult:
    every = catalog.list_datamaps()
    off = catalog.rewrite_off()
    running: dict[str, Creating] = {}
    for entry in catalog.creating():          # earliest first: the one that runs longest
        running.setdefault(entry.qualified, entry)
    rows = []
    for r in records:
        writing = building(catalog.segments(r.db, r.name))
        entry = running.pop(r.qualified, None)
        if entry is not None:
            writing = being_created(entry) + (f"; {writing}" if writing else "")
        rows.append(datamap_row(r, catalog.sync_status(r.db, r.name),
                                depends_on(catalog, r, every), r.qualified not in off, writing))
    known = {r.qualified for r in every}
    rows += [creating_row(e) for e in running.values() if e.qualified not in known
             and (on_table is None or on_table in e.base_tables)]
    return LocalResult(SHOW_DATAMAP_COLUMNS, rows)


def datamap_segment_row(seg: DatamapSegment) -> tuple:
    status = _STATUS.get(seg.status, seg.status)
    info = {t: list(ids) for t, ids in sorted(seg.extra_info.items())}
    return (seg.id, status, format_time(seg.load_start), format_seconds(seg.load_seconds),
            seg.rows, len(seg.files), json.dumps(info))


def base_segment_row(seg: BaseSegment) -> tuple:
    # Files found by a listing (SYNC DATAMAPS, writes outside the proxy) have no known
    # load time, nor have segments cut without the statement's start (0.0 in the catalog,
    # which allows no NULL there): NA rather than a made-up 0.000s.
    known = seg.source == "proxy-load" and seg.load_seconds > 0
    taken = seg.load_seconds if known else None
    return (seg.id, _STATUS.get(seg.status, seg.status), format_time(seg.load_start),
            format_seconds(taken), seg.rows, len(seg.files), "")


# CarbonData's spelling of segment status in SHOW SEGMENTS.
_STATUS = {"SUCCESS": "Success", "MARKED_FOR_DELETE": "Marked for Delete",
           "COMPACTED": "Compacted", "FAILED": "Failed",
           "INSERT_IN_PROGRESS": "Insert In Progress"}


def segment_status(status: str) -> str:
    """A segment status as SHOW SEGMENTS spells it (the console shows it alike)."""
    return _STATUS.get(status, status)


def show_segments(catalog: Catalog, table: str) -> LocalResult | None:
    """Segments of a datamap table ("db.<name>_table") or of a base table, newest first.
    None when `table` is neither a datamap table nor a base table with datamaps (the
    caller reports 42S02)."""
    rec = catalog.datamap_by_table(table)
    if rec is not None:
        segs = catalog.segments(rec.db, rec.name)
        return LocalResult(SHOW_SEGMENTS_COLUMNS, [datamap_segment_row(s) for s in segs])
    if not catalog.list_datamaps(base_table=table) and not catalog.base_segments(table, False):
        return None
    segs = sorted(catalog.base_segments(table, live_only=False), key=lambda s: -int(s.id))
    return LocalResult(SHOW_SEGMENTS_COLUMNS, [base_segment_row(s) for s in segs])
