"""What a datamap audit's answers depend on (auditor.py), read before and
after its runs: the datamaps' visible segments, the base tables' live segments in the
catalog, and the files the base tables hold. Two readings that differ, or a `problem`
(a datamap not in sync, files the catalog has not seen), make the audit INCONCLUSIVE."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from pipeline import list_files


@dataclass(frozen=True)
class State:
    segments: tuple                  # (datamap, visible segment ids) ...
    live: tuple                      # (base table, live base segment ids) ...
    files: tuple                     # (base table, files it holds) ...
    problem: str | None = field(default=None, compare=False)


def read_state(catalog, names: Sequence[str], session) -> State:
    segments, tables = [], []
    for name in sorted(names):
        db, _, dm = name.partition(".")
        rec = catalog.get_datamap(db, dm)
        if rec is None:
            return State((), (), (), f"datamap {name} was dropped")
        why = catalog.unavailable_reason(db, dm)
        if why is not None:
            return State((), (), (), f"datamap {name}: {why}")
        segments.append((name, tuple(s.id for s in catalog.visible_segments(db, dm))))
        tables += rec.base_tables
    tables = sorted(set(tables))
    live = tuple((t, tuple(s.id for s in catalog.base_segments(t))) for t in tables)
    files = tuple((t, frozenset(list_files(session, t))) for t in tables)
    unseen = [t for t, fs in files if fs != catalog.base_files(t)]
    problem = None
    if unseen:
        problem = (f"base table {', '.join(unseen)} holds files the catalog has not seen "
                   "(written outside the proxy, not synced yet: SYNC DATAMAPS)")
    return State(tuple(segments), live, files, problem)


def changed(before: State, after: State) -> str:
    if before.segments != after.segments:
        return "the datamap's segments changed during the audit (a refresh or compaction)"
    written = [t for (t, a), (_, b) in zip(before.files + before.live, after.files + after.live)
               if a != b]
    return (f"base table {', '.join(sorted(set(written))) or '?'} was written during the "
            "audit")
