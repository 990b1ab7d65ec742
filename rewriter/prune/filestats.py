"""What an index datamap knows about one data file, as the pure pruning code reads it.

The proxy loads these from the catalog (per-file minmax and bloom filter entries built by a
pipeline job); files.py decides from them which files a query's filters cannot
match. Values are Python values of the column's Spark type: int for integral types, float,
decimal.Decimal, str, bool, datetime.date, datetime.datetime (naive, in the session time
zone the index was built in).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol


class Membership(Protocol):
    """A bloom filter: False means the value is certainly absent from the file."""

    def might_contain(self, value: Any) -> bool: ...


@dataclass(frozen=True)
class ColumnStats:
    """One column of one file. None means unknown (never prunes): `low`/`high` are the
    smallest and largest non-NULL values, `nulls` the count of NULLs, `bloom` a
    membership test over the non-NULL values."""
    low: Any = None
    high: Any = None
    nulls: int | None = None
    bloom: Membership | None = None


@dataclass(frozen=True)
class FileStats:
    """One data file (its path normalised as pipeline.files.normalize_path spells it),
    its row count when known, and the columns an index covers (lower-cased names)."""
    path: str
    rows: int | None = None
    columns: Mapping[str, ColumnStats] = field(default_factory=dict)
