"""The mirror's files on disk (`<state dir>/serving-mirror/`), and nothing else: one
directory per datamap storage table, one per segment inside it, named by the segment id and
a digest of the catalog's file list:

    serving-mirror/db1.agg_table/3-5f1c0a9e2b7d/00000-part-00000-....parquet
                                              /MANIFEST.json

A segment is copied into a hidden `.<name>.tmp` directory, file by file; the manifest (each
file's catalog URI, length and modification time as the source reported them, before and
after the copy) is written last, and the directory is renamed into place in one step. So a
segment directory exists only complete: a kill -9 mid-copy leaves a hidden temporary
directory, which `scan()` removes at the next start and which is never read.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence
from urllib.parse import quote, unquote, urlparse

MANIFEST = "MANIFEST.json"


@dataclass(frozen=True)
class SegmentKey:
    """A visible segment as the catalog lists it: the storage table the rewritten SQL
    reads, the segment id and its files. The files are part of the key: a datamap dropped
    and created again reuses segment ids, not files."""
    table: str
    sid: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class Copied:
    """A complete segment directory."""
    key: SegmentKey
    directory: Path
    paths: tuple[str, ...]          # local copies, in the order of key.files
    sources: tuple[tuple[int, int], ...]   # (length, mtime ms) per file, as the source said
    seconds: float                  # how long the copy took

    @property
    def bytes(self) -> int:
        return sum(size for size, _ in self.sources)

    def intact(self) -> bool:
        """Every copy still there with the length its source had."""
        try:
            return all(os.stat(p).st_size == size for p, (size, _) in zip(self.paths, self.sources))
        except OSError:
            return False


def segment_dir(root: Path, key: SegmentKey) -> Path:
    digest = hashlib.sha256("\n".join(key.files).encode()).hexdigest()[:12]
    return root / quote(key.table, safe="") / f"{quote(key.sid, safe='')}-{digest}"


def _local_name(i: int, uri: str) -> str:
    base = unquote(urlparse(uri).path.rsplit("/", 1)[-1]) or "file"
    return f"{i:05d}-{quote(base, safe='.-_=')}"[:200]


def write_segment(root: Path, key: SegmentKey, sources: Sequence[tuple[int, int]],
                  copy: Callable[[str, str], None], after: Callable[[], Sequence[tuple[int, int]]],
                  seconds: Callable[[], float]) -> Copied:
    """Copy the segment's files into place: `copy(uri, local)` each into the temporary
    directory, each copy's length checked against `sources`, `after()` (the sources' status
    again) compared with `sources`, then the manifest, then one rename. Raises OSError (a
    full disk, say) or CopyMismatch; the temporary directory is removed then."""
    final = segment_dir(root, key)
    tmp = final.with_name(f".{final.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        names = []
        for i, (uri, (size, _)) in enumerate(zip(key.files, sources)):
            name = _local_name(i, uri)
            copy(uri, str(tmp / name))
            got = (tmp / name).stat().st_size
            if got != size:
                raise CopyMismatch(f"copied {got} bytes of {uri}, whose length is {size}")
            names.append(name)
        if tuple(map(tuple, after())) != tuple(map(tuple, sources)):
            raise CopyMismatch("its files changed while they were copied")
        took = seconds()
        manifest = {"table": key.table, "segment": key.sid, "seconds": round(took, 6),
                    "files": [{"uri": u, "name": n, "length": s, "mtime_ms": m}
                              for u, n, (s, m) in zip(key.files, names, sources)]}
        with open(tmp / MANIFEST, "w") as f:
            json.dump(manifest, f)
            f.flush()
            os.fsync(f.fileno())
        shutil.rmtree(final, ignore_errors=True)
        os.rename(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return Copied(key, final, tuple(str(final / n) for n in names), tuple(sources), took)


class CopyMismatch(Exception):
    """A copy that is not the source's bytes (length differs, or the source changed)."""


def read_segment(directory: Path) -> Copied | None:
    """A segment directory's manifest; None when it has none or it cannot be read."""
    try:
        m = json.loads((directory / MANIFEST).read_text())
        files = m["files"]
        key = SegmentKey(str(m["table"]), str(m["segment"]), tuple(f["uri"] for f in files))
        return Copied(key, directory, tuple(str(directory / f["name"]) for f in files),
                      tuple((int(f["length"]), int(f["mtime_ms"])) for f in files),
                      float(m.get("seconds", 0.0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def scan(root: Path) -> list[Copied]:
    """What a start finds: the complete segments, each intact and where its key puts it.
    Everything else (temporary directories of a copy a kill interrupted, a directory
    without a manifest or with a copy of the wrong length, stray files) is removed."""
    root.mkdir(parents=True, exist_ok=True)
    found = []
    for table_dir in sorted(root.iterdir()):
        if not table_dir.is_dir():
            table_dir.unlink(missing_ok=True)
            continue
        for d in sorted(table_dir.iterdir()):
            seg = None if d.name.startswith(".") or not d.is_dir() else read_segment(d)
            if seg is not None and seg.intact() and segment_dir(root, seg.key) == d:
                found.append(seg)
            elif d.is_dir():
                shutil.rmtree(d, ignore_errors=True)
            else:
                d.unlink(missing_ok=True)
        if not any(table_dir.iterdir()):
            table_dir.rmdir()
    return found


def remove(seg: Copied) -> None:
    shutil.rmtree(seg.directory, ignore_errors=True)
    try:
        seg.directory.parent.rmdir()          # the table's directory, once empty
    except OSError:
        pass
