"""What the console's pages show, gathered from the datamap catalog, the query log and
the console's own action ring into plain values (pages.py renders them). Every function
here blocks (SQLite, file sizes): the console calls them in a worker thread.

`querylog` is part of the proxy's query log reader API (proxy/observability/querylog/log.py: recent,
datamap_usage, datamap_totals, datamap_measured); None when [querylog] enabled = false.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

from proxy.datamaps.catalog.records import DatamapRecord, DatamapSegment, Event
from proxy.datamaps.freshness.listing import local_bytes
from proxy.serving.tier import RETRY_S, EngineState
from rewriter.api import STORAGE_SUFFIX

USAGE_WINDOW_S = 24 * 3600.0
USAGE_BUCKET_S = 3600.0


@dataclass(frozen=True)
class Summary:
    db: str
    name: str
    status: str
    status_reason: str
    rewrite: bool
    segments: int
    rows: int | None
    size: int | None              # bytes of the visible segments' local files; None: not local
    as_of: float | None           # when the newest visible segment began reading base data
    pending: int                  # live base segments no visible segment covers
    reason: str | None            # why it may not answer now (catalog's), None when it may
    hits: int | None              # None: no query log
    saved_s: float | None         # an estimate; None: not measured yet (or no query log)
    measured: int | None = None   # of the hits, those whose saving could be estimated

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"


@dataclass(frozen=True)
class Detail:
    summary: Summary
    record: DatamapRecord
    segments: list[DatamapSegment]
    events: list[Event]
    usage: list[tuple[float, int, float]] | None    # (bucket start, hits, saved s); None: no log
    answered: list[Any] | None                      # LoggedQuery, newest first; None: no log
    sizes: dict[str, int | None]                    # segment id -> bytes (live segments)


@dataclass(frozen=True)
class Serving:
    """The in-process serving tier's line on the datamap list (docs/serving.md)."""
    state: str                    # up | down | starting | off | stopped
    engine: str = ""              # "DuckDB 2.0.1"
    cause: str = ""               # down: why, and what to do about it
    fix: str = ""
    since: float | None = None
    retry_s: float = 0.0
    mirror: Mirror | None = None  # the segment mirror, when the tier has one


@dataclass(frozen=True)
class Mirror:
    """The segment mirror's state (docs/serving.md, "Mirrored segments"): per datamap, the
    segments held and those missing with why."""
    mode: str
    bytes: int
    max_bytes: int
    datamaps: list[tuple[str, int, int, list[tuple[str, str]]]]   # (name, held, bytes, missing)


def serving(tier) -> Serving:
    """The serving tier's state, from its ServingTier (None: not built); no I/O."""
    if tier is None or not tier.settings.enabled:
        return Serving("off")
    status = tier.engine_status()
    state = {EngineState.UP: "up", EngineState.DOWN: "down",
             EngineState.NOT_STARTED: "starting", EngineState.CLOSED: "stopped"}[status.state]
    return Serving(state, status.engine, status.cause, status.fix, status.since, RETRY_S,
                   mirror(getattr(tier, "mirror", None)))


def mirror(m) -> Mirror | None:
    if m is None:
        return None
    st = m.status()
    names = sorted(set(st.held) | set(st.missing))
    return Mirror(st.mode, st.bytes, st.max_bytes, [
        (t.removesuffix(STORAGE_SUFFIX).removesuffix("_table"), *st.held.get(t, (0, 0)),
         st.missing.get(t, [])) for t in names])


def _totals(querylog) -> dict[str, tuple[int, float | None, int]] | None:
    if querylog is None:
        return None
    measured = querylog.datamap_measured()
    return {name: (hits, saved, measured.get(name, 0))
            for name, (hits, saved) in querylog.datamap_totals().items()}


def summaries(catalog, querylog) -> list[Summary]:
    totals = _totals(querylog)
    off = catalog.rewrite_off()
    return [_summary(catalog, rec, off, totals) for rec in catalog.list_datamaps()]


def _summary(catalog, rec: DatamapRecord, off, totals) -> Summary:
    visible = catalog.visible_segments(rec.db, rec.name)
    rows = [s.rows for s in visible]
    hits, saved, measured = (totals.get(rec.qualified, (0, None, 0)) if totals is not None
                             else (None, None, None))
    return Summary(
        rec.db, rec.name, str(rec.status), rec.status_reason, rec.qualified not in off,
        len(visible), sum(r for r in rows if r is not None) if rows else None,
        local_bytes(f for s in visible for f in s.files),
        max((s.load_start for s in visible), default=None),
        sum(len(v) for v in catalog.pending_base_segments(rec.db, rec.name).values()),
        catalog.unavailable_reason(rec.db, rec.name), hits, saved, measured)


def detail(catalog, querylog, qualified: str, now: float | None = None) -> Detail | None:
    db, _, name = qualified.partition(".")
    rec = catalog.get_datamap(db, name)
    if rec is None:
        return None
    now = time.time() if now is None else now
    totals = _totals(querylog)
    summary = _summary(catalog, rec, catalog.rewrite_off(), totals)
    usage = answered = None
    if querylog is not None:
        usage = usage_buckets(querylog, rec.qualified, now)
        answered = querylog.recent(20, datamap=rec.qualified)
    segments = catalog.segments(db, name)
    sizes = {g.id: local_bytes(g.files) for g in segments if g.visible}
    return Detail(summary, rec, segments, catalog.events(db, name)[::-1], usage, answered,
                  sizes)


def usage_buckets(querylog, datamap: str, now: float,
                  window_s: float = USAGE_WINDOW_S,
                  bucket_s: float = USAGE_BUCKET_S) -> list[tuple[float, int, float | None]]:
    """Hits and estimated time saved per bucket over the window, every bucket present
    (zeros too); saved is None for a bucket with hits none of which could be measured
    yet (not measured yet, not 0)."""
    n = int(window_s // bucket_s)
    since = (math.floor(now / bucket_s) - n + 1) * bucket_s
    out = [[since + i * bucket_s, 0, 0.0] for i in range(n)]
    for start, dm, hits, saved in querylog.datamap_usage(since, bucket_s):
        i = int((start - since) // bucket_s)
        if dm == datamap and 0 <= i < n:
            out[i][1] += hits
            out[i][2] = saved
    return [(a, h, s) for a, h, s in out]
