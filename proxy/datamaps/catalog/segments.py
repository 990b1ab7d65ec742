"""The catalog's segments: base-table segments (the files one load added) and datamap
segments (one partition of the datamap table each), and what they say about whether a
datamap is in sync.

Publishing a refresh is one transaction (`publish_segment`): the new segment becomes visible
and the segments it supersedes stop being visible at the same commit, so a reader sees the
datamap before or after a refresh, never half of it.
"""
from __future__ import annotations

import json
import time
from typing import Callable, Mapping, Sequence

from proxy.datamaps.catalog.records import (
    SEG_COMPACTED, SEG_DELETED, SEG_FAILED, SEG_IN_PROGRESS, SEG_SUCCESS, SOURCES,
    BaseSegment, CatalogError, DatamapSegment, DatamapStatus, base_from_row, format_time,
    one_line, segment_from_row,
)


class SegmentStore:
    """Mixed into Catalog: uses its `_tx`, `_next_id`, `_event`, `get_datamap` and
    `require_datamap`."""

    # -- base-table segments -------------------------------------------------------------
    def add_base_segment(self, table: str, files: Sequence[str], *, rows: int | None = None,
                         source: str = "proxy-load", load_start: float | None = None,
                         load_seconds: float = 0.0) -> BaseSegment:
        """Record that one load added `files` to `table`; returns the new segment."""
        if source not in SOURCES:
            raise ValueError(f"bad segment source {source!r}")
        with self._tx() as c:
            sid = self._next_id(c, f"base:{table}")
            c.execute("INSERT INTO base_segments VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                      (table, sid, json.dumps(sorted(files)), rows,
                       time.time() if load_start is None else load_start, load_seconds,
                       source, SEG_SUCCESS))
            self._stamp_table(c, table)
            return base_from_row(c.execute("SELECT * FROM base_segments WHERE tbl = ? AND id = ?",
                                        (table, sid)).fetchone())

    def base_segments(self, table: str, live_only: bool = True) -> list[BaseSegment]:
        with self._tx(write=False) as c:
            sql = "SELECT * FROM base_segments WHERE tbl = ?"
            if live_only:
                sql += f" AND status = '{SEG_SUCCESS}'"
            return [base_from_row(r) for r in c.execute(sql + " ORDER BY id", (table,))]

    def base_rows(self, tables: Sequence[str]) -> int | None:
        """Rows of the live segments of `tables` together, as the catalog counted them (the
        query log scales its time-saved estimate by it); None when a table has no live
        segment or one of unknown rows."""
        if not tables:
            return None
        tables = sorted(set(tables))
        with self._tx(write=False) as c:
            got = {t: (n, known, total) for t, n, known, total in c.execute(
                "SELECT tbl, count(*), count(rows), sum(rows) FROM base_segments WHERE "
                f"status = '{SEG_SUCCESS}' AND tbl IN ({', '.join('?' * len(tables))}) "
                "GROUP BY tbl", tables)}
        if any(t not in got or got[t][0] != got[t][1] for t in tables):
            return None
        return sum(int(got[t][2]) for t in tables)

    def base_files(self, table: str) -> set[str]:
        """Files of the live segments of `table`: what the catalog believes the table holds."""
        return {f for s in self.base_segments(table) for f in s.files}

    def mark_base_deleted(self, table: str, ids: Sequence[str] | None = None) -> int:
        """Mark segments (all live ones by default) MARKED_FOR_DELETE, e.g. after INSERT
        OVERWRITE or TRUNCATE; returns how many changed."""
        with self._tx() as c:
            if ids is None:
                cur = c.execute("UPDATE base_segments SET status = ? WHERE tbl = ? AND "
                                "status = ?", (SEG_DELETED, table, SEG_SUCCESS))
            else:
                cur = c.executemany("UPDATE base_segments SET status = ? WHERE tbl = ? AND "
                                    "id = ?", [(SEG_DELETED, table, int(i)) for i in ids])
            self._stamp_table(c, table)
            return cur.rowcount

    def forget_base_table(self, table: str) -> None:
        """The base table was dropped: forget its segments and counter."""
        with self._tx() as c:
            c.execute("DELETE FROM base_segments WHERE tbl = ?", (table,))
            c.execute("DELETE FROM counters WHERE scope = ?", (f"base:{table}",))
            self._stamp_table(c, table)     # kept: a table made again starts a new mark

    # -- datamap segments ----------------------------------------------------------------
    def begin_segment(self, db: str, name: str,
                      extra_info: Mapping[str, Sequence[str]]) -> str:
        """Reserve a datamap segment id (its partition value) for a job about to write it.
        Not visible until `publish_segment`."""
        with self._tx() as c:
            if not c.execute("SELECT 1 FROM datamaps WHERE db = ? AND name = ?",
                             (db, name)).fetchone():
                raise CatalogError(f"Datamap {db}.{name} does not exist", "42S02")
            sid = self._next_id(c, f"dm:{db}.{name}")
            info = {t: sorted((str(i) for i in ids), key=int) for t, ids in extra_info.items()}
            c.execute("INSERT INTO dm_segments (db, name, id, extra_info, status, load_start) "
                      "VALUES (?, ?, ?, ?, ?, ?)",
                      (db, name, sid, json.dumps(info, sort_keys=True), SEG_IN_PROGRESS,
                       time.time()))
            return str(sid)

    def publish_segment(self, db: str, name: str, segment_id: str, *, rows: int,
                        files: Sequence[str] = (), seconds: float | None = None,
                        supersedes: Sequence[str] = (), kind: str = "refreshed",
                        enable: bool = True) -> None:
        """Make the segment visible and hide `supersedes` in one commit. kind: built (full
        build: superseded segments become MARKED_FOR_DELETE), refreshed (incremental append),
        compacted (superseded segments become COMPACTED)."""
        if kind not in ("built", "refreshed", "compacted"):
            raise ValueError(f"unknown segment kind {kind!r}")
        gone = SEG_COMPACTED if kind == "compacted" else SEG_DELETED
        with self._tx() as c:
            row = c.execute("SELECT * FROM dm_segments WHERE db = ? AND name = ? AND id = ?",
                            (db, name, int(segment_id))).fetchone()
            if row is None or row["status"] != SEG_IN_PROGRESS:
                raise CatalogError(f"Segment {segment_id} of datamap {db}.{name} is not being "
                                   "written", "HY000")
            if kind == "compacted":
                hidden = [i for i in supersedes if not c.execute(
                    "SELECT visible FROM dm_segments WHERE db = ? AND name = ? AND id = ?",
                    (db, name, int(i))).fetchone()[0]]
                if hidden:
                    raise CatalogError(
                        f"Compaction of datamap {db}.{name} merged segments "
                        f"{', '.join(hidden)}, which were rebuilt or invalidated meanwhile; "
                        "nothing was compacted", "HY000")
            if seconds is None:
                seconds = time.time() - row["load_start"]
            c.execute("UPDATE dm_segments SET visible = 1, status = ?, rows = ?, files = ?, "
                      "load_seconds = ?, kind = ? WHERE db = ? AND name = ? AND id = ?",
                      (SEG_SUCCESS, rows, json.dumps(list(files)), seconds, kind, db, name,
                       int(segment_id)))
            for old in supersedes:
                c.execute("UPDATE dm_segments SET visible = 0, status = ? WHERE db = ? AND "
                          "name = ? AND id = ?", (gone, db, name, int(old)))
            self._stamp(c, db, name)
            self._event(c, db, name, kind, rows, seconds,
                        f"segment {segment_id}" + (f" replaces {','.join(supersedes)}"
                                                   if supersedes else ""))
            if enable:
                c.execute("UPDATE datamaps SET status = ?, status_reason = '' WHERE db = ? "
                          "AND name = ?", (DatamapStatus.ENABLED, db, name))

    def fail_segment(self, db: str, name: str, segment_id: str, reason: str,
                     disable: bool = True) -> None:
        """The job writing the segment failed: never show it; disable the datamap (a failed
        refresh must not leave a datamap serving stale or partial data)."""
        with self._tx() as c:
            c.execute("UPDATE dm_segments SET visible = 0, status = ? WHERE db = ? AND "
                      "name = ? AND id = ?", (SEG_FAILED, db, name, int(segment_id)))
            self._stamp(c, db, name)
            self._event(c, db, name, "failed", detail=f"segment {segment_id}: {reason}")
            if disable:
                c.execute("UPDATE datamaps SET status = ?, status_reason = ? WHERE db = ? AND "
                          "name = ?", (DatamapStatus.DISABLED, reason, db, name))

    def mark_dropped(self, db: str, name: str, segment_ids: Sequence[str]) -> None:
        """Their partitions were removed from the datamap table."""
        with self._tx() as c:
            c.executemany("UPDATE dm_segments SET dropped = 1, visible = 0 WHERE db = ? AND "
                          "name = ? AND id = ?", [(db, name, int(i)) for i in segment_ids])
            self._stamp(c, db, name)

    def relocate_files(self, db: str, name: str, old: str, new: str) -> None:
        """The datamap's files moved from directory `old` to `new` (its storage table was
        renamed): the recorded paths follow, in one commit."""
        prefix = old.rstrip("/") + "/"
        with self._tx() as c:
            for row in c.execute("SELECT id, files FROM dm_segments WHERE db = ? AND name = ?",
                                 (db, name)).fetchall():
                files = [new.rstrip("/") + "/" + f[len(prefix):] if f.startswith(prefix) else f
                         for f in json.loads(row["files"])]
                c.execute("UPDATE dm_segments SET files = ? WHERE db = ? AND name = ? AND "
                          "id = ?", (json.dumps(files), db, name, row["id"]))
            self._stamp(c, db, name)
            self._event(c, db, name, "relocated", detail=f"files moved from {old} to {new}")

    def segments(self, db: str, name: str) -> list[DatamapSegment]:
        """All segments of the datamap, newest first."""
        with self._tx(write=False) as c:
            return [segment_from_row(r) for r in c.execute(
                "SELECT * FROM dm_segments WHERE db = ? AND name = ? ORDER BY id DESC",
                (db, name))]

    def visible_segments(self, db: str, name: str) -> list[DatamapSegment]:
        """What readers may see, oldest first."""
        return sorted((s for s in self.segments(db, name) if s.visible), key=lambda s: int(s.id))

    def garbage_segments(self, db: str, name: str) -> list[DatamapSegment]:
        """Invisible segments whose partitions may still exist (superseded or failed)."""
        return [s for s in self.segments(db, name)
                if not s.visible and not s.dropped and s.status != SEG_IN_PROGRESS]

    def covered_base_segments(self, db: str, name: str) -> dict[str, set[str]]:
        """Base segment ids (per base table) the visible datamap segments were built from."""
        covered: dict[str, set[str]] = {}
        for seg in self.visible_segments(db, name):
            for table, ids in seg.extra_info.items():
                covered.setdefault(table, set()).update(ids)
        return covered

    def pending_base_segments(self, db: str, name: str) -> dict[str, list[BaseSegment]]:
        """Live base segments of each base table that no visible datamap segment covers."""
        rec = self.require_datamap(db, name)
        covered = self.covered_base_segments(db, name)
        return {t: [s for s in self.base_segments(t) if s.id not in covered.get(t, set())]
                for t in rec.base_tables}

    def covers_deleted_base_segments(self, db: str, name: str) -> bool:
        """True when a visible segment was built from base segments that are no longer live
        (INSERT OVERWRITE, TRUNCATE, ...): its rows are stale and only a full rebuild fixes
        that."""
        for table, ids in self.covered_base_segments(db, name).items():
            live = {s.id for s in self.base_segments(table)}
            if ids - live:
                return True
        return False

    def is_in_sync(self, db: str, name: str) -> bool:
        """ENABLED and every live base segment is covered."""
        rec = self.get_datamap(db, name)
        if rec is None or rec.status != DatamapStatus.ENABLED:
            return False
        return (not any(self.pending_base_segments(db, name).values())
                and not self.covers_deleted_base_segments(db, name))

    def unavailable_reason(self, db: str, name: str) -> str | None:
        """Why the datamap may not answer queries now (one line, for EXPLAIN), or None when
        it is ENABLED and in sync (the same test as is_in_sync)."""
        rec = self.get_datamap(db, name)
        if rec is None:
            return "datamap does not exist"
        return unavailable_because(rec, self.visible_segments(db, name),
                                   lambda table, _covered: self.base_segments(table))

    def sync_status(self, db: str, name: str) -> dict[str, str] | None:
        """SHOW DATAMAP's Sync Status: last synchronised base segment per base table and the
        end time of the newest visible segment; None before the first build."""
        rec = self.require_datamap(db, name)
        visible = self.visible_segments(db, name)
        if not visible:
            return None
        covered = self.covered_base_segments(db, name)
        out = {t: (str(max(int(i) for i in covered[t])) if covered.get(t) else "NA")
               for t in rec.base_tables}
        last = max(visible, key=lambda s: s.load_start + (s.load_seconds or 0))
        out["loadEndTime"] = format_time(last.load_start + (last.load_seconds or 0))
        return out


