"""A real Apache Superset for the tests and the bench, in a virtual environment of its own:
Superset pulls in pandas and numpy, which must never enter the environment the project is
tested in (they would hide an undeclared dependency).

The environment is built once per content of tests/fixtures/superset/requirements.txt (every
version pinned) and the Python version, under $XDG_CACHE_HOME/datamap-proxy-tests (default
~/.cache/datamap-proxy-tests), so a second run reuses it. `generate` runs
tests/fixtures/superset/generate.py there: Superset's chart-data API writes each chart's SQL."""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.support.package import outside_env

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "superset"
REQUIREMENTS = FIXTURES / "requirements.txt"
GENERATOR = FIXTURES / "generate.py"
STATEMENTS = FIXTURES / "statements.json"

# what pip prints when it cannot reach the package index (no network, no proxy)
_UNREACHABLE = ("NewConnectionError", "Temporary failure in name resolution",
                "Network is unreachable", "Failed to establish a new connection",
                "ConnectTimeoutError", "ProxyError")


class IndexUnreachable(RuntimeError):
    """The package index could not be reached to build Superset's environment."""


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "datamap-proxy-tests"


def venv_path() -> Path:
    key = hashlib.sha256(REQUIREMENTS.read_bytes()
                         + f"{sys.version_info[0]}.{sys.version_info[1]}".encode())
    return cache_root() / f"superset-{key.hexdigest()[:16]}"


def venv(timeout: float = 1800.0) -> tuple[Path, float | None]:
    """Superset's environment (built now if it is not cached) and the seconds the build
    took (None when it was cached). `.complete` is written last, so a build cut short is
    never taken for a cached one: it is removed and built again."""
    path = venv_path()
    if (path / ".complete").exists():
        return path, None
    started = time.monotonic()
    shutil.rmtree(path, ignore_errors=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(["python3", "-m", "venv", str(path)], capture_output=True,
                          text=True, timeout=300, env=outside_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    proc = subprocess.run([str(path / "bin" / "python"), "-m", "pip", "install", "-q",
                           "--disable-pip-version-check", "-r", str(REQUIREMENTS)],
                          capture_output=True, text=True, timeout=timeout,
                          env=outside_env(path))
    if proc.returncode != 0:
        shutil.rmtree(path, ignore_errors=True)
        out = proc.stdout[-2000:] + proc.stderr[-4000:]
        if any(m in out for m in _UNREACHABLE):
            raise IndexUnreachable(f"pip could not reach the package index: {out[-600:]}")
        raise AssertionError(f"building Superset's environment failed:\n{out}")
    took = time.monotonic() - started
    (path / ".complete").write_text(f"built in {took:.1f} s\n")
    return path, took


def generate(env: Path, out: Path, uri: str | None = None, timeout: float = 600.0) -> dict:
    """Superset's SQL for the charts of generate.py, written by the Superset in `env`."""
    args = [str(env / "bin" / "python"), str(GENERATOR), str(out)] + ([uri] if uri else [])
    run_env = outside_env(env)
    run_env["XDG_CACHE_HOME"] = str(out.parent)
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                          env=run_env, cwd=out.parent)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-6000:]
    return json.loads(out.read_text())


def fixture() -> dict:
    """The committed statements (tests/fixtures/superset/statements.json)."""
    return json.loads(STATEMENTS.read_text())
