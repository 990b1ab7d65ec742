"""The words the datamap DDL parser (proxy/datamaps/ddl/parser.py) and the legacy providers
(proxy/datamaps/ddl/legacy.py) share: `DdlError`, `GRANULARITIES`, `Name`. A leaf, so that
legacy.py does not import the parser that calls it."""
from __future__ import annotations

from dataclasses import dataclass

from proxy.sqlscan import StatementError

GRANULARITIES = ("year", "month", "week", "day", "hour", "thirty_minute", "fifteen_minute",
                 "ten_minute", "five_minute", "minute", "second")
DdlError = StatementError       # the name callers and tests know


@dataclass(frozen=True)
class Name:
    """A possibly db-qualified name, lower-cased (Spark's catalog is case-insensitive)."""
    name: str
    db: str | None = None

    def qualified(self, current_db: str) -> str:
        return f"{self.db or current_db}.{self.name}"

    def __str__(self) -> str:
        return f"{self.db}.{self.name}" if self.db else self.name
