"""Index pruning over data: an exact membership set and an IndexStore holding file
statistics of db1.events only."""
from __future__ import annotations

from dataclasses import dataclass

from rewriter.prune.filestats import FileStats


class ExactSet:
    """A membership test over the exact value set (a bloom filter without false positives)."""

    def __init__(self, values):
        self.values = frozenset(values)

    def might_contain(self, value) -> bool:
        return value in self.values


@dataclass(frozen=True)
class Info:
    db: str
    name: str
    table: str
    kind: str
    columns: tuple[str, ...]
    enabled: bool = True


class FakeStore:
    """The IndexStore protocol over data, for tests: file statistics and identities of db1.events only."""

    def __init__(self, files: dict[str, FileStats], identity, indexes):
        self.files, self.identity, self.indexes = files, identity, indexes

    def indexes_on(self, table):
        return [i for i in self.indexes if i.table == table]

    def file_stats(self, table):
        return self.files if table == "db1.events" else {}

    def file_identity(self, table):
        return self.identity if table == "db1.events" else {}
