"""The time a datamap answer saved: an estimate, never a measurement (no one runs the
same statement on both paths at once). Pure arithmetic; the query log (log.py) keeps
the samples and asks the catalog for the rows.

A sample is one run of a query shape on the base tables: a statement the base tables
answered, or the online audit's re-run of a datamap answer there (docs/audit.md), with
the rows of the base tables it reads at that moment (the catalog's count of their live
segments, from the Parquet footers: `Catalog.base_rows`). A datamap answer of the shape
saved, by estimate, the median of its samples scaled to the base tables' rows now
(seconds x rows now / rows then: the base tables grew or shrank since), minus its own
duration, at least 0. A sample or an answer whose rows are unknown (CSV files, a table
the catalog does not track) is taken as it is. No sample: None, shown as "not measured
yet", never 0.
"""
from __future__ import annotations

import statistics
from typing import Iterable

Sample = tuple[float, "int | None"]         # (base-table seconds, base rows then)


def scaled(seconds: float, rows_then: int | None, rows_now: int | None) -> float:
    """A base-table run's seconds at today's base-table size (proportional to rows)."""
    if not rows_then or rows_now is None:
        return seconds
    return seconds * rows_now / rows_then


def estimate(samples: Iterable[Sample], rows_now: int | None, answer_s: float) -> float | None:
    """Seconds a datamap answer taking `answer_s` saved; None without samples."""
    base = [scaled(s, then, rows_now) for s, then in samples]
    if not base:
        return None
    return max(0.0, statistics.median(base) - answer_s)
