"""The layers of ARCHITECTURE.md, checked: a lower layer never imports a higher one.

Every import statement counts, at module level or inside a function (a lazy import is
still a dependency). rewriter is pure (sqlglot and the standard library, no I/O modules);
pipeline is Spark jobs (rewriter, pyspark; no proxy, no asyncio); proxy's protocol core
(proxy/thrift) does no I/O and knows nothing of the proxy above it.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# package -> top-level modules it must never import
FORBIDDEN = {
    "rewriter": {"proxy", "pipeline", "pyspark", "py4j", "asyncio", "socket", "ssl", "sqlite3",
                 "thrift", "subprocess", "urllib", "http"},
    "pipeline": {"proxy", "asyncio", "socket", "ssl", "sqlite3", "thrift"},
    "proxy/thrift": {"proxy", "asyncio", "socket", "ssl", "pyspark", "pipeline", "rewriter"},
}
# proxy/thrift may import itself and the pure log-escaping helper
ALLOWED_PREFIXES = {"proxy/thrift": ("proxy.thrift", "proxy.logsafe")}


def _imports(path: Path):
    tree = ast.parse(path.read_text(), str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def _violations(package: str) -> list[str]:
    out = []
    allowed = ALLOWED_PREFIXES.get(package, ())
    for path in sorted((ROOT / package).rglob("*.py")):
        if "/gen/" in path.as_posix():
            continue     # generated Thrift code
        for line, name in _imports(path):
            if name.startswith(allowed):
                continue
            if name.split(".")[0] in FORBIDDEN[package]:
                out.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return out


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_lower_layers_do_not_import_higher_ones(package):
    assert _violations(package) == []


def test_the_check_sees_lazy_imports(tmp_path, monkeypatch):
    pkg = tmp_path / "rewriter"
    pkg.mkdir()
    (pkg / "bad.py").write_text("def f():\n    from proxy.errors import ClientError\n")
    monkeypatch.setattr(__import__(__name__, fromlist=["ROOT"]), "ROOT", tmp_path)
    assert _violations("rewriter") == ["rewriter/bad.py:2 imports proxy.errors"]


def test_serving_translation_is_pure():
    """The serving tier's translation (translate.py and the modules it reads) is pure
    logic, AST in, SQL text out: no engine, no I/O, nothing of the proxy beyond itself, so
    its allow-list can be tested without either engine."""
    banned = {"proxy", "duckdb", "asyncio", "socket", "sqlite3", "pyspark", "pipeline", "os"}
    pure = ("translate", "expressions", "sqltypes", "timestamps")
    for module in pure:
        path = ROOT / "proxy" / "serving" / f"{module}.py"
        assert [f"{module}:{line} imports {name}" for line, name in _imports(path)
                if name.split(".")[0] in banned
                and name not in {f"proxy.serving.{m}" for m in pure}] == []
