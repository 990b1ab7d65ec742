"""The words the datamap DDL parser (proxy/datamaps/ddl/parser.py) and the legacy providers
(proxy/datamaps/ddl/legacy.py) share: `DdlError`, `GRANULARITIES`, `Name`; and `EMPTY`, the
answer of every DDL statement, index datamaps' included. A leaf: legacy.py imports it rather
than the parser that calls it, and the index datamaps' runners (proxy/datamaps/indexes/
commands.py) rather than the datamap runners."""
from __future__ import annotations

from dataclasses import dataclass

from proxy.routing.router import LocalResult
from proxy.routing.sqlscan import StatementError

GRANULARITIES = ("year", "month", "week", "day", "hour", "thirty_minute", "fifteen_minute",
                 "ten_minute", "five_minute", "minute", "second")
DdlError = StatementError       # the name callers and tests know

# What Spark's Thrift Server answers a DDL statement with (CREATE/DROP TABLE, USE, INSERT):
# a result set of one `Result` STRING column and no rows. With no column at all beeline
# draws an empty box and some JDBC tools report "no result set"; looking like Spark's
# DDL keeps clients on their usual path.
RESULT_COLUMNS = (("Result", "string"),)
EMPTY = LocalResult(columns=RESULT_COLUMNS, rows=())


@dataclass(frozen=True)
class Name:
    """A possibly db-qualified name, lower-cased (Spark's catalog is case-insensitive)."""
    name: str
    db: str | None = None

    def qualified(self, current_db: str) -> str:
        return f"{self.db or current_db}.{self.name}"

    def __str__(self) -> str:
        return f"{self.db}.{self.name}" if self.db else self.name
