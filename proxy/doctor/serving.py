"""doctor's check of the in-process serving engine: started as `serve` starts it (the same
LocalEngine, its Python UDF registered, the same [serving] threads and memory_limit), then
asked its check query. What fails here fails in serve too: serve then logs the same cause
and fix as an ERROR and every datamap answer comes from Spark (docs/serving.md). And the
segment mirror's directory (check_serving_mirror)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from proxy.doctor.checks import FAIL, PASS, WARN, Check

NAME = "serving engine"


def check_serving_engine(enabled: bool = True, threads: int = 2,
                         memory_limit: str = "1GB") -> Check:
    if not enabled:
        return Check(NAME, PASS, "[serving] enabled = false: datamap answers come from Spark "
                                 "(not checked)")
    from proxy.serving.engine import EngineUnavailable, LocalEngine
    try:
        engine = LocalEngine(threads, memory_limit, workers=1)
    except EngineUnavailable as e:
        return _failed(e)
    try:
        engine.check()
    except EngineUnavailable as e:
        return _failed(e)
    finally:
        engine.close()
    return Check(NAME, PASS, f"DuckDB {engine.version} started and answered a query "
                             f"(threads={threads}, memory_limit={memory_limit})")


def _failed(e) -> Check:
    return Check(NAME, FAIL, f"{e.engine} could not start: {e.cause}; serve would answer every "
                             "datamap query on Spark", e.fix)


MIRROR = "serving mirror"


def check_serving_mirror(state_dir: Path, enabled: bool = True, mode: str = "auto",
                         max_bytes: int = 4 << 30) -> Check:
    """The segment mirror's directory (`<state dir>/serving-mirror`, proxy/serving/mirror.py):
    writable, within `[serving] mirror_max_bytes`, and on a disk with room for the budget."""
    from proxy.serving.mirror import DIR_NAME
    if not enabled or mode == "off":
        return Check(MIRROR, PASS, "not used ([serving] enabled = false or mirror = off): "
                                   "segments the proxy cannot open are answered by Spark")
    root = Path(state_dir) / DIR_NAME
    where = root if root.is_dir() else Path(state_dir)
    problem = _unwritable(root, where)
    if problem:
        return Check(MIRROR, FAIL, f"{problem}: segments the proxy cannot open would never be "
                                   "mirrored, and their answers come from Spark",
                     f"make {root} a directory writable by the user serve runs as")
    used = sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.is_dir() else 0
    if used > max_bytes:
        return Check(MIRROR, WARN, f"{root} holds {used} bytes, over [serving] mirror_max_bytes "
                                   f"({max_bytes})", "serve evicts the least recently served "
                     "segments at its next copy; raise [serving] mirror_max_bytes to keep them")
    probe = where if where.exists() else where.parent
    free = shutil.disk_usage(probe).free if probe.exists() else 0
    if free + used < max_bytes:
        return Check(MIRROR, WARN, f"{root}: mode {mode}, {used} bytes held; the disk has "
                                   f"{free} bytes free, less than the budget ({max_bytes})",
                     "free disk space or lower [serving] mirror_max_bytes: a full disk sends "
                     "the answers of segments not mirrored to Spark")
    return Check(MIRROR, PASS, f"{root}: mode {mode}, {used} of {max_bytes} bytes held, "
                               f"writable, {free} bytes free on its disk")


def _unwritable(root: Path, where: Path) -> str | None:
    """Why a copy could not be written under `root` (tried for real), or None."""
    if root.exists() and not root.is_dir():
        return f"{root} is not a directory"
    if not where.exists():
        return None                      # serve creates it with the state directory
    try:
        fd, name = tempfile.mkstemp(prefix=".doctor-", dir=where)
    except OSError as e:
        return f"{where} is not writable ({e.strerror})"
    os.close(fd)
    os.unlink(name)
    return None
