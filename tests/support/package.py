"""The project as a user gets it: a copy of the source tree (what `pip install .` and the
wheel build read, without the checkout's build/ or egg-info) and a new virtual environment
with it installed, for the tests that check what an install ships and does."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support import bytecode

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("proxy", "rewriter", "pipeline", "docs")


def copy_source(dst: Path) -> Path:
    """pyproject.toml, README.md and the packages and docs, copied under `dst`."""
    dst.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, dst / name)
    for pkg in SOURCES:
        shutil.copytree(ROOT / pkg, dst / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    return dst


def fresh_venv(path: Path, source: Path, timeout: float = 1200.0) -> Path:
    """A new virtual environment at `path` (no system site-packages) with `source`
    installed as README's first command installs it (`python3 -m pip install .`): only
    what pyproject.toml declares, resolved from the package index as a user's would be."""
    proc = subprocess.run([sys.executable, "-m", "venv", str(path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    python = path / "bin" / "python"
    proc = subprocess.run([str(python), "-m", "pip", "install", "-q", "--disable-pip-version-check",
                           "."], cwd=source, capture_output=True, text=True, timeout=timeout,
                          env=outside_env())
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    return path


def outside_env(venv: Path | None = None) -> dict[str, str]:
    """This process's environment with nothing of the tests' own Python in it (no
    PYTHONPATH, its bin off PATH); with `venv`, as that environment's own install runs:
    its bin first on PATH."""
    env = {k: v for k, v in bytecode.environ_before().items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PIP_REQUIRE_VIRTUALENV")}
    mine = Path(sys.prefix) / "bin"
    path = [d for d in env.get("PATH", "").split(os.pathsep) if d and Path(d) != mine]
    if venv is not None:
        path.insert(0, str(venv / "bin"))
        env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = os.pathsep.join(path)
    return env
