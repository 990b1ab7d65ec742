"""Rewriting of large statements in a process of its own.

sqlglot is compiled (sqlglotc): parsing a statement of a few hundred kilobytes runs for
tenths of a second inside compiled code that never lets another Python thread in, so a
worker *thread* parsing a 2 MB statement stalled every other session's `SELECT 1` for up
to 1.6 s. Above `min_bytes` the rewrite therefore runs in one spawned worker process: it
receives the index's inputs (the candidates over the tables the statement names, and the
schemas) with the statement, keeps the DatamapIndex it built for them, and returns the
RewriteResult. The caller
waits on a future, which releases the interpreter to the event loop.

Any failure of the process (crash, timeout) forwards the original statement; a broken pool
is replaced at the next use.
"""
from __future__ import annotations

import logging
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

from rewriter import DatamapIndex

log = logging.getLogger("proxy.datamaps")

MIN_BYTES = 64 * 1024        # below this a parse takes < ~50 ms: the thread is fine
TIMEOUT_S = 120.0

_child_index: tuple[object, object] | None = None   # (key, DatamapIndex) in the child


def _rewrite_in_child(key, candidates, schemas, version, sql: str, current_db: str,
                      approximate: bool = False):
    """Runs in the worker process: one index per catalog version, kept between calls."""
    global _child_index
    if _child_index is None or _child_index[0] != key:
        _child_index = (key, DatamapIndex(candidates, schemas, version))
    result = _child_index[1].rewrite(sql, current_db, approximate)
    result.tree = None       # not worth pickling: the serving tier parses the SQL if it must
    return result


class IsolatedRewriter:
    """One spawned process that rewrites statements of at least `min_bytes`."""

    def __init__(self, min_bytes: int = MIN_BYTES, timeout: float = TIMEOUT_S):
        self.min_bytes = min_bytes
        self.timeout = timeout
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()
        self._closed = False

    def wanted(self, index, sql: str) -> bool:
        """Large, and the index would parse it (the text pre-check did not settle it)."""
        return len(sql) >= self.min_bytes and not self._closed and index.would_parse(sql)

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    max_workers=1, mp_context=multiprocessing.get_context("spawn"))
            return self._pool

    def rewrite(self, index, sql: str, current_db: str, approximate: bool = False):
        """index.rewrite(sql, current_db, approximate), computed in the worker process; None
        when the process failed or took longer than `timeout` (the caller forwards the
        original)."""
        # only the datamaps over tables the text names: the child compiles what it is sent
        # (once per process), so sending every datamap of a large catalog would make the
        # first large statement wait for all of them
        cands = index.candidates_named(sql)
        key = (index.token, tuple(c.definition.qualified for c in cands))
        try:
            future = self._executor().submit(_rewrite_in_child, key, cands, index.schemas,
                                             index.version, sql, current_db, approximate)
            return future.result(self.timeout)
        except FutureTimeout:
            log.warning("rewriting a statement of %d characters took over %.0fs; forwarding "
                        "it unchanged", len(sql), self.timeout)
            self._restart()
        except Exception as e:  # noqa: BLE001 - BrokenProcessPool & co: forward the original
            log.warning("the rewrite process failed (%s); forwarding the statement unchanged",
                        type(e).__name__)
            self._restart()
        return None

    def _restart(self) -> None:
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            procs = list((getattr(pool, "_processes", None) or {}).values())
            pool.shutdown(wait=False, cancel_futures=True)
            for proc in procs:
                proc.kill()      # a child stuck in a parse does not stop on its own

    def close(self) -> None:
        self._closed = True
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
