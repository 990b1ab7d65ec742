"""The freshness guard: before a datamap answers, check that its base tables' files are
still the ones its visible segments were built from.

Writes through the proxy are seen at once (the load handler refreshes before the client
sees FINISHED); writes elsewhere (a Spark job, the Thrift server used directly, files
copied into the table's directory) are not, until a sync. So at query time the guard
compares each base table's files on disk (proxy/datamaps/freshness/listing.py: a cached listing,
one stat per directory when nothing changed) with the files the datamap covers:

    FRESH       the same files: the datamap answers;
    NEW         only new files, in one base table, of a datamap an incremental refresh
                would append to: the datamap answers together with its definition over
                just the new files (union compensation, exact), and a sync is started so
                the refresh catches up in the background;
    CHANGED     files removed (overwrite, delete, dropped partition), new files that
                cannot be compensated, or a table whose files cannot be listed yet: the
                base tables answer, and a sync (which rebuilds) is started;
    UNVERIFIED  a base table outside the local file system (hdfs:, s3a:), which the proxy
                cannot list, or whose locations are not known yet (being loaded): the
                catalog's word stands, as before the guard (loads through the proxy, SYNC
                DATAMAPS and the periodic sync keep it).

A change the guard sees first is noted (note_change), so that each client session whose
Spark session listed the table before is sent `REFRESH TABLE` once before its next
statement on it (fresh_answer.with_refresh): Spark keeps a session's file list, and the
compensation's file filter, or the base tables answering, must see the new files.

Writes still going on (docs/freshness.md, "What a reader sees while a table is written"):
an answer must be the base tables as of one moment between the statement's arrival and
this check. New files may therefore be held back (left out, the datamap answering as of
before them) only when their write provably had not finished when the statement arrived:
  * files of a Spark job whose commit is still moving files in (Listing.pending_jobs: the
    job's id in its files' names, some of them still in `_temporary/`), read before the
    table's files;
  * files that appeared after a write through the proxy began (begin_write lists the
    table), for statements that arrived before it began.
Anything else on disk is judged, whoever wrote it: a write through the proxy never hides
an outside write that finished before the statement arrived.

Bounded staleness (`[datamaps] max_staleness`, `SET datamap.max_staleness`): while a
datamap's data is younger than the budget (its newest segment read the base tables, or the
guard last found it fresh, within the budget) the listing is skipped.

Where a table's files are (its roots) comes from the metastore through the pipeline
session (pipeline.table_layout): loaded whenever the proxy lists the table with Spark
(every sync, load and build) and at start, never on the query path; a table whose layout
is not known yet (its load failed) is UNVERIFIED and its layout is loaded in the
background.
"""
from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping

from pipeline.files import quote_table
from proxy.datamaps.freshness.listing import Listing, job_of, local_path

log = logging.getLogger("proxy.datamaps")

FRESH, NEW, CHANGED, UNVERIFIED = "fresh", "new", "changed", "unverified"
# Paths spelt the same in a URI and decoded (Spark's _metadata.file_path vs
# input_file_name()), so a compensation's IN list needs no encoding rules.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9/._=+-]+")
MAX_COMPENSATED_FILES = 1000
# session setting (proxy-side only): when the proxy last ran REFRESH TABLE t in the session
LISTED_KEY = "datamap.listed:"
WRITE_HOLD_MAX_S = 3600.0


