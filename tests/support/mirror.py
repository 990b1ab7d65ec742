"""Readers of the warehouse for the segment mirror's tests without Spark: `file:` URIs read
with Python (the forced mirror of local files), and faults: a full disk, a copy that stops
half-way and waits to be killed. The Spark one (pipeline/copies.py) runs in
tests/e2e/test_mirror_viewfs.py."""
from __future__ import annotations

import errno
import os
import shutil
import sys
import time

from proxy.serving.tier import local_path


class LocalFiles:
    """Hadoop's FileSystem for `file:` URIs, as Python reads them."""

    def __init__(self):
        self.copies = 0

    def status(self, uri: str) -> tuple[int, int]:
        st = os.stat(local_path(uri))
        return st.st_size, st.st_mtime_ns // 1_000_000

    def copy(self, uri: str, local: str) -> None:
        shutil.copyfile(local_path(uri), local)
        self.copies += 1


class FullDisk(LocalFiles):
    """Writes half of a file, then fails as a full disk does."""

    def copy(self, uri: str, local: str) -> None:
        data = open(local_path(uri), "rb").read()
        with open(local, "wb") as f:
            f.write(data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), local)


class StallsMidCopy(LocalFiles):
    """Writes half of a file, says so on stdout, then waits (to be killed with -9)."""

    def copy(self, uri: str, local: str) -> None:
        data = open(local_path(uri), "rb").read()
        with open(local, "wb") as f:
            f.write(data[: len(data) // 2])
            f.flush()
        print("mid-copy", local, flush=True)
        sys.stdout.flush()
        time.sleep(600)