def unavailable_because(rec, visible: Sequence[DatamapSegment],
                        base_of: Callable[[str, set[str]], list[BaseSegment]]) -> str | None:
    """SegmentStore.unavailable_reason over what was read already: the datamap's record,
    its visible segments, and base_of(table, ids its segments cover) -> the table's live
    base segments (a caller judging many datamaps reads each table once)."""
    if rec.status != DatamapStatus.ENABLED:
        return f"datamap is DISABLED: {one_line(rec.status_reason) or 'no reason recorded'}"
    covered: dict[str, set[str]] = {}
    for seg in visible:
        for table, ids in seg.extra_info.items():
            covered.setdefault(table, set()).update(ids)
    live = {t: base_of(t, covered.get(t, set())) for t in {*rec.base_tables, *covered}}
    pending = {t: segs for t in rec.base_tables
               if (segs := [s for s in live[t] if s.id not in covered.get(t, set())])}
    if pending:
        return "datamap is not in sync: " + "; ".join(
            f"segment{'s' if len(segs) > 1 else ''} {', '.join(s.id for s in segs)} of {t}"
            for t, segs in pending.items()) + " not refreshed yet"
    if any(ids - {s.id for s in live[t]} for t, ids in covered.items()):
        return ("datamap is not in sync: it holds rows of base segments that were "
                "overwritten or deleted; a rebuild is due")
    return None
