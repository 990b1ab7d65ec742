"""The I/O half of a compensated answer served in-process (proxy/serving/compensation.py
translates it): which base table files it reads, whether the proxy can read them, and the
byte budget `[serving] max_base_bytes`; and of a base table read whole (a dimension joined
to a datamap, the narrow-window union's base rows: proxy/serving/basetables.py).

The files are exactly those the freshness guard's filter names in the rewritten SQL; the
table's format, columns and partition columns are the guard's layout of it (loaded from the
metastore at every sync, load and build: pipeline.table_layout). Each file is stat()ed: its
size counts against the budget and (size, mtime) goes into the result cache's key, as a
datamap segment's files do. A table read whole is read as the guard lists it at decision
time (FreshnessGuard.table_files: never while a write into it is going on).
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

from proxy.serving.compensation import BaseTable, format_problem
from proxy.serving.sqltypes import NotServable

# "db.t" -> the guard's Layout of it (hive, local, format, columns, partitions), or None
Layouts = Callable[[str], object]
# "db.t" -> (its Layout, its data files now) as the guard lists them, or why not
Tables = Callable[[str], "tuple[object, frozenset[str]] | str"]


def base_table(name: str, layout) -> BaseTable:
    """The guard's layout of `name` as the translation needs it (with why its files are not
    read here, if so)."""
    if layout is None:
        return BaseTable(name, "", (), problem="its layout is not known here yet")
    problem = format_problem(layout.format, layout.hive, layout.options)
    if layout.external:
        problem = "an external-format table (its view reads CSV through Spark)"
    elif not layout.local:
        problem = "its files are not on the local file system"
    elif not layout.columns:
        problem = problem or "its columns are not known here"
    return BaseTable(name, layout.format, tuple(layout.columns), tuple(layout.partitions),
                     problem, tuple(layout.options))


class BaseReads:
    """The base table files one translation reads, under one `[serving] max_base_bytes`:
    a compensation's new files (`new_files`, a BaseOf) and tables read whole (`table`, a
    TableOf). Each file read appends (table, file, size, mtime_ns) to `signature` (the
    result cache's key); `listed` keeps each table read whole with the file set it was read
    from, so that a plan kept for later is used only while the table still has those files."""

    def __init__(self, layouts: Layouts, tables: Tables, limit: int, signature: list,
                 current_db: str | None = None):
        self._layouts, self._tables, self._limit = layouts, tables, limit
        self._current_db = current_db      # the session's: a bare table name is in it
        self.signature = signature
        self.listed: list[tuple[str, frozenset[str] | None]] = []
        self._read = 0

    def new_files(self, table: str, uris: Sequence[str]) -> tuple[BaseTable, list[str]]:
        base = base_table(table, self._layouts(table))
        if base.problem:
            return base, []
        paths = []
        for uri in uris:
            path = uri[len("file:"):] if uri.startswith("file:/") else None
            if path is None or path.startswith("//"):
                raise NotServable(f"new file {uri} of {table} is not a local path")
            paths.append(path)
        self._count(table, paths, "new files of")
        return base, paths

    def table(self, table: str) -> tuple[BaseTable, list[str]]:
        """Every data file of `table` now, as the freshness guard lists it."""
        if "." not in table:
            if not self._current_db:
                raise NotServable(f"table {table} named without its database")
            table = f"{self._current_db}.{table}".lower()
        got = self._tables(table)
        if isinstance(got, str):
            self.listed.append((table, None))       # not read now: try again next time
            return BaseTable(table, "", (), problem=got), []
        layout, files = got
        self.listed.append((table, files))
        base = base_table(table, layout)
        if base.problem:
            return base, []
        paths = sorted(files)
        self._count(table, paths, "the files of")
        return base, paths

    def _count(self, table: str, paths: Sequence[str], what: str) -> None:
        before = self._read
        for path in paths:
            try:
                st = os.stat(path)
            except OSError as e:
                raise NotServable(f"file {path} of {table} is not readable here "
                                  f"({e.strerror})") from None
            self._read += st.st_size
            self.signature.append((table, path, st.st_size, st.st_mtime_ns))
        if self._read > self._limit:
            also = " with the base files read before them" if before else ""
            raise NotServable(f"{what} {table}{also} are {self._read} bytes, over "
                              f"[serving] max_base_bytes ({self._limit})")
