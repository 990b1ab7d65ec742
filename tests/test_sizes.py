"""Sizes a reader can hold in their head: no module of the product over 450 lines and no
function over 80, generated code (the Thrift bindings) aside. A module that outgrows the
limit is split where its ideas part, not trimmed to fit."""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("proxy", "rewriter", "pipeline")
GENERATED = ("proxy/thrift/gen/",)
MODULE_LINES = 450
FUNCTION_LINES = 80


def _modules():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if not rel.startswith(GENERATED):
                yield rel, path


def test_no_module_is_over_450_lines():
    long = {rel: n for rel, path in _modules()
            if (n := len(path.read_text().splitlines())) > MODULE_LINES}
    assert not long, f"modules over {MODULE_LINES} lines: {long}"


def test_no_function_is_over_80_lines():
    long = {}
    for rel, path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), rel)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > FUNCTION_LINES:
                    long[f"{rel}:{node.name}"] = n
    assert not long, f"functions over {FUNCTION_LINES} lines: {long}"