@dataclass(frozen=True)
class Layout:
    hive: bool                        # a Hive scan: rows carry input_file_name(), not _metadata
    roots: tuple[str, ...]            # local paths; () when not on the local file system
    local: bool
    cached: bool                      # CACHE TABLE'd in the pipeline session
    external: bool = False            # an external-format table's view (proxy/external)
    # how its files are read (the serving tier reads the new files of a compensation)
    format: str = ""                  # the provider: parquet, csv, hive, orc, ...
    columns: tuple[tuple[str, str], ...] = ()     # (name, Spark type), partition columns last
    partitions: tuple[str, ...] = ()              # partition columns, in order
    options: tuple[tuple[str, str], ...] = ()     # storage properties (CSV: header, sep, ...)

    @classmethod
    def of(cls, raw: Mapping) -> "Layout":
        paths = [local_path(r) for r in raw.get("roots", ())]
        local = bool(paths) and all(p is not None for p in paths)
        return cls(bool(raw.get("hive")), tuple(p for p in paths if p) if local else (),
                   local, bool(raw.get("cached")), bool(raw.get("external")),
                   str(raw.get("format") or ""),
                   tuple((str(n), str(t)) for n, t in raw.get("columns", ())),
                   tuple(map(str, raw.get("partition_columns", ()))),
                   tuple(sorted((str(k), str(v)) for k, v in
                                (raw.get("options") or {}).items())))


@dataclass(frozen=True)
class Verdict:
    kind: str
    reason: str = ""
    new: Mapping[str, tuple[str, ...]] = field(default_factory=dict)   # table -> new files
    tables: tuple[str, ...] = ()      # changed base tables (REFRESH TABLE before answering)
    held: int = 0                     # new files held back: their writes were still going on

    def files_line(self) -> str:
        """"2 new files compensated from default.sales"."""
        return "; ".join(f"{len(files)} new file{'s' if len(files) != 1 else ''} compensated "
                         f"from {table}" for table, files in self.new.items())


@dataclass(frozen=True)
class _Hold:
    """One write through the proxy to one table (begin_write .. end_write)."""
    started: float                      # time.monotonic(), taken before `before`
    before: frozenset[str] | None       # the table's files then; None: not listable then


@dataclass(frozen=True)
class Covered:
    """What one datamap's visible segments were built from, per base table (local paths;
    None for a table outside the local file system), and its data time."""
    files: Mapping[str, frozenset[str] | None]
    as_of: float
    definition: object                # rewriter DatamapDefinition


