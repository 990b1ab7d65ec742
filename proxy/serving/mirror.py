"""The serving tier's segment mirror: local copies of the datamap segments whose files the
proxy cannot open (a warehouse on HDFS, s3a://, abfs://, gs://, viewfs://), so that DuckDB
serves them in-process (docs/serving.md, "Mirrored segments").

What is mirrored: the files of every visible segment of every datamap, as the catalog lists
them, when one of them is not on a local path (`[serving] mirror = auto`), or always
(`always`, local files too), or never (`off`: such segments go to Spark). They are copied
byte for byte (never re-encoded) by the pipeline session's Hadoop FileSystem
(pipeline/copies.py: the cluster's configuration and credentials), into
`<state dir>/serving-mirror` (proxy/serving/mirror_disk.py: complete or absent, never half).

When: a worker thread looks at the catalog every POLL_S seconds (a publish here or by
another replica, a compaction, a DROP all change its version). It fetches the visible
segments it lacks (at start: all of them), and removes the copies of segments no longer
visible (compaction and DROP retire them). Each replica mirrors for itself.

The budget: `[serving] mirror_max_bytes`. A fetch that does not fit evicts the least
recently served segments first, but never one served within IDLE_S seconds; an evicted
segment is fetched again when a query next reads it (Spark answers that query). A segment
larger than the budget, a full disk or a failed copy is not mirrored: its queries go to
Spark, with the reason in EXPLAIN; a failed fetch is tried again after RETRY_S.

The serving tier asks `segment(key)`: the local copy when it is complete and intact, else
why not. `generation` changes whenever a copy comes or goes, so the tier reads its snapshot
again.
"""
from __future__ import annotations

import logging
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Protocol, Sequence

from proxy.serving.mirror_disk import Copied, CopyMismatch, SegmentKey, remove, scan, write_segment
from rewriter.api import STORAGE_SUFFIX, storage_table

log = logging.getLogger("proxy.serving")

POLL_S = 1.0           # the catalog is looked at this often
RETRY_S = 60.0         # a failed fetch is tried again after this long
IDLE_S = 60.0          # a segment served within this long is not evicted
DISK_RESERVE = 64 << 20   # free disk a fetch leaves at least
DIR_NAME = "serving-mirror"


class Files(Protocol):
    """How the mirror reaches the warehouse: pipeline/copies.py through the pipeline
    session (SparkFiles), or any other reader of the same URIs."""
    def status(self, uri: str) -> tuple[int, int]: ...       # (length, mtime ms)
    def copy(self, uri: str, local: str) -> None: ...


class SparkFiles:
    """Files through the pipeline session, opened when first needed (a background thread:
    the worker never runs on the event loop)."""

    def __init__(self, spark: Callable[[], object]):
        self._spark = spark

    def status(self, uri: str) -> tuple[int, int]:
        from pipeline.copies import file_status
        return file_status(self._spark(), uri)

    def copy(self, uri: str, local: str) -> None:
        from pipeline.copies import copy_to_local
        copy_to_local(self._spark(), uri, local)


def error_text(e: BaseException) -> str:
    if isinstance(e, (CopyMismatch, _NoRoom)):
        return str(e)
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    from pipeline.copies import error_text as java_text
    return java_text(e)


class _NoRoom(Exception):
    """The budget or the disk cannot take a segment."""


def needs_mirror(mode: str, files: Sequence[str], local: Callable[[str], str | None]) -> bool:
    if mode == "always":
        return bool(files)
    return mode == "auto" and any(local(f) is None for f in files)


@dataclass
class _Held:
    copied: Copied
    served_at: float = 0.0         # epoch s of the last answer read from it; 0: none yet
    fetched_at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class MirrorStatus:
    """What the metrics, the console and EXPLAIN's readers see."""
    mode: str
    max_bytes: int
    bytes: int
    files: int
    segments: int
    fetches: int
    fetch_seconds: float
    fetched_bytes: int
    failures: int
    evictions: int
    missing: dict[str, list[tuple[str, str]]]   # table -> [(segment id, why not mirrored)]
    held: dict[str, tuple[int, int]]            # table -> (segments, bytes)


