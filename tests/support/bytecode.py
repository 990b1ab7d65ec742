"""Compiled modules for the processes the tests start, where Python is told not to write
bytecode (PYTHONDONTWRITEBYTECODE, `-B`).

Each proxy, lease worker, CLI run or rewrite process a test starts imports the project
afresh. Without bytecode next to the sources every one of them compiles every module it
imports again: about 0.6 s of CPU per process, most of its start-up. `share()` compiles
the project's modules once, into a directory of the run's own, and has the processes
started after it keep their bytecode there (PYTHONPYCACHEPREFIX): the first one writes
what it compiled of the rest (the standard library and the dependencies: a prefix holds
every module's bytecode), the next ones read it. Nothing is written next to any source,
which is what not writing bytecode is for. This process itself is left as it is (its
imports would be compiled anew under a prefix). Where bytecode is written anyway (next
to the sources), nothing is done.
"""
from __future__ import annotations

import compileall
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# what the processes the tests start import from the checkout
PACKAGES = ("proxy", "rewriter", "pipeline", "tests/support")
ENV = "PYTHONPYCACHEPREFIX"
NO_WRITE = "PYTHONDONTWRITEBYTECODE"
_taken: dict[str, str] = {}     # NO_WRITE as it was before share()
_had_prefix = bool(os.environ.get(ENV))


def share() -> Path | None:
    """Compile PACKAGES into a new directory and give it to the processes started from now
    on; that directory (remove() it at the end), or None when there is nothing to do
    (bytecode is written, or a prefix is set already)."""
    if not sys.dont_write_bytecode or sys.pycache_prefix or os.environ.get(ENV):
        return None
    prefix = Path(tempfile.mkdtemp(prefix="datamap-pycache-"))
    sys.pycache_prefix = str(prefix)        # where compileall writes
    try:
        for pkg in PACKAGES:
            compileall.compile_dir(ROOT / pkg, quiet=2)
        compileall.compile_file(ROOT / "tests" / "__init__.py", quiet=2)
    finally:
        sys.pycache_prefix = None
    os.environ[ENV] = str(prefix)
    if NO_WRITE in os.environ:               # they write, but only under the prefix
        _taken[NO_WRITE] = os.environ.pop(NO_WRITE)
    return prefix


def environ_before() -> dict[str, str]:
    """os.environ as it was before share(): for a process that imports none of the
    project but much else once (pip building a wheel), which the prefix would make
    compile all of it instead of reading the bytecode installed with it."""
    env = dict(os.environ)
    if ENV in env and not _had_prefix:
        del env[ENV]
        env.update(_taken)
    return env


def remove(prefix: Path | None) -> None:
    """Undo share(): the environment as it was, the directory removed."""
    if prefix is None:
        return
    if os.environ.get(ENV) == str(prefix):
        del os.environ[ENV]
        os.environ.update(_taken)
    shutil.rmtree(prefix, ignore_errors=True)
