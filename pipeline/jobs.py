"""Datamap maintenance jobs: full build, incremental append, compaction, drop, cleanup.

Every job takes a SparkSession, a compiled DatamapDefinition and plain data (segment ids,
file lists), writes at most one new partition of the datamap table and returns what it
wrote. It never touches the catalog: the caller reserves the segment id first, publishes
the result afterwards (one commit), and only then drops superseded partitions.

Incremental maintenance relies on the datamap being linear in each changed base table:
for R = f(T1, ..., Tn) with Ti = Oi + Ni (old and new files),
    f(O1+N1, ..., On+Nn) - f(O1, ..., On) = sum over changed k of f(O1..Ok-1, Nk, Tk+1..Tn)
(new rows of A joined with all of B, plus old A joined with new B: new-with-new is counted
once). A table read twice (a self-join) is one variable per reference, so the same sum
holds over its references. A join is linear in a table when that table's rows are never NULL-extended or
anti-matched: every table of an inner-join chain, and the left (preserved) side of left
joins. Anything else returns `full_rebuild=True` and writes nothing. Aggregates are stored
as partial aggregates that re-aggregate (sum, count -> sum, min, max), so a refresh's rows
can simply be appended as a new segment.
"""
from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable, Literal, Mapping, Sequence

from pipeline.files import (
    LOOK_UP, hive_scan, normalize_path, quote_table, read_files, small_input_bytes, table_meta,
    read_other_files, total_bytes, unreadable_by_file,
)
from pipeline.errors import PipelineError
from pipeline.segments import drop_segments, drop_stray_dirs, list_segments, read_segments
from pipeline.table import SegmentWrite, drop_table, write_segment
from rewriter.api import DatamapDefinition
from rewriter.build import source_keys
from rewriter.compensation import linear_in as _linear_in

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Side = Literal["old", "new", "all"]


@dataclass(frozen=True)
class DeltaPlan:
    """How to compute the rows a refresh appends. Each term maps every base table to the
    part of it that term reads; the delta is the union of the terms."""
    terms: tuple[Mapping[str, Side], ...] = ()
    full_rebuild: bool = False
    reason: str = ""


@dataclass(frozen=True)
class RefreshResult:
    write: SegmentWrite | None = None       # None: nothing new, or a full rebuild is needed
    full_rebuild: bool = False
    reason: str = ""
    terms: int = 0


def plan_delta(definition: DatamapDefinition, changed: Iterable[str]) -> DeltaPlan:
    """Decide how to refresh after the tables in `changed` got new files (pure logic).
    Terms are keyed by source key (rewriter/build.py `source_keys`): a table read more
    than once is a variable per reference, so an append to a self-joined table is the
    terms new⋈all and old⋈new (new⋈old + new⋈new + old⋈new), each pair counted once."""
    tables = list(definition.base_tables)
    changed_set = {t for t in changed if t in tables}
    if not changed_set:
        return DeltaPlan()
    if definition.refresh == "full":    # no increment exists (rewriter/rebuilt.py)
        return DeltaPlan(full_rebuild=True, reason=f"refreshed in full: {definition.refresh_reason}")
    for k, t in enumerate(tables):
        if t in changed_set and not _linear_in(definition, k):
            return DeltaPlan(full_rebuild=True,
                             reason=f"{t} changed on the NULL-extended side of an outer join")
    keys = source_keys(tables)
    order = [k for k, t in enumerate(tables) if t in changed_set]
    terms = []
    for i, target in enumerate(order):
        term: dict[str, Side] = {}
        for k, key in enumerate(keys):
            if k == target:
                term[key] = "new"
            elif k in order[:i]:
                term[key] = "old"
            else:
                term[key] = "all"
        terms.append(term)
    return DeltaPlan(tuple(terms))


def reaggregate(definition: DatamapDefinition, df: "DataFrame") -> "DataFrame":
    """Merge partial-aggregate rows of the same group (sum, count -> sum, min, max; HLL
    sketches -> hll_union_agg, which merges them as if built over the union of the rows)."""
    from pyspark.sql import functions as F
    if not definition.is_aggregate:
        return df
    keys = [c.name for c in definition.columns if c.role != "agg"]
    aggs = []
    for c in definition.columns:
        if c.role != "agg":
            continue
        fn = {"sum": F.sum, "count": F.sum, "count_star": F.sum, "min": F.min,
              "max": F.max, "hll": F.hll_union_agg}.get(c.agg or "")
        if fn is None:
            raise PipelineError(f"Column {c.name} of datamap {definition.database}."
                                f"{definition.name} has aggregate {c.agg!r}, which cannot be "
                                "re-aggregated", "0A000")
        aggs.append(fn(F.col(f"`{c.name}`")).alias(c.name))
    grouped = df.groupBy(*[F.col(f"`{k}`") for k in keys]).agg(*aggs)
    return grouped.select(*[f"`{c.name}`" for c in definition.columns])


def full_build(spark: "SparkSession", definition: DatamapDefinition, segment_id: str,
               properties: Mapping[str, str] | None = None,
               sql: str | None = None) -> SegmentWrite:
    """Compute the whole datamap from its base tables into segment `segment_id`. `sql`:
    a SELECT to read instead of the build SELECT that gives exactly its rows (the build
    SELECT rewritten onto a finer datamap: proxy/datamaps/upkeep/finer.py)."""
    started = time.monotonic()
    df = spark.sql(sql or definition.build_sql({}))
    return write_segment(spark, definition, df, segment_id, properties, started)


