"""The I/O half of a compensated answer served in-process (proxy/serving/compensation.py
translates it): which base table files it reads, whether the proxy can read them, and the
byte budget `[serving] max_base_bytes`.

The files are exactly those the freshness guard's filter names in the rewritten SQL; the
table's format, columns and partition columns are the guard's layout of it (loaded from the
metastore at every sync, load and build: pipeline.table_layout). Each file is stat()ed: its
size counts against the budget and (size, mtime) goes into the result cache's key, as a
datamap segment's files do.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence

from proxy.serving.compensation import BaseOf, BaseTable, format_problem
from proxy.serving.sqltypes import NotServable

# "db.t" -> the guard's Layout of it (hive, local, format, columns, partitions), or None
Layouts = Callable[[str], object]


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


def new_files_reader(layouts: Layouts, limit: int, signature: list) -> BaseOf:
    """A BaseOf for one translation; appends (table, file, size, mtime_ns) to `signature`."""
    read: dict[str, int] = {}

    def base_of(table: str, uris: Sequence[str]) -> tuple[BaseTable, list[str]]:
        base = base_table(table, layouts(table))
        if base.problem:
            return base, []
        paths = []
        for uri in uris:
            path = uri[len("file:"):] if uri.startswith("file:/") else None
            if path is None or path.startswith("//"):
                raise NotServable(f"new file {uri} of {table} is not a local path")
            try:
                st = os.stat(path)
            except OSError as e:
                raise NotServable(f"new file {path} of {table} is not readable here "
                                  f"({e.strerror})") from None
            read[table] = read.get(table, 0) + st.st_size
            signature.append((table, path, st.st_size, st.st_mtime_ns))
            paths.append(path)
        if read.get(table, 0) > limit:
            raise NotServable(f"new files of {table} are {read[table]} bytes, over "
                              f"[serving] max_base_bytes ({limit})")
        return base, paths
    return base_of
