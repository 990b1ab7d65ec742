"""A base table's data files as the proxy sees them on local disk, cheaply, for the
freshness guard (proxy/datamaps/freshness/guard.py): no Spark, no metastore.

A `Listing` walks a table's roots (its location and its partitions' locations, from
pipeline.table_layout) and keeps each directory's entries with the directory's mtime. A
later look stats every known directory and reads again only those whose mtime changed, so
an unchanged table of 1,000 files in one directory costs one stat. Adding, removing or
renaming a file changes its directory's mtime; rewriting a file in place under the same
name does not (Spark and Hive never do that: every write makes new file names).

File timestamps are coarse (the kernel's clock tick, a few ms), so a file added in the
same tick right after a read would leave the mtime unchanged: a directory modified less
than RACY_NS before it was read is read again at every look until it has been quiet that
long (git's "racily clean" rule).

Hidden names are skipped as Spark's file index skips them: `.x`, `_x` (unless it holds a
`=`, a partition directory), and `x._COPYING_` (a copy in progress).

Among them, a write job's staging directories are remembered (`staging()`): Spark's
committer writes a job's files under `<table>/_temporary/` (`.spark-staging-<job>` for
dynamic partition overwrites, `.hive-staging_*` for Hive-format tables) and at job commit
moves them into the table one by one. `pending_jobs()` reads them: the job ids (the UUID
in `part-00000-<uuid>-c000...`, the same for every file of one job) of files not moved
yet. A file in the table whose job is pending is part of a commit in progress.
"""
from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass
from urllib.parse import unquote

RACY_NS = 2_000_000_000
ABANDONED_NS = 60_000_000_000
# a write job's staging directories (hidden names) and the job id in Spark's file names
_STAGING = re.compile(r"_temporary|\.spark-staging-.*|\.hive-staging.*")
_JOB = re.compile(r"part-\d+-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})")


def job_of(path: str) -> str | None:
    """The write job id in a file name Spark wrote (`part-00001-<uuid>-c000.snappy.parquet`),
    None for other names (a copied file, another writer's)."""
    m = _JOB.match(os.path.basename(path))
    return m.group(1) if m else None


def hidden(name: str) -> bool:
    return (name.startswith(".") or (name.startswith("_") and "=" not in name)
            or name.endswith("._COPYING_"))


def local_path(uri: str) -> str | None:
    """`file:/w/p=a%20b/f` (the catalog's encoded spelling) -> `/w/p=a b/f`; None for
    other file systems (hdfs:, s3a:), which the proxy cannot list itself."""
    if uri.startswith("file:"):
        rest = uri[len("file:"):]
        if rest.startswith("//"):               # file:///x, file://localhost/x
            rest = "/" + rest[2:].partition("/")[2]
        return unquote(rest)
    if uri.startswith("/"):
        return uri
    return None


def local_bytes(files) -> int | None:
    """Total size of `files`, None when one is not on a local file system; a file gone
    meanwhile (a superseded segment's cleanup, a compaction) counts 0."""
    total = 0
    for f in files:
        path = local_path(f)
        if path is None:
            return None
        try:
            total += os.stat(path).st_size
        except OSError:
            pass
    return total


@dataclass
class _Dir:
    mtime_ns: int
    files: tuple[str, ...]
    subdirs: tuple[str, ...]
    settled: bool            # read well after its last change: trust the mtime
    staging: tuple[str, ...] = ()    # write jobs' staging directories in it


class Listing:
    """The files under `roots` (local paths), looked at again cheaply. Thread-safe."""

    def __init__(self, roots: tuple[str, ...]):
        self.roots = roots
        self._dirs: dict[str, _Dir] = {}
        self._files: frozenset[str] = frozenset()
        self._staging: tuple[str, ...] = ()
        self._lock = threading.Lock()
        self.looked_at = 0.0     # time.time() of the last look
        self.reads = 0           # directories read (not just stat'ed): for tests and bench

    def files(self) -> frozenset[str]:
        """The current files. The same object as last time when nothing changed."""
        with self._lock:
            changed, seen, inodes = False, set(), set()
            for root in self.roots:
                changed |= self._look(root, seen, inodes)
            for gone in [d for d in self._dirs if d not in seen]:
                del self._dirs[gone]
                changed = True
            if changed:
                self._files = frozenset(f for d in self._dirs.values() for f in d.files)
                self._staging = tuple(s for d in self._dirs.values() for s in d.staging)
            self.looked_at = time.time()
            return self._files

    def staging(self) -> tuple[str, ...]:
        """Write jobs' staging directories seen at the last look (no I/O)."""
        return self._staging

    def pending_jobs(self) -> frozenset[str]:
        """The ids of write jobs with files still under a staging directory now: files of
        these jobs in the table are part of a commit in progress. Read again at every call
        (a staging directory exists only while a job writes). A staging tree in which no
        directory changed for ABANDONED_NS is left over from a job that died (Spark's
        readers see the files it moved in, so the proxy must too): its jobs do not count.
        A commit going on renames files out of its directories all the time."""
        jobs: set[str] = set()
        now = time.time_ns()
        for top in self._staging:
            newest, found = 0, set()
            for dirpath, _dirs, names in os.walk(top):
                try:
                    newest = max(newest, os.stat(dirpath).st_mtime_ns)
                except OSError:          # emptied and removed meanwhile
                    pass
                found.update(j for j in map(job_of, names) if j)
            if found and now - newest < ABANDONED_NS:
                jobs |= found
        return frozenset(jobs)

    def _look(self, path: str, seen: set[str], inodes: set[tuple[int, int]]) -> bool:
        if path in seen:             # a partition inside the table's directory
            return False
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return False
        if (st.st_dev, st.st_ino) in inodes:   # a symbolic link back up the tree
            return False
        inodes.add((st.st_dev, st.st_ino))
        seen.add(path)
        entry = self._dirs.get(path)
        changed = False
        if entry is None or not entry.settled or entry.mtime_ns != st.st_mtime_ns:
            now = time.time_ns()
            files, subdirs, staging = [], [], []
            with os.scandir(path) as it:
                for e in it:
                    if hidden(e.name):
                        if _STAGING.fullmatch(e.name) and e.is_dir():
                            staging.append(e.path)
                        continue
                    (subdirs if e.is_dir() else files).append(e.path)
            self.reads += 1
            files.sort()
            subdirs.sort()
            new = _Dir(st.st_mtime_ns, tuple(files), tuple(subdirs),
                       now - st.st_mtime_ns > RACY_NS, tuple(sorted(staging)))
            changed = (entry is None or entry.files != new.files or entry.subdirs != new.subdirs
                       or entry.staging != new.staging)
            self._dirs[path] = entry = new
        for sub in entry.subdirs:
            changed |= self._look(sub, seen, inodes)
        return changed
