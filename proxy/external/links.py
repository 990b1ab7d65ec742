"""The files of external-format tables on the local file system: which data files ADD
SEGMENT's paths name, and the symbolic links that map them into the source table's
location (one directory per segment) without moving, copying or deleting them.

A segment becomes visible to Spark by one rename: its links are made in a hidden staging
directory (`.staging_<id>`, which Spark's listing skips as it skips every name starting
with `.` or `_`), then renamed to `seg_<id>`. Removing a segment unlinks its links; the
files they point to are never touched (os.unlink of a link removes the link only).
"""
from __future__ import annotations

import logging
import os
import re
import shutil
from urllib.parse import quote, unquote, urlparse

from proxy.routing.sqlscan import StatementError

log = logging.getLogger("proxy.external")

STAGING_PREFIX = ".staging_"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def hidden(name: str) -> bool:
    """Names Spark's file listing skips (and so does ADD SEGMENT in a directory)."""
    return name.startswith((".", "_"))


def resolve(table: str, raw: str) -> str:
    """A path as written (plain absolute path or file: URI) -> its real absolute path."""
    path = raw
    if raw.lower().startswith("file:"):
        parsed = urlparse(raw)
        if parsed.netloc not in ("", "localhost"):
            raise StatementError(f"ADD SEGMENT of {table}: path '{raw}' names another host",
                                 "0A000")
        path = unquote(parsed.path)
    elif re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", raw):
        raise StatementError(f"ADD SEGMENT of {table}: path '{raw}' is not on the local file "
                             "system (only plain paths and file: URIs)", "0A000")
    if not os.path.isabs(path):
        raise StatementError(f"ADD SEGMENT of {table}: path '{raw}' is not absolute", "42000")
    if not os.path.exists(path):
        raise StatementError(f"ADD SEGMENT of {table}: path '{raw}' does not exist", "42000")
    return os.path.realpath(path)


def data_files(path: str) -> list[str]:
    """`path` itself when a file; else every file below it, without hidden names, sorted."""
    if not os.path.isdir(path):
        return [path]
    found = []
    for root, dirs, files in os.walk(path, followlinks=True):
        dirs[:] = sorted(d for d in dirs if not hidden(d))
        found += [os.path.realpath(os.path.join(root, f)) for f in sorted(files) if not hidden(f)]
    return found


def segment_files(table: str, raw_paths: tuple[str, ...],
                  mapped: dict[str, int]) -> list[str]:
    """The data files of one ADD SEGMENT, in order. Refuses (naming the path) duplicate or
    overlapping paths, a path without a data file, and files that `mapped` (original file
    -> live segment id) already maps."""
    resolved = [(raw, resolve(table, raw)) for raw in raw_paths]
    for i, (raw_a, a) in enumerate(resolved):
        for raw_b, b in resolved[i + 1:]:
            if a == b:
                raise StatementError(f"ADD SEGMENT of {table}: path '{raw_b}' is given twice "
                                     f"(as '{raw_a}')", "42000")
            if b.startswith(a.rstrip(os.sep) + os.sep) or a.startswith(b.rstrip(os.sep) + os.sep):
                raise StatementError(f"ADD SEGMENT of {table}: paths '{raw_a}' and '{raw_b}' "
                                     "overlap", "42000")
    files: list[str] = []
    seen: dict[str, str] = {}
    for raw, path in resolved:
        found = data_files(path)
        if not found:
            raise StatementError(f"ADD SEGMENT of {table}: path '{raw}' holds no data file "
                                 "(names starting with '.' or '_' are skipped)", "42000")
        for f in found:
            if f in seen:        # two links reaching one file
                raise StatementError(f"ADD SEGMENT of {table}: file {f} is reached through "
                                     f"both '{seen[f]}' and '{raw}'", "42000")
            seen[f] = raw
            if f in mapped:
                raise StatementError(f"ADD SEGMENT of {table}: file {f} (under '{raw}') is "
                                     f"already mapped by segment {mapped[f]}", "42000")
        files += found
    return files


