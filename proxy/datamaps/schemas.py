"""The base tables' schemas the rewriter and the DDL need, cached and loaded off the loop.

Read from Spark (or a `provider`, in tests) and kept in a byte-bounded LRU until a load,
ALTER TABLE or sync says a table changed. Tables that queries read next to datamap tables
(dimension tables of query-delta joins) are loaded by a background worker; the rewrite
index includes them once they are in (`extra_tables`). `generation` changes whenever the
index must be rebuilt to see a change here.
"""
from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Callable, Iterable

from pipeline import table_schemas
from proxy.datamaps.failures import describe
from proxy.errors import ClientError
from rewriter.bytecache import ByteLRU, text_size

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger("proxy.datamaps")
SCHEMA_CACHE_BYTES = 64 << 20     # tables x columns; a 1,000-column table is ~150 KB
Schemas = dict[str, dict[str, dict[str, str]]]      # db -> table -> column -> type


class SchemaCache:
    def __init__(self, spark: Callable[[], "SparkSession"],
                 provider: Callable[[Iterable[str]], dict] | None = None,
                 budget: int = SCHEMA_CACHE_BYTES):
        self._spark = spark
        self._provider = provider
        self._cache: ByteLRU[str, dict[str, str]] = ByteLRU(budget, text_size)
        self.generation = 0
        self._extra: set[str] = set()
        self._pending: set[str] = set()
        self._failed: dict[str, float] = {}
        self._guard = threading.Lock()
        self._loader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="datamap-schemas")
        self.retry_s = 60.0
        # schemas given as data (tests, tools): reading them is no I/O, so the rewrite
        # index's statement path may (held); Spark's it never reads
        self.local = provider is not None

    def __contains__(self, table: str) -> bool:
        return table in self._cache

    def __len__(self) -> int:
        return len(self._cache)

    @property
    def bytes(self) -> int:
        return self._cache.bytes

    def schemas(self, tables: Iterable[str], refresh: bool = False) -> Schemas:
        tables = list(tables)
        missing = [t for t in tables if refresh or t not in self._cache]
        fresh: dict[str, dict[str, str]] = {}     # what the byte-bounded cache may evict
        if missing:
            try:
                got = (self._provider(missing) if self._provider
                       else table_schemas(self._spark(), missing))
            except ClientError:
                raise
            except Exception as e:  # noqa: BLE001 - Spark's AnalysisException et al.
                message, state = describe(e)
                raise ClientError(f"Cannot read the schema of {', '.join(missing)}: {message}",
                                  state) from e
            for db, ts in got.items():
                for t, cols in ts.items():
                    fresh[f"{db}.{t}"] = self._cache[f"{db}.{t}"] = dict(cols)
        out: Schemas = {}
        for t in tables:
            db, _, name = t.partition(".")
            cols = fresh[t] if t in fresh else self._cache.get(t)
            if cols is not None:
                out.setdefault(db, {})[name] = cols
        return out

    def held(self, tables: Iterable[str]) -> Schemas:
        """The schemas of `tables` had without asking Spark: those cached (and with a
        `local` provider, any it gives). A table missing from the answer is for a worker
        to load (schemas, load)."""
        tables = list(tables)
        if self.local:
            try:
                return self.schemas(tables)
            except ClientError:
                pass
        out: Schemas = {}
        for t in tables:
            cols = self._cache.get(t)
            if cols is not None:
                db, _, name = t.partition(".")
                out.setdefault(db, {})[name] = cols
        return out

    def invalidate(self, table: str | None = None) -> None:
        """Forget cached schemas (of one table, or all): call after ALTER TABLE."""
        if table is None:
            self._cache.clear()
        else:
            self._cache.pop(table, None)
        self.generation += 1

    def reread(self, table: str) -> None:
        """Blocking (a worker thread): read `table`'s schema again now, replacing the cached
        one in one step (forgotten when the read fails). Unlike invalidate(), the rewrite
        index keeps the datamaps over it when the columns are the same."""
        try:
            self.schemas([table], refresh=True)
        except Exception:  # noqa: BLE001 - e.g. dropped: the next reader reports it
            self._cache.pop(table, None)
        self.generation += 1

    def extra_tables(self) -> set[str]:
        """The tables queries asked for (request) whose schemas are loaded: never Spark."""
        with self._guard:
            return {t for t in self._extra if t in self._cache}

    def request(self, tables: Iterable[str]) -> None:
        """Non-blocking (event loop): the rewriter needs these tables' schemas. Load them in
        the background; the next index includes them. A table that failed to load (it may
        not exist) is not tried again for retry_s."""
        now = time.monotonic()
        todo: list[str] = []
        with self._guard:
            for t in tables:
                if t in self._cache:
                    self._extra.add(t)
                    self.generation += 1      # cached but not in the index yet
                elif t not in self._pending and \
                        now - self._failed.get(t, -self.retry_s) >= self.retry_s:
                    self._pending.add(t)
                    todo.append(t)
        if todo:
            self._loader.submit(self.load, todo)

    def load(self, tables: Iterable[str]) -> None:
        """Blocking (worker thread): load tables' schemas for the rewriter, one by one so that
        one missing table does not hide the others, then have the index rebuilt."""
        for t in tables:
            try:
                self.schemas([t])
            except Exception as e:  # noqa: BLE001 - e.g. the table does not exist
                log.info("no schema for %s (%s); queries reading it are forwarded unchanged",
                         t, str(e).splitlines()[0] if str(e) else type(e).__name__)
                with self._guard:
                    if len(self._failed) >= 4096:   # names clients made up: forget
                        self._failed.clear()         # them rather than grow forever
                    self._failed[t] = time.monotonic()
            else:
                with self._guard:
                    self._extra.add(t)
                    self._failed.pop(t, None)
            finally:
                with self._guard:
                    self._pending.discard(t)
        self.generation += 1

    def drain(self, timeout: float | None = None) -> None:
        """Wait until the loads requested so far are done (tests, orderly shutdown)."""
        self._loader.submit(lambda: None).result(timeout=timeout)

    def failed(self, table: str) -> bool:
        """True when loading `table` failed less than retry_s ago (it is not tried again
        before)."""
        with self._guard:
            at = self._failed.get(table)
        return at is not None and time.monotonic() - at < self.retry_s

    def failed_count(self) -> int:
        with self._guard:
            return len(self._failed)

    def close(self) -> None:
        self._loader.shutdown(wait=False, cancel_futures=True)
