"""The serving tier: decide whether a rewritten query is answered in-process, and answer it.

`ServingTier.plan(result, conf)` (on the decision path) turns the rewriter's result into a
Plan for the local engine, or says why Spark answers instead:
  * serving is off ([serving] enabled, or the session's SET datamap.serving.enabled=false);
  * the query is outside the allow-list (proxy/serving/translate.py), e.g. a query-delta
    join of a datamap with a base table;
  * a datamap's files are not readable here (remote mode with a warehouse on HDFS or an
    object store: docs/serving.md), a segment it reads is no longer visible, or the files
    read are over [serving] max_datamap_bytes.
`ServingTier.answer(plan, conf)` runs it: the result cache first, then the engine; any
engine failure or timeout returns None and the caller forwards the rewritten SQL to Spark.

The files of every visible segment come from the catalog, read again whenever the
catalog's version changes (a publish, a compaction, a drop), like the rewriter's index.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence
from urllib.parse import unquote, urlparse

from proxy.classify import CACHE_KEY, SERVING_KEY
from proxy.config import ServingSettings
from proxy.router import LocalResult
from proxy.serving.cache import CacheKey, ResultCache
from proxy.serving.engine import EngineFailure, LocalEngine
from proxy.serving.translate import NotServable, Plan, translate
from proxy.session import switched_on
from rewriter.api import STORAGE_SUFFIX, storage_table
from rewriter.bytecache import ByteLRU, text_size

log = logging.getLogger("proxy.serving")


@dataclass(frozen=True)
class _Segment:
    paths: tuple[str, ...]          # local paths, or () when a file is not local
    bytes: int
    signature: tuple                # (size, mtime_ns) per file: part of the cache key
    problem: str | None = None      # why the files cannot be read here


@dataclass(frozen=True)
class _Snapshot:
    version: int
    columns: Mapping[str, Mapping[str, str]]                 # table -> stored column types
    segments: Mapping[str, Mapping[str, _Segment]]           # table -> visible segment id -> files
    zone: str | None = None          # the time zone the datamaps were computed in


# answer()'s `how` of an answer computed here -> its line in the operation log
_LOG_LINES = {"local cache=hit": "answer computed in-process by the proxy, from its result cache",
              "local cache=miss": "answer computed in-process by the proxy",
              "local cache=bypassed": "answer computed in-process by the proxy (result cache "
                                      "bypassed)"}


def log_line(how: str) -> str:
    """The operation log's line for a served answer, from answer()'s `how`."""
    return _LOG_LINES.get(how, "answer computed in-process by the proxy")


@dataclass(frozen=True)
class Served:
    """A query the tier will answer: its plan and the cache key of its result."""
    plan: Plan
    key: CacheKey


def local_path(uri: str) -> str | None:
    """A file URI the proxy can open -> its path; None for other file systems."""
    if uri.startswith("/"):
        return uri
    parsed = urlparse(uri)
    if parsed.scheme != "file" or parsed.netloc not in ("", "localhost"):
        return None
    return unquote(parsed.path)


def _segment(files: Sequence[str]) -> _Segment:
    paths, size, sig = [], 0, []
    for uri in files:
        path = local_path(uri)
        if path is None:
            scheme = urlparse(uri).scheme or "?"
            return _Segment((), 0, (), f"its files are on {scheme}://, which the proxy "
                                       "does not read")
        try:
            st = os.stat(path)
        except OSError as e:
            return _Segment((), 0, (), f"file {path} is not readable here ({e.strerror})")
        paths.append(path)
        size += st.st_size
        sig.append((st.st_size, st.st_mtime_ns))
    return _Segment(tuple(paths), size, tuple(sig))


class ServingTier:
    def __init__(self, catalog, settings: ServingSettings = ServingSettings(),
                 engine: LocalEngine | None = None,
                 zone_problem: Callable[[], str | None] = lambda: None):
        self.catalog = catalog
        # remote mode: why the upstream's time zone may not be the one the catalog records
        # (DatamapService.time_zone_problem); timestamps are then not served
        self._zone_problem = zone_problem
        self.settings = settings
        self._engine = engine
        self._engine_lock = threading.Lock()
        self.cache = ResultCache(settings.cache_bytes, settings.cache_max_result_bytes)
        self._snapshot: _Snapshot | None = None
        self._snap_lock = threading.Lock()
        self._plans: ByteLRU[tuple, Served | str] = ByteLRU(
            16 << 20, lambda k, v: text_size(k[0]) + (text_size(v) if isinstance(v, str)
                                                       else 2 * len(v.plan.sql)))

    # ------------------------------------------------------------------ decision path
    def enabled(self, conf: Mapping[str, str]) -> str | None:
        """None when serving may be tried for this session, else why not."""
        if not self.settings.enabled:
            return "[serving] enabled = false"
        if not switched_on(conf, SERVING_KEY):
            return "the session set datamap.serving.enabled=false"
        return None

    def plan(self, result, conf: Mapping[str, str]) -> Served | str:
        """The Served plan of a rewritten query, or why Spark answers it."""
        off = self.enabled(conf)
        if off is not None:
            return off
        snap = self._current()
        zone = snap.zone if self._zone_problem() is None else None
        key = (result.sql, snap.version, zone)
        known = self._plans.get(key)
        if known is None:
            known = self._translate(result, snap, zone)
            self._plans.put(key, known)
        return known

    def _translate(self, result, snap: _Snapshot, zone: str | None) -> Served | str:
        tree = result.tree
        if tree is None:
            from rewriter.normalize import DIALECT
            import sqlglot
            try:
                tree = sqlglot.parse_one(result.sql, read=DIALECT)
            except Exception as e:  # noqa: BLE001 - Spark reads it: it answers
                return f"rewritten SQL not understood ({type(e).__name__})"
        signature: list = []
        limit = self.settings.max_datamap_bytes
        read_bytes: dict[str, int] = {}

        def files_of(table: str, ids: Sequence[str]) -> list[str]:
            visible = snap.segments.get(table, {})
            named = table.removesuffix(STORAGE_SUFFIX)   # the datamap table users know
            out = []
            for sid in ids:
                seg = visible.get(sid)
                if seg is None:
                    raise NotServable(f"segment {sid} of {named} is no longer visible")
                if seg.problem:
                    raise NotServable(f"segment {sid} of {named}: {seg.problem}")
                out += seg.paths
                signature.append((table, sid, seg.signature))
                read_bytes[table] = read_bytes.get(table, 0) + seg.bytes
            if read_bytes[table] > limit:
                raise NotServable(f"{named} reads {read_bytes[table]} bytes, over [serving] "
                                  f"max_datamap_bytes ({limit})")
            return out
        try:
            plan = translate(tree, snap.columns, files_of, zone)
        except NotServable as e:
            return f"not served locally: {e}"
        except RecursionError:
            return "not served locally: statement nested too deeply"
        except Exception as e:  # noqa: BLE001 - a translator bug must not fail the query
            log.exception("serving translation failed; Spark answers")
            return f"not served locally: internal error ({type(e).__name__})"
        return Served(plan, (plan.sql, tuple(signature)))

    def cache_state(self, served: Served, conf: Mapping[str, str]) -> str:
        """For EXPLAIN: hit, miss, or bypassed (why)."""
        off = self._cache_off(conf)
        if off:
            return f"bypassed ({off})"
        return "hit" if served.key in self.cache else "miss"

    def _cache_off(self, conf: Mapping[str, str]) -> str | None:
        if not self.settings.cache:
            return "[serving] cache = false"
        if not switched_on(conf, CACHE_KEY):
            return "the session set datamap.cache.enabled=false"
        return None

    # ------------------------------------------------------------------ answering
    async def answer(self, served: Served, conf: Mapping[str, str]
                     ) -> tuple[LocalResult | None, str]:
        """(result, how) — result None means: forward to Spark; `how` is for the log."""
        cache_off = self._cache_off(conf)
        if cache_off is None:
            hit = self.cache.get(served.key)
            if hit is not None:
                return hit, "local cache=hit"
        t0 = time.monotonic()
        try:
            rows = await self.engine().run(served.plan, self.settings.timeout)
        except EngineFailure as e:
            log.info("local engine did not answer (%s); Spark answers", e)
            return None, f"spark (local engine: {e})"
        except Exception as e:  # noqa: BLE001 - e.g. DuckDB not importable: Spark answers
            log.warning("local engine unavailable; Spark answers", exc_info=True)
            return None, f"spark (local engine unavailable: {type(e).__name__})"
        result = LocalResult(served.plan.columns, rows)
        how = "local cache=bypassed" if cache_off else "local cache=miss"
        if cache_off is None:
            why = self.cache.put(served.key, result)
            if why:
                how = "local cache=bypassed"
        log.debug("served locally in %.1f ms", (time.monotonic() - t0) * 1000)
        return result, how

    def engine(self) -> LocalEngine:
        if self._engine is None:
            with self._engine_lock:
                if self._engine is None:
                    s = self.settings
                    self._engine = LocalEngine(s.threads, s.memory_limit, s.workers)
        return self._engine

    def warm(self) -> None:
        """Start the engine now (serve calls it in the background): the first datamap
        hit then does not pay for importing and opening DuckDB."""
        try:
            self.engine()
        except Exception:  # noqa: BLE001 - the first hit tries again, or Spark answers
            log.warning("the local engine could not start; datamap answers come from Spark "
                        "until it can", exc_info=True)

    def close(self) -> None:
        if self._engine is not None:
            self._engine.close()

    # ------------------------------------------------------------------ catalog snapshot
    def _current(self) -> _Snapshot:
        version = self.catalog.recent_version()
        snap = self._snapshot
        if snap is not None and snap.version == version:
            return snap
        with self._snap_lock:
            snap = self._snapshot
            if snap is None or snap.version != version:
                snap = self._snapshot = self._read(version)
            return snap

    def _read(self, version: int) -> _Snapshot:
        columns: dict[str, dict[str, str]] = {}
        segments: dict[str, dict[str, _Segment]] = {}
        for rec in self.catalog.list_datamaps():
            if rec.definition is None:
                continue
            table = storage_table(rec.table).lower()     # what rewritten SQL reads
            columns[table] = {c.name.lower(): c.type for c in rec.definition.columns}
            segments[table] = {s.id: _segment(s.files)
                               for s in self.catalog.visible_segments(rec.db, rec.name)
                               if s.files or not s.rows}
        try:
            zone = self.catalog.setting("time_zone")
        except Exception:  # noqa: BLE001 - unknown: timestamps go to Spark
            zone = None
        return _Snapshot(version, columns, segments, zone)