def spark_path(path: str) -> str:
    """A local path as Spark's `_metadata.file_path` spells it (`file:/x`, URI-encoded)."""
    return "file:" + quote(path, safe="/._-~!$&'()*+,;=:@")


def link_name(index: int, target: str) -> str:
    """Unique in its segment, never hidden, keeping the extension (.gz: Spark picks the
    codec by it)."""
    return f"f{index:05d}_{_UNSAFE.sub('_', os.path.basename(target))}"


def stage(location: str, seg_id: int, files: list[str]) -> list[tuple[str, str, str]]:
    """Links to `files` in `<location>/.staging_<id>`: [(staged path, final path, target)]
    in Spark's spelling (the target as a local path)."""
    staging = os.path.join(location, f"{STAGING_PREFIX}{seg_id}")
    final = os.path.join(location, f"seg_{seg_id}")
    if os.path.lexists(final):
        raise StatementError(f"segment directory {final} exists already; the catalog and the "
                             "links disagree (restart the proxy to reconcile them)", "HY000")
    shutil.rmtree(staging, ignore_errors=True)
    os.makedirs(staging)
    out = []
    for i, target in enumerate(files):
        name = link_name(i, target)
        os.symlink(target, os.path.join(staging, name))
        out.append((spark_path(os.path.join(staging, name)), spark_path(os.path.join(final, name)),
                    target))
    return out


def publish(location: str, seg_id: int) -> None:
    os.rename(os.path.join(location, f"{STAGING_PREFIX}{seg_id}"),
              os.path.join(location, f"seg_{seg_id}"))


def discard(location: str, seg_id: int, published: bool = False) -> None:
    """Remove a segment's links (staged, or published), never what they point to."""
    name = f"seg_{seg_id}" if published else f"{STAGING_PREFIX}{seg_id}"
    unlink_dir(os.path.join(location, name))


def local(link: str) -> str:
    return unquote(urlparse(link).path)


def unlink_dir(directory: str) -> None:
    """Remove a directory of links: each link is unlinked, so no target is followed."""
    if not os.path.isdir(directory) or os.path.islink(directory):
        return
    for entry in os.scandir(directory):
        if entry.is_symlink() or entry.is_file(follow_symlinks=False):
            os.unlink(entry.path)
        elif entry.is_dir(follow_symlinks=False):
            unlink_dir(entry.path)
    os.rmdir(directory)


def unlink_files(links: list[str]) -> None:
    """Remove these links (Spark-spelled), and their segment directories once empty."""
    dirs = set()
    for link in links:
        path = local(link)
        if os.path.islink(path):
            os.unlink(path)
        dirs.add(os.path.dirname(path))
    for d in dirs:
        try:
            os.rmdir(d)
        except OSError:
            pass          # other live links remain (a compacted segment's dir)


def reconcile(location: str, live: dict[str, str]) -> list[str]:
    """At start: drop staging directories and links the catalog does not know (a crash
    between rename and catalog commit), and make again links it knows that are missing.
    `live`: link (Spark spelling) -> target. Returns what it changed, for the log."""
    changed = []
    if not os.path.isdir(location):
        os.makedirs(location, exist_ok=True)
    wanted = {local(link): target for link, target in live.items()}
    for entry in os.scandir(location):
        if entry.name.startswith(STAGING_PREFIX):
            unlink_dir(entry.path)
            changed.append(f"removed {entry.path}")
        elif entry.is_dir(follow_symlinks=False):
            for link in os.scandir(entry.path):
                if link.path not in wanted:
                    os.unlink(link.path)
                    changed.append(f"removed {link.path}")
            if not any(os.scandir(entry.path)):
                os.rmdir(entry.path)
    for path, target in wanted.items():
        if not os.path.lexists(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)
            os.symlink(target, path)
            changed.append(f"restored {path}")
    return changed