class FreshnessGuard:
    def __init__(self, load_layout: Callable[[str], Mapping], request: Callable[[str], None]):
        """`load_layout(table)`: pipeline.table_layout on the pipeline session (blocks);
        `request(table)`: start a sync of `table` in the background (returns at once)."""
        self._load_layout = load_layout
        self._request = request
        self._layouts: dict[str, Layout] = {}
        self._listings: dict[str, Listing] = {}
        self._verified: dict[str, float] = {}       # datamap -> when last found FRESH
        self._invisible: dict[str, frozenset[str]] = {}   # table -> files Spark does not list
        self._loading: set[str] = set()
        self._memo: dict[tuple[str, str], tuple] = {}
        self._changed_at: dict[str, float] = {}      # table -> monotonic time of a change
        self._writing: dict[str, dict[object, _Hold]] = {}   # table -> write token -> hold
        self._names: re.Pattern | None = None        # their bare names, for a text match
        self._lock = threading.Lock()

    # -- writes through the proxy in flight -------------------------------------------------
    def begin_write(self, tables: Iterable[str]) -> object:
        """A write to `tables` is about to be forwarded: until end_write(token), files that
        appear in them may be held back from statements that arrived before it began
        (check's `since`). Each table's files are remembered now (the cached listing);
        a table whose files cannot be listed now holds nothing back. Entries older than
        WRITE_HOLD_MAX_S are ignored (a decision that was never executed must not hold a
        table for ever). Several holds on one table are each their own."""
        token = object()
        for table in dict.fromkeys(tables):
            started = time.monotonic()      # before the look: every file not in it is newer
            listing = self._listings.get(table)
            try:
                before = listing.files() if listing is not None else None
            except OSError:
                before = None
            with self._lock:
                self._writing.setdefault(table, {})[token] = _Hold(started, before)
        return token

    def end_write(self, token: object) -> None:
        """Idempotent."""
        with self._lock:
            for table in [t for t, tokens in self._writing.items() if token in tokens]:
                del self._writing[table][token]
                if not self._writing[table]:
                    del self._writing[table]

    def _held_back(self, table: str, added: tuple[str, ...], since: float) -> frozenset[str]:
        """The files of `added` that appeared after a hold on `table` began, of holds that
        began after `since` (the statement's arrival): their writes had not finished when
        the statement arrived, so an answer without them is as of a moment during it.
        A file that appeared during a hold that began before the statement arrived is not
        held back: nothing tells the proxy's own write from another writer that finished
        meanwhile (that one must be seen)."""
        holds = self._writing.get(table)
        if not holds:
            return frozenset()
        oldest = time.monotonic() - WRITE_HOLD_MAX_S
        held: set[str] = set()
        for hold in list(holds.values()):
            if hold.before is not None and hold.started >= since and hold.started > oldest:
                held.update(f for f in added if f not in hold.before)
        return frozenset(held)

    # -- Spark sessions' cached file lists ---------------------------------------------------
    def note_change(self, table: str) -> None:
        """The proxy learned that `table`'s files changed (a sync found it, or the guard).
        A Spark session that read the table before may still use its old file list."""
        with self._lock:
            self._changed_at[table] = time.monotonic()
            names = sorted({t.rpartition(".")[2] for t in self._changed_at}, key=len,
                           reverse=True)
            self._names = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\b",
                                     re.IGNORECASE)

    def stale_listings(self, statement: str, opened: float,
                       conf: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
        """(tables the statement may read whose files changed after this session opened and
        after the proxy last refreshed them in it, the session settings that remember the
        refresh). A word match on the bare table name: a false match costs a REFRESH TABLE."""
        pattern = self._names
        if pattern is None:
            return (), ()
        bare = {m.group(1).lower() for m in pattern.finditer(statement)}
        if not bare:
            return (), ()
        now, tables, remember = time.monotonic(), [], []
        for table, at in list(self._changed_at.items()):
            key = LISTED_KEY + table
            if table.rpartition(".")[2] in bare and at > max(opened, float(conf.get(key, 0))):
                tables.append(table)
                remember.append((key, repr(now)))
        return tuple(tables), tuple(remember)

    # -- layouts (blocking callers: syncs, loads, builds, start) ---------------------------
    def load_layouts(self, tables: Iterable[str]) -> None:
        for table in dict.fromkeys(tables):
            try:
                layout = Layout.of(self._load_layout(table))
            except Exception:  # noqa: BLE001 - e.g. dropped: the next look says CHANGED
                log.debug("cannot read the layout of %s", table, exc_info=True)
                self.forget(table)
                continue
            with self._lock:
                if self._layouts.get(table) != layout:
                    self._layouts[table] = layout
                    self._listings[table] = Listing(layout.roots)

    def forget(self, table: str) -> None:
        with self._lock:
            self._layouts.pop(table, None)
            self._listings.pop(table, None)
            self._invisible.pop(table, None)

    def layout(self, table: str) -> Layout | None:
        """The table's layout as last loaded (None: not known yet); never loads it."""
        return self._layouts.get(table)

    def table_files(self, table: str) -> tuple[Layout, frozenset[str]] | str:
        """For a reader of the whole table other than Spark (the serving tier): its layout
        and the data files Spark would read now, or why they cannot be told. Not while a
        write into it is going on (through the proxy, or a job's commit: Spark may see it
        half done, or not at all); of a partitioned table, only files in the partitions the
        metastore listed at the last load (another directory: the table is refused); of an
        unpartitioned one, none in a subdirectory. An unknown layout is loaded in the
        background."""
        layout = self._layout(table)
        listing = self._listings.get(table)
        if layout is None or listing is None:
            return "its layout is not known here yet"
        if not layout.local:
            return "its files are not on the local file system"
        if table in self._writing:
            return "a write into it through the proxy is going on"
        files = listing.files()
        if listing.staging() and listing.pending_jobs():
            return "a write job is committing files into it"
        invisible = self._invisible.get(table)
        if invisible:
            files = files - invisible
        dirs = set(layout.roots[1:]) if layout.partitions else set(layout.roots[:1])
        stray = next((f for f in files if os.path.dirname(f) not in dirs), None)
        if stray is not None:
            return (f"file {stray} is outside the partition directories the metastore "
                    "listed at the last load" if layout.partitions
                    else f"file {stray} is in a subdirectory of the table")
        return layout, files

    def files_now(self, table: str) -> frozenset[str] | None:
        """The table's files on disk now (None when its layout is not known): taken just
        before Spark lists the table, for listed()."""
        listing = self._listings.get(table)
        return listing.files() if listing is not None else None

    def listed(self, table: str, before: frozenset[str] | None, spark_files: Iterable[str]) -> None:
        """A sync listed `table` with Spark. Files that were on disk before Spark listed
        and that Spark did not list (an unregistered partition's directory, say) are no
        news to the datamaps (a file that appeared in between is not judged)."""
        self.load_layouts([table])
        spark = {local_path(f) for f in spark_files}
        with self._lock:
            self._invisible[table] = frozenset(f for f in (before or ()) if f not in spark)

    def unfinished(self, table: str, spark_files: Iterable[str]) -> frozenset[str]:
        """Of the files a sync just listed with Spark, those of a write job whose commit was
        going on meanwhile (its files still pending in a staging directory now, or more of
        its files on disk now than Spark listed): cutting them into a segment would make a
        datamap cover part of one job. Empty when the table is not listed here."""
        listing = self._listings.get(table)
        if listing is None:
            return frozenset()
        listing.files()                      # the staging directories as of now
        jobs = listing.pending_jobs()
        on_disk = listing.files() - self._invisible.get(table, frozenset())
        listed = {f: job_of(p) for f in spark_files for p in [local_path(f)] if p}
        seen = Counter(j for j in listed.values() if j)
        there = Counter(j for j in map(job_of, on_disk) if j in seen)
        partial = {j for j, n in seen.items() if j in jobs or there[j] > n}
        return frozenset(f for f, j in listed.items() if j in partial)

    def _layout(self, table: str) -> Layout | None:
        layout = self._layouts.get(table)
        if layout is None:
            with self._lock:
                start = table not in self._loading
                self._loading.add(table)
            if start:
                threading.Thread(target=self._load_in_background, args=(table,), daemon=True,
                                 name=f"layout-{table}"[:60]).start()
        return layout

    def _load_in_background(self, table: str) -> None:
        try:
            self.load_layouts([table])
        finally:
            with self._lock:
                self._loading.discard(table)

    # -- the check (the query path: stats only) ---------------------------------------------
    def check(self, name: str, covered: Covered, budget_s: float = 0.0,
              compensable: Callable[[str], str | None] = lambda _t: None,
              since: float | None = None) -> Verdict:
        """The verdict for datamap `name`. `compensable(table)`: why new files of `table`
        alone cannot be answered by union compensation (outer join, self join), or None.
        `since`: time.monotonic() when the statement arrived (None: now); files written by
        a write through the proxy that began after it may be held back (_held_back)."""
        now = time.time()
        if budget_s > 0 and now - max(covered.as_of, self._verified.get(name, 0.0)) <= budget_s:
            return Verdict(FRESH, "within max_staleness")
        since = time.monotonic() if since is None else since
        new: dict[str, tuple[str, ...]] = {}
        unverified = []
        held = 0
        for table, files in covered.files.items():
            layout = self._layout(table)
            if layout is None:       # being loaded (a load failed at the last sync)
                unverified.append(f"{table} (its file locations are not known yet)")
                continue
            if not layout.local or files is None:
                unverified.append(table)
                continue
            listing = self._listings.get(table)
            if listing is None:      # forgotten meanwhile (DROP TABLE)
                unverified.append(f"{table} (its file locations are not known yet)")
                continue
            removed, added = self._diff(name, table, files, listing)
            if added and listing.staging():
                # a job is writing into the table. Its pending files are read first, the
                # table's files after: a job with a file still pending then had not finished
                # its commit, and every file it moved in by the second look is held back
                jobs = listing.pending_jobs()
                removed, added = self._diff(name, table, files, listing)
                committing = {f for f in added if job_of(f) in jobs} if jobs else set()
                if committing:
                    held += len(committing)
                    added = tuple(f for f in added if f not in committing)
            if removed:
                return self._changed(table, f"{removed} file{'s' if removed > 1 else ''} of "
                                            f"{table} removed or replaced")
            if added and table in self._writing:
                later = self._held_back(table, added, since)
                if later:
                    held += len(later)
                    added = tuple(f for f in added if f not in later)
            if added:
                new[table] = added
        if not new:
            if unverified:
                return Verdict(UNVERIFIED, "cannot list " + ", ".join(sorted(unverified)),
                               held=held)
            if held:     # fresh as of before those writes, not now: no max_staleness credit
                return Verdict(FRESH, held=held)
            self._verified[name] = now
            return Verdict(FRESH)
        tables = tuple(new)
        for table in tables:
            self._request(table)
        if len(new) > 1:
            return Verdict(CHANGED, "new files in " + " and ".join(tables), tables=tables)
        table, files = next(iter(new.items()))
        why = compensable(table) or self._uncompensable(table, files)
        if why:
            return Verdict(CHANGED, f"{len(files)} new files of {table}, not compensable: {why}",
                           tables=tables)
        return Verdict(NEW, new=new, tables=tables, held=held)

    def _diff(self, name: str, table: str, covered: frozenset[str],
              listing: Listing) -> tuple[int, tuple[str, ...]]:
        """(files removed, files added) of `table` against what datamap `name` covers; the
        set arithmetic is redone only when the listing or the coverage changed."""
        current = listing.files()
        invisible = self._invisible.get(table, frozenset())
        key = (name, table)
        memo = self._memo.get(key)
        if memo is not None and memo[0] is current and memo[1] is covered and memo[2] is invisible:
            return memo[3]
        out = (len(covered - current), tuple(sorted(current - covered - invisible)))
        self._memo[key] = (current, covered, invisible, out)
        if (out[0] or out[1]) and (memo is None or memo[3] != out):
            self.note_change(table)     # news: sessions that listed it before refresh it
        return out

    def _changed(self, table: str, reason: str) -> Verdict:
        self._request(table)
        return Verdict(CHANGED, reason, tables=(table,))

    def _uncompensable(self, table: str, files: tuple[str, ...]) -> str | None:
        layout = self._layouts[table]
        if len(files) > MAX_COMPENSATED_FILES:
            return f"over {MAX_COMPENSATED_FILES} files"
        if layout.hive and layout.cached:
            return "a cached Hive-format table's rows carry no file name"
        if layout.external:   # a view: its rows carry no file name (ADD SEGMENT refreshes)
            return "an external-format table's view has no file names to filter on"
        odd = next((f for f in files if not _PLAIN_PATH.fullmatch(f)), None)
        return f"path {odd!r} has characters a file filter cannot spell" if odd else None

    def relation(self, table: str, files: Iterable[str]) -> str:
        """Spark SQL reading only `files` of `table`: (SELECT * FROM t WHERE <file> IN ...)."""
        hive = self._layouts[table].hive
        column = ("regexp_replace(input_file_name(), '^file://(localhost)?/', 'file:/')"
                  if hive else "_metadata.file_path")
        names = ", ".join(f"'file:{f}'" for f in sorted(files))
        return f"(SELECT * FROM {quote_table(table)} WHERE {column} IN ({names}))"
