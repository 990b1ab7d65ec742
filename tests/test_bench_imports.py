"""The bench scripts import the tests' harness, often inside functions that only run at
bench time: every `from tests... import name` in bench/ must name a module and attribute
that exist, so a move in tests/ cannot silently break a bench."""
import ast
import importlib
import pathlib

import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "bench"


def _harness_imports():
    for path in sorted(BENCH.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests"):
                for alias in node.names:
                    yield pytest.param(node.module, alias.name,
                                       id=f"{path.name}:{node.lineno}:{alias.name}")


@pytest.mark.parametrize(("module", "name"), list(_harness_imports()))
def test_bench_harness_import_resolves(module, name):
    try:
        harness = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.split(".")[0] == "pyspark":
            pytest.skip(f"{module} needs pyspark")
        raise
    assert hasattr(harness, name), f"{module} has no {name}"
