"""The serving tier: decide whether a rewritten query is answered in-process, and answer it.

`ServingTier.plan(result, conf)` (on the decision path) turns the rewriter's result into a
Plan for the local engine, or says why Spark answers instead:
  * serving is off ([serving] enabled, or the session's SET datamap.serving.enabled=false);
  * the engine cannot start (below);
  * the query is outside the allow-list (proxy/serving/translate.py), or the base table
    files it reads (a compensation's new files, a table read whole as the freshness guard
    lists it now) are not readable here, are being written, or are over [serving]
    max_base_bytes (proxy/serving/newfiles.py);
  * a datamap's files are not readable here and not mirrored (yet): a warehouse on HDFS
    or an object store is read from the segment mirror (proxy/serving/mirror.py), a
    segment it reads is no longer visible, or the files read are over [serving]
    max_datamap_bytes.
`ServingTier.answer(plan, conf)` runs it: the result cache first, then the engine; any
engine failure or timeout returns None and the caller forwards the rewritten SQL to Spark.

The engine's life (EngineState): NOT_STARTED -> UP, or -> DOWN when it cannot start
(EngineUnavailable: cause and fix, logged once as an ERROR). serve starts it in the
background (warm) and, while it is DOWN, tries again every RETRY_S (retry, a periodic
task): never on a client's statement, where a failed start would cost each query tens
of milliseconds. While DOWN, plan() says so ("local engine unavailable: <cause>"), so
EXPLAIN, the statement log and the answer agree; engine_status() is what the metrics and
the console show.

The files of every visible segment come from the catalog, read again whenever the
catalog's version changes (a publish, a compaction, a drop), like the rewriter's index,
or the mirror's generation does (a segment copied, evicted or removed).
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence
from urllib.parse import unquote, urlparse

from proxy.routing.classify import CACHE_KEY, SERVING_KEY
from proxy.config import ServingSettings
from proxy.routing.router import LocalResult
from proxy.serving.cache import CacheKey, ResultCache
from proxy.serving.engine import EngineFailure, EngineUnavailable, LocalEngine
from proxy.serving.engine_state import (  # noqa: F401 - RETRY_S, start_error_line: re-exported
    _MOVES, RETRY_S, EngineState, EngineStatus, start_error_line,
)
from proxy.serving.mirror import SegmentMirror
from proxy.serving.mirror_disk import SegmentKey
from proxy.serving.newfiles import BaseReads, Layouts, Tables
from proxy.serving.translate import NotServable, Plan, translate
from proxy.routing.session_keys import switched_on
from rewriter.api import STORAGE_SUFFIX, storage_table
from rewriter.bytecache import ByteLRU, text_size

log = logging.getLogger("proxy.serving")


@dataclass(frozen=True)
class _Segment:
    paths: tuple[str, ...]          # local paths, or () when a file is not local
    bytes: int
    signature: tuple                # (size, mtime_ns) per file: part of the cache key
    problem: str | None = None      # why the files cannot be read here
    mirror: SegmentKey | None = None    # read from the mirror (or wanted there)


@dataclass(frozen=True)
class _Snapshot:
    version: tuple                   # (the catalog's version, the mirror's generation)
    columns: Mapping[str, Mapping[str, str]]                 # table -> stored column types
    segments: Mapping[str, Mapping[str, _Segment]]           # table -> visible segment id -> files
    zone: str | None = None          # the time zone the datamaps were computed in


@dataclass(frozen=True)
class Served:
    """A query the tier will answer: its plan and the cache key of its result."""
    plan: Plan
    key: CacheKey
    mirrored: tuple[SegmentKey, ...] = ()    # segments read from the mirror's copies
    # base tables read whole, with the files read (the plan is kept while they are the same)
    listed: tuple[tuple[str, frozenset[str] | None], ...] = ()


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


class NotMirrored(NotServable):
    """A segment the tier would read from the mirror is not there (yet): EXPLAIN says
    `spark (segment 7 of db.agg_table not mirrored yet)`."""


class ServingTier:
    def __init__(self, catalog, settings: ServingSettings = ServingSettings(),
                 engine: LocalEngine | None = None,
                 zone_problem: Callable[[], str | None] = lambda: None,
                 layouts: Layouts = lambda _table: None,
                 tables: Tables = lambda _table: "base tables are not read here",
                 mirror: SegmentMirror | None = None):
        self.catalog = catalog
        # local copies of segments on storage the proxy cannot open; None: no mirror
        self.mirror = mirror
        # a base table's files as the guard lists them now (FreshnessGuard.table_files): a
        # dimension joined to a datamap is read in-process (proxy/serving/basetables.py)
        self._tables = tables
        # a base table's layout (FreshnessGuard.layout): a compensation's new files are read
        # in-process (proxy/serving/newfiles.py); None: they go to Spark
        self._layouts = layouts
        # remote mode: why the upstream's time zone may not be the one the catalog records
        # (DatamapService.time_zone_problem); timestamps are then not served
        self._zone_problem = zone_problem
        self.settings = settings
        self._engine = engine
        self._engine_lock = threading.Lock()
        self._status = EngineStatus(EngineState.UP if engine is not None
                                    else EngineState.NOT_STARTED)
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

    def plan(self, result, conf: Mapping[str, str], current_db: str | None = None
             ) -> Served | str:
        """The Served plan of a rewritten query, or why Spark answers it. `current_db`: the
        session's current database, where a base table named bare is (None: not read)."""
        off = self.enabled(conf)
        if off is not None:
            return off
        status = self._status
        if status.state is EngineState.DOWN:
            return f"local engine unavailable: {status.cause}"
        snap = self._current()
        zone = snap.zone if self._zone_problem() is None else None
        key = (result.sql, snap.version, zone, current_db)
        known = self._plans.get(key)
        if known is None or not self._same_files(known):
            known, keep = self._translate(result, snap, zone, current_db)
            if keep:
                self._plans.put(key, known)
        return known

    def _same_files(self, known: Served | str) -> bool:
        """A kept plan that reads base tables whole is used while they have the same files."""
        if isinstance(known, str):
            return True
        for table, files in known.listed:
            now = self._tables(table)
            if isinstance(now, str) or files is None or now[1] != files:
                return False
        return True

    def _translate(self, result, snap: _Snapshot, zone: str | None, current_db: str | None
                   ) -> tuple[Served | str, bool]:
        """(the Served plan or why not, whether to keep it): a refusal that looked at a base
        table's files is not kept (a write going on ends, a layout gets known)."""
        tree = result.tree
        if tree is None:
            from rewriter.normalize import DIALECT
            import sqlglot
            try:
                tree = sqlglot.parse_one(result.sql, read=DIALECT)
            except Exception as e:  # noqa: BLE001 - Spark reads it: it answers
                return f"rewritten SQL not understood ({type(e).__name__})", True
        signature: list = []
        mirrored: list[SegmentKey] = []
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
                if seg.problem and seg.mirror is not None:
                    self.mirror.want(seg.mirror)      # an evicted one: fetched again now
                    raise NotMirrored(seg.problem)
                if seg.problem:
                    raise NotServable(f"segment {sid} of {named}: {seg.problem}")
                if seg.mirror is not None:
                    mirrored.append(seg.mirror)
                out += seg.paths
                signature.append((table, sid, seg.signature))
                read_bytes[table] = read_bytes.get(table, 0) + seg.bytes
            if read_bytes[table] > limit:
                raise NotServable(f"{named} reads {read_bytes[table]} bytes, over [serving] "
                                  f"max_datamap_bytes ({limit})")
            return out
        bases = BaseReads(self._layouts, self._tables, self.settings.max_base_bytes, signature,
                          current_db)
        try:
            plan = translate(tree, snap.columns, files_of, zone, bases.new_files, bases.table)
        except NotMirrored as e:
            return str(e), True
        except NotServable as e:
            return f"not served locally: {e}", not bases.listed
        except RecursionError:
            return "not served locally: statement nested too deeply", True
        except Exception as e:  # noqa: BLE001 - a translator bug must not fail the query
            log.exception("serving translation failed; Spark answers")
            return f"not served locally: internal error ({type(e).__name__})", True
        return Served(plan, (plan.sql, tuple(signature)), tuple(dict.fromkeys(mirrored)),
                      tuple(bases.listed)), True

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
                self._touch(served)
                return hit, "local cache=hit"
        t0 = time.monotonic()
        try:
            engine = self.engine()
        except EngineUnavailable as e:      # logged as an ERROR when it failed to start
            return None, f"spark (local engine unavailable: {e.cause})"
        try:
            rows = await engine.run(served.plan, self.settings.timeout)
        except EngineFailure as e:
            log.info("local engine did not answer (%s); Spark answers", e)
            return None, f"spark (local engine: {e})"
        result = LocalResult(served.plan.columns, rows)
        self._touch(served)
        how = "local cache=bypassed" if cache_off else "local cache=miss"
        if cache_off is None:
            why = self.cache.put(served.key, result)
            if why:
                how = "local cache=bypassed"
        log.debug("served locally in %.1f ms", (time.monotonic() - t0) * 1000)
        return result, how

    def _touch(self, served: Served) -> None:
        if served.mirrored and self.mirror is not None:
            self.mirror.touch(served.mirrored)

    # ------------------------------------------------------------------ the engine's life
    def engine(self) -> LocalEngine:
        """The started engine (started now if it never was); EngineUnavailable while it
        is DOWN (retry() starts it again, not this)."""
        engine = self._engine
        if engine is not None and self._status.state is EngineState.UP:
            return engine
        with self._engine_lock:
            if self._status.state is EngineState.NOT_STARTED:
                self._start()
            status = self._status
            if status.state is EngineState.UP:
                return self._engine
        if status.state is EngineState.CLOSED:
            raise EngineUnavailable("the local engine is closed", "")
        raise EngineUnavailable(status.cause, status.fix)

    def engine_status(self) -> EngineStatus:
        """What the metrics and the console show; never starts the engine."""
        return self._status

    def engine_problem(self, start: bool = False) -> str | None:
        """None when the engine is up (or, unless `start`, not started yet), else why it
        is not. `start`: start it first if it never was (blocks: worker threads only)."""
        if start and self._status.state is EngineState.NOT_STARTED:
            try:
                self.engine()
            except EngineUnavailable:
                pass
        status = self._status
        if status.state in (EngineState.UP, EngineState.NOT_STARTED):
            return None
        return status.cause or status.state.value

    def warm(self) -> None:
        """Start the engine now (serve calls it in the background): the first datamap
        hit then does not pay for importing and opening DuckDB. A failure is logged (an
        ERROR naming the cause and the fix) and kept: retry() tries again."""
        try:
            self.engine()
        except EngineUnavailable:
            pass

    def retry(self) -> None:
        """Start a DOWN engine again (serve's periodic task, every RETRY_S): a fix made
        while the proxy runs (numpy installed) takes effect without a restart."""
        if self._status.state is not EngineState.DOWN:
            return
        with self._engine_lock:
            if self._status.state is EngineState.DOWN:
                self._start()

    def _start(self) -> None:
        """NOT_STARTED or DOWN -> UP or DOWN; under _engine_lock."""
        was = self._status
        engine = None
        try:
            engine = self._make_engine()
            engine.check()
        except Exception as e:  # noqa: BLE001 - any failure to start: Spark answers
            if engine is not None:
                engine.close()
            failure = e if isinstance(e, EngineUnavailable) else EngineUnavailable(
                f"{type(e).__name__}: {e}"[:200], "see the DEBUG log line for the traceback; "
                "[serving] enabled = false turns in-process serving off")
            same = was.state is EngineState.DOWN and was.cause == failure.cause
            self._move(EngineStatus(EngineState.DOWN, failure.cause, failure.fix,
                                    was.since if same else time.time(), failure.engine))
            if same:
                log.debug("the serving engine still cannot start: %s", failure.cause)
            else:
                log.error("%s", start_error_line(failure))
            log.debug("the serving engine's start failed", exc_info=e)
            return
        self._engine = engine
        self._move(EngineStatus(EngineState.UP, engine=f"DuckDB {engine.version}"))
        if was.state is EngineState.DOWN:
            log.info("the serving engine (DuckDB %s) started: datamap answers are computed "
                     "in-process again", engine.version)

    def _make_engine(self) -> LocalEngine:
        s = self.settings
        return LocalEngine(s.threads, s.memory_limit, s.workers)

    def _move(self, to: EngineStatus) -> None:
        if to.state not in _MOVES[self._status.state]:
            raise RuntimeError(f"serving engine: {self._status.state.value} -> "
                               f"{to.state.value} is not a move it makes")
        self._status = to

    def close(self) -> None:
        if self.mirror is not None:
            self.mirror.close()
        with self._engine_lock:
            if self._status.state is not EngineState.CLOSED:
                self._move(EngineStatus(EngineState.CLOSED))
            if self._engine is not None:
                self._engine.close()

    # ------------------------------------------------------------------ catalog snapshot
    def _current(self) -> _Snapshot:
        version = (self.catalog.recent_version(),
                   self.mirror.generation if self.mirror is not None else 0)
        snap = self._snapshot
        if snap is not None and snap.version == version:
            return snap
        with self._snap_lock:
            snap = self._snapshot
            if snap is None or snap.version != version:
                snap = self._snapshot = self._read(version)
            return snap

    def _read(self, version: tuple) -> _Snapshot:
        columns: dict[str, dict[str, str]] = {}
        segments: dict[str, dict[str, _Segment]] = {}
        for rec in self.catalog.list_datamaps():
            if rec.definition is None:
                continue
            table = storage_table(rec.table).lower()     # what rewritten SQL reads
            columns[table] = {c.name.lower(): c.type for c in rec.definition.columns}
            segments[table] = {s.id: self._segment(table, s.id, s.files)
                               for s in self.catalog.visible_segments(rec.db, rec.name)
                               if s.files or not s.rows}
        try:
            zone = self.catalog.setting("time_zone")
        except Exception:  # noqa: BLE001 - unknown: timestamps go to Spark
            zone = None
        return _Snapshot(version, columns, segments, zone)

    def _segment(self, table: str, sid: str, files: Sequence[str]) -> _Segment:
        """A segment's files as the engine reads them: in place, or the mirror's copies."""
        mirror = self.mirror
        if mirror is None or not mirror.needed(files):
            return _segment(files)
        key = SegmentKey(table, sid, tuple(files))
        copied = mirror.segment(key)
        if isinstance(copied, str):
            return _Segment((), 0, (), copied, key)
        return _Segment(copied.paths, copied.bytes, copied.sources, mirror=key)
