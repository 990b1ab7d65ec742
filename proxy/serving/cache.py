"""The result cache of served datamap answers, bounded in bytes (LRU).

Keyed on the DuckDB SQL of the served query, which names every file it reads (so the exact
set of visible segments of every datamap read), plus the size and modification time of
those files. A segment published, hidden or compacted, a REBUILD or a DROP changes the
rewritten query's segment list or its files, so the key changes with it: an entry is never
invalidated, it is just never asked for again and ages out. Sessions whose result-relevant
settings differ from the server's (time zone, ANSI, ...) are never answered from datamaps
(proxy/routing/statements.py), so the settings need no place in the key. Only served datamap
answers are cached, never base-table queries. An answer is kept as the engine gave it:
column by column, as the client gets it (proxy/serving/columnar.py), so a hit is sent as
slices of its columns, converted no more.
"""
from __future__ import annotations

from typing import Any, Sequence

from proxy.routing.router import LocalResult
from proxy.thrift.columns import ColumnarRows
from rewriter.bytecache import ByteLRU

CacheKey = tuple[str, tuple]


def result_size(columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]) -> int:
    """About what a result holds in memory: 16 bytes per value plus its text; a served
    answer held column by column counts its lists (proxy/thrift/columns.py)."""
    size = 64 + sum(len(n) + len(t) for n, t in columns)
    if isinstance(rows, ColumnarRows):
        return size + rows.bytes
    for row in rows:
        size += 56 + 8 * len(row)
        for v in row:
            size += 16 + (len(v) if isinstance(v, (str, bytes)) else 16)
    return size


def _entry_size(key: CacheKey, value: tuple[LocalResult, int]) -> int:
    return len(key[0]) + 32 * len(key[1]) + value[1]


class ResultCache:
    def __init__(self, max_bytes: int, max_result_bytes: int):
        self.max_result_bytes = max_result_bytes
        self._lru: ByteLRU[CacheKey, tuple[LocalResult, int]] = ByteLRU(
            max_bytes, _entry_size, max_entry=max_result_bytes)
        self.hits = 0
        self.misses = 0

    def get(self, key: CacheKey) -> LocalResult | None:
        got = self._lru.get(key)
        if got is None:
            self.misses += 1
            return None
        self.hits += 1
        return got[0]

    def __contains__(self, key: CacheKey) -> bool:
        return key in self._lru

    def put(self, key: CacheKey, result: LocalResult) -> str | None:
        """Keep `result`; returns why not when it is not kept (too large)."""
        size = result_size(result.columns, result.rows)
        if size > self.max_result_bytes:
            return f"result of about {size} bytes is over cache_max_result_bytes"
        if not self._lru.put(key, (result, size)):
            return "result does not fit the cache"
        return None

    def clear(self) -> None:
        self._lru.clear()

    def __len__(self) -> int:
        return len(self._lru)
