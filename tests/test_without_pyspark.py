"""The pure tier (`-m "not spark"`) is collected where pyspark is not installed.

Only the tests marked spark need a Spark; the others must not even import pyspark, so a
checkout with the runtime dependencies less pyspark (and the test extra) can run them. The
check runs pytest's collection of the whole suite in a subprocess whose import system does
not see pyspark or py4j (a sitecustomize on PYTHONPATH swaps PathFinder, as
tests/support/engine_down.py does for numpy): `import pyspark` raises ModuleNotFoundError
there exactly as where it is not installed. A module that imports pyspark at its top, in
tests/ (a conftest or tests/support) or in the code they import, fails that collection.

Collecting the whole tree costs about as much CPU as a tenth of the pure tier, so where this
process has just collected every test module itself (a run of the whole suite or tier), the
collection check reads what that collection imported instead: every test module and no
pyspark or py4j means the same collection without pyspark takes the same path (an import
of pyspark, guarded by try/except ImportError or not, would be in sys.modules). A run of
fewer modules collects the tree in the subprocess.

The fast check reads the sources instead: no module of tests/, proxy/, pipeline/ or
rewriter/ imports pyspark or py4j at module level (inside a function, or under
`if TYPE_CHECKING:`, is fine), since pytest imports every test module, spark-marked ones
too, before it deselects any.
"""
from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.support import collected

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


HIDDEN = ("pyspark", "py4j")


def _module_level_spark_imports(root: Path) -> list[str]:
    """file:line of each import of pyspark or py4j that runs when the module is imported."""
    found = []

    def visit(body, path):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                visit(node.orelse, path)
                continue
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            else:
                names = []
            if any(n.split(".")[0] in HIDDEN for n in names):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
            for field in ("body", "orelse", "finalbody", "handlers"):   # a class body runs too
                if isinstance(inner := getattr(node, field, None), list):
                    visit(inner, path)

    for package in ("tests", "proxy", "pipeline", "rewriter"):
        for path in sorted((root / package).rglob("*.py")):
            if "/gen/" not in path.as_posix():
                visit(ast.parse(path.read_text(), str(path)).body, path)
    return found


def test_nothing_imports_pyspark_at_module_level():
    assert _module_level_spark_imports(ROOT) == []


def test_the_module_level_check_sees_nested_and_skips_lazy_imports(tmp_path):
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_x.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pyspark.sql import DataFrame\n"
        "def f():\n    import pyspark\n"
        "try:\n    import py4j.java_gateway\nexcept ImportError:\n    pass\n"
        "class C:\n    from pyspark import SparkConf\n")
    assert _module_level_spark_imports(tmp_path) == ["tests/test_x.py:7", "tests/test_x.py:11"]


def _test_modules(root: Path) -> set[str]:
    return {".".join(p.relative_to(root).with_suffix("").parts)
            for p in (root / "tests").rglob("test_*.py")}


def test_pure_tier_collects_without_pyspark(tmp_path):
    imported = collected.AFTER_COLLECTION
    if _test_modules(ROOT) <= imported:          # this process collected the whole tree
        assert sorted(m for m in imported if m.split(".")[0] in HIDDEN) == []
        return
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
