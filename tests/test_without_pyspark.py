"""The pure tier (`-m "not spark"`) is collected where pyspark is not installed.

Only the tests marked spark need a Spark; the others must not even import pyspark, so a
checkout with the runtime dependencies less pyspark (and the test extra) can run them. The
check runs pytest's collection of the whole suite in a subprocess whose import system does
not see pyspark or py4j (a sitecustomize on PYTHONPATH swaps PathFinder, as
tests/support/engine_down.py does for numpy): `import pyspark` raises ModuleNotFoundError
there exactly as where it is not installed. A module that imports pyspark at its top, in
tests/ (a conftest or tests/support) or in the code they import, fails that collection.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SITECUSTOMIZE = '''"""pyspark hidden from this process (tests/test_without_pyspark.py)."""
import sys
from importlib.machinery import PathFinder

HIDDEN = ("pyspark", "py4j")


class WithoutPyspark(PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            return None
        return super().find_spec(name, path, target)

    @classmethod
    def find_distributions(cls, *args, **kwargs):
        return (d for d in super().find_distributions(*args, **kwargs)
                if (d.metadata["Name"] or "").lower() not in HIDDEN)


sys.meta_path[:] = [WithoutPyspark if f is PathFinder else f for f in sys.meta_path]
'''


def test_pure_tier_collects_without_pyspark(tmp_path):
    shim = tmp_path / "no_pyspark"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(shim)])
    hidden = subprocess.run([sys.executable, "-c", "import pyspark"], env=env, cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert "No module named 'pyspark'" in hidden.stderr, "the shim did not hide pyspark"

    got = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "not spark",
         "-p", "no:cacheprovider", "tests"],
        env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)
    out = got.stdout + got.stderr
    assert got.returncode == 0, out[-4000:]
    assert not re.search(r"\berrors?\b", out.splitlines()[-1]), out[-4000:]
    assert re.search(r"^\d+/\d+ tests collected", out.splitlines()[-1]), out[-4000:]