def incremental_append(spark: "SparkSession", definition: DatamapDefinition, segment_id: str,
                       new_files: Mapping[str, Sequence[str]],
                       old_files: Mapping[str, Sequence[str]] | None = None,
                       properties: Mapping[str, str] | None = None,
                       read_as: Mapping[str, str] | None = None) -> RefreshResult:
    """Append the rows that `new_files` (per base table) add to the datamap.

    `old_files[t]` are the files the datamap already covers; when a table has no entry,
    "old" means every current file of t that is not in `new_files[t]`. Pass the catalog's
    snapshot for every base table: then files another load adds while this job runs are
    left for the next refresh instead of being joined twice. Returns
    `full_rebuild=True` (and writes nothing) when the delta rule does not apply.
    `read_as[t]`: the table whose files t's files are, read instead of t (t a view of it,
    as a datamap's `<name>_table` is of its storage table)."""
    started = time.monotonic()
    new = {t: tuple(normalize_path(f) for f in fs) for t, fs in new_files.items() if fs}
    plan = plan_delta(definition, new)
    if plan.full_rebuild:
        return RefreshResult(full_rebuild=True, reason=plan.reason)
    if not plan.terms:
        return RefreshResult(reason="no new files")
    # the table whose files each table's are, read in its place
    src = {t: (read_as or {}).get(t, t) for t in set(new) | set(old_files or {})}
    # How each table is scanned decides how its files are told apart: look once per job.
    metas = {t: table_meta(spark, src[t]) for t in sorted(src)}
    hive = {t: hive_scan(spark, src[t], meta) for t, meta in metas.items()}
    for table in sorted(hive):
        why = unreadable_by_file(spark, src[table], hive[table])
        if why:
            return RefreshResult(full_rebuild=True, reason=why)
    views: dict[tuple[str, Side], str] = {}
    table_of = dict(zip(source_keys(definition.base_tables), definition.base_tables))
    try:
        parts = []
        for term in plan.terms:
            sources = {}
            for key, side in term.items():
                table = table_of[key]
                if table not in new and side == "all" and table not in (old_files or {}):
                    continue  # unchanged table, no snapshot given: read it as it is
                if (table, side) not in views:
                    views[(table, side)] = _register(
                        spark, src.get(table, table), side, new.get(table, ()),
                        (old_files or {}).get(table), len(views), hive.get(table),
                        metas.get(table, LOOK_UP))
                sources[key] = views[(table, side)]
            parts.append(spark.sql(definition.build_sql(sources)))
        df = parts[0]
        for p in parts[1:]:
            df = df.unionByName(p)
        if len(parts) > 1:
            df = reaggregate(definition, df)
        write = write_segment(spark, definition, df, segment_id, properties, started)
    finally:
        for view in views.values():
            spark.catalog.dropTempView(view)
    return RefreshResult(write=write, terms=len(plan.terms))


def _register(spark: "SparkSession", table: str, side: Side, new: Sequence[str],
              old: Sequence[str] | None, seq: int, hive: bool | None = None,
              meta=LOOK_UP) -> str:
    if side == "new":
        df = read_files(spark, table, new, hive, meta)
        size = total_bytes(spark, new)
        if size is not None and size <= small_input_bytes(spark):
            # A delta one task reads anyway: one partition, so the aggregate above it needs
            # no shuffle and the segment is one file (the refresh's cost follows the delta).
            df = df.coalesce(1)
    elif old is not None:
        df = read_files(spark, table, list(old) + (list(new) if side == "all" else []), hive,
                        meta)
    elif side == "all":
        df = spark.table(table)
    else:
        df = read_other_files(spark, table, new, hive)
    name = f"dm_{side}_{seq}_{table.replace('.', '_')}_{uuid.uuid4().hex[:12]}"
    df.createOrReplaceTempView(name)
    return name


def compact(spark: "SparkSession", definition: DatamapDefinition,
            segment_ids: Sequence[str], new_segment_id: str,
            properties: Mapping[str, str] | None = None) -> SegmentWrite:
    """Merge segments into one new segment: groups re-aggregated (sum, count -> sum, min,
    max); projection-only datamaps concatenated."""
    if not segment_ids:
        raise PipelineError(f"Nothing to compact for datamap {definition.database}."
                            f"{definition.name}: no segments given", "42000")
    started = time.monotonic()
    df = reaggregate(definition, read_segments(spark, definition, segment_ids))
    return write_segment(spark, definition, df, new_segment_id, properties, started)


def drop(spark: "SparkSession", definition: DatamapDefinition) -> None:
    """Drop the datamap table and its files."""
    drop_table(spark, definition)


def cleanup_orphans(spark: "SparkSession", definition: DatamapDefinition,
                    keep: Iterable[str]) -> list[str]:
    """Drop partitions whose segment ids are not in `keep` (the catalog's visible segments):
    leftovers of crashed or superseded jobs. Returns the dropped ids. Run at start, when no
    job of this datamap is writing."""
    keep_set = {str(k) for k in keep}
    orphans = [s for s in list_segments(spark, definition) if s not in keep_set]
    drop_segments(spark, definition, orphans)
    stray = drop_stray_dirs(spark, definition, sorted(keep_set))
    return sorted(set(orphans) | set(stray), key=lambda v: (len(v), v))


__all__ = [
    "DeltaPlan", "RefreshResult", "SegmentWrite", "PipelineError", "plan_delta", "reaggregate",
    "full_build", "incremental_append", "compact", "drop", "cleanup_orphans", "drop_segments",
    "list_segments", "quote_table",
]