class SegmentMirror:
    def __init__(self, catalog, root: Path, files: Files, *, mode: str = "auto",
                 max_bytes: int = 4 << 30, local: Callable[[str], str | None]):
        self.catalog = catalog
        self.root = Path(root)
        self.mode = mode
        self.max_bytes = max_bytes
        self._files = files
        self._local = local
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._held: dict[SegmentKey, _Held] = {}
        self._visible: set[SegmentKey] = set()
        self._evicted: set[SegmentKey] = set()
        self._failed: dict[SegmentKey, tuple[str, float]] = {}
        self._wanted: dict[SegmentKey, None] = {}       # fetched next, in order
        self._fetching: SegmentKey | None = None
        self._version: int | None = None
        self.generation = 0
        self.fetches = self.fetched_bytes = self.failures = self.evictions = 0
        self.fetch_seconds = 0.0
        for seg in scan(self.root):
            self._held[seg.key] = _Held(seg, fetched_at=seg.directory.stat().st_mtime)

    # ------------------------------------------------------------------ the tier's side
    def needed(self, files: Sequence[str]) -> bool:
        return needs_mirror(self.mode, files, self._local)

    def segment(self, key: SegmentKey) -> Copied | str:
        """The complete, intact copy of a segment, else why the tier cannot read it."""
        with self._lock:
            held = self._held.get(key)
            if held is not None and held.copied.intact():
                return held.copied
            if held is not None:            # a copy removed or cut short under us
                del self._held[key]
                self._wanted[key] = None
                self.generation += 1
                self._wake.set()
            named = key.table.removesuffix(STORAGE_SUFFIX)
            if key in self._evicted:
                return (f"segment {key.sid} of {named} was evicted from the mirror "
                        "(fetched again now)")
            failed = self._failed.get(key)
            if failed is not None:
                return f"segment {key.sid} of {named} not mirrored: {failed[0]}"
            return f"segment {key.sid} of {named} not mirrored yet"

    def want(self, key: SegmentKey) -> None:
        """A query read a segment the mirror lacks: fetch it (an evicted one, or one whose
        fetch failed long enough ago)."""
        with self._lock:
            failed = self._failed.get(key)
            if key in self._held or (failed and time.monotonic() - failed[1] < RETRY_S):
                return
            self._evicted.discard(key)
            if key not in self._wanted:
                self._wanted[key] = None
                self.generation += 1       # EXPLAIN: "not mirrored yet", no longer evicted
                self._wake.set()

    def touch(self, keys: Iterable[SegmentKey]) -> None:
        """An answer was served from these segments' copies."""
        now = time.time()
        for key in keys:
            held = self._held.get(key)
            if held is not None:
                held.served_at = now

    # ------------------------------------------------------------------ the worker
    def run(self) -> None:
        """The worker thread (serve starts it in the background; close() ends it)."""
        last = None
        while not self._stop.is_set():
            try:
                self.step()
                last = None
            except Exception as e:  # noqa: BLE001 - logged once; the next look tries again
                if repr(e) != last:
                    log.warning("the serving mirror cannot follow the catalog: %s", e,
                                exc_info=True)
                last = repr(e)
            self._wake.wait(POLL_S)
            self._wake.clear()

    def step(self) -> None:
        """One pass: follow the catalog, then fetch what is wanted (until close())."""
        self.follow_catalog()
        while not self._stop.is_set():
            with self._lock:
                key = next(iter(self._wanted), None)
                if key is None:
                    return
                del self._wanted[key]
                if key not in self._visible or key in self._held:
                    continue
                self._fetching = key
            try:
                self._fetch(key)
            finally:
                self._fetching = None

    def follow_catalog(self, force: bool = False) -> None:
        """The visible segments that need the mirror, read again when the catalog changed:
        copies of segments no longer visible go, those missing are wanted, failed ones are
        wanted again after RETRY_S."""
        version = self.catalog.recent_version()
        if version != self._version or force:
            visible = set(self._visible_keys())
            self._version = version
        else:
            visible = self._visible
        now = time.monotonic()
        with self._lock:
            self._visible = visible
            retired = [self._held.pop(k) for k in list(self._held) if k not in visible]
            self._evicted &= visible
            for k in list(self._failed):
                if k not in visible:
                    del self._failed[k]
            for k in sorted(visible, key=lambda k: (k.table, len(k.sid), k.sid)):
                failed = self._failed.get(k)
                if (k not in self._held and k not in self._evicted
                        and (failed is None or now - failed[1] >= RETRY_S)):
                    self._wanted.setdefault(k, None)
            if retired:
                self.generation += 1
        for held in retired:
            remove(held.copied)
            log.info("serving mirror: removed segment %s of %s (no longer visible)",
                     held.copied.key.sid, held.copied.key.table)

    def _visible_keys(self) -> Iterable[SegmentKey]:
        for rec in self.catalog.list_datamaps():
            if rec.definition is None:
                continue
            table = storage_table(rec.table).lower()
            for seg in self.catalog.visible_segments(rec.db, rec.name):
                if seg.files and self.needed(seg.files):
                    yield SegmentKey(table, seg.id, tuple(seg.files))

    def _fetch(self, key: SegmentKey) -> None:
        try:
            # the first status may open the file system (remote mode: the pipeline
            # session, tens of seconds): not the copy's time
            sources = [self._files.status(f) for f in key.files]
            need = sum(size for size, _ in sources)
            evicted = self._make_room(key, need)
            t0 = time.monotonic()
            copied = write_segment(self.root, key, sources, self._files.copy,
                                   lambda: [self._files.status(f) for f in key.files],
                                   lambda: time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001 - the segment goes to Spark, with why
            why = error_text(e)
            with self._lock:
                self._failed[key] = (why, time.monotonic())
                self.failures += 1
                self.generation += 1
            log.warning("serving mirror: segment %s of %s not mirrored: %s (Spark answers its "
                        "queries; tried again in %g s)", key.sid, key.table, why, RETRY_S)
            return
        with self._lock:
            self._held[key] = _Held(copied)
            self._failed.pop(key, None)
            self.fetches += 1
            self.fetched_bytes += copied.bytes
            self.fetch_seconds += copied.seconds
            self.generation += 1
        log.info("serving mirror: segment %s of %s copied (%d files, %d bytes) in %.3f s%s",
                 key.sid, key.table, len(key.files), copied.bytes, copied.seconds,
                 f"; evicted {evicted}" if evicted else "")

    def _make_room(self, key: SegmentKey, need: int) -> list[str]:
        """Evict least recently served segments until `need` bytes fit the budget; raises
        _NoRoom when they cannot (a larger segment, recent ones, or the disk)."""
        if need > self.max_bytes:
            raise _NoRoom(f"its {need} bytes are over [serving] mirror_max_bytes "
                          f"({self.max_bytes})")
        gone: list[_Held] = []
        with self._lock:
            used = sum(h.copied.bytes for h in self._held.values())
            now = time.time()
            for h in sorted(self._held.values(), key=lambda h: max(h.served_at, h.fetched_at)):
                if used + need <= self.max_bytes:
                    break
                if now - h.served_at < IDLE_S:
                    continue
                del self._held[h.copied.key]
                self._evicted.add(h.copied.key)
                used -= h.copied.bytes
                gone.append(h)
            if gone:
                self.evictions += len(gone)
                self.generation += 1
        for h in gone:
            remove(h.copied)
        if used + need > self.max_bytes:
            raise _NoRoom(f"the mirror is full: [serving] mirror_max_bytes ({self.max_bytes}) "
                          f"holds {used} bytes of segments served in the last {IDLE_S:g} s")
        free = shutil.disk_usage(self.root).free
        if free < need + DISK_RESERVE:
            raise _NoRoom(f"the disk of {self.root} has {free} bytes free, and the segment "
                          f"needs {need} (plus {DISK_RESERVE} kept free)")
        return [f"{h.copied.key.table} segment {h.copied.key.sid}" for h in gone]

    # ------------------------------------------------------------------ state
    def status(self) -> MirrorStatus:
        with self._lock:
            held = list(self._held.values())
            missing: dict[str, list[tuple[str, str]]] = {}
            for k in sorted(self._visible - set(self._held), key=lambda k: (k.table, k.sid)):
                why = ("evicted" if k in self._evicted else
                       self._failed[k][0] if k in self._failed else
                       "fetching" if k == self._fetching else "not mirrored yet")
                missing.setdefault(k.table, []).append((k.sid, why))
            per: dict[str, tuple[int, int]] = {}
            for h in held:
                n, b = per.get(h.copied.key.table, (0, 0))
                per[h.copied.key.table] = (n + 1, b + h.copied.bytes)
            return MirrorStatus(self.mode, self.max_bytes, sum(h.copied.bytes for h in held),
                                sum(len(h.copied.paths) for h in held), len(held),
                                self.fetches, self.fetch_seconds, self.fetched_bytes,
                                self.failures, self.evictions, missing, per)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
