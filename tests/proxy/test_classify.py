"""Fixture-driven tests of the statement classifier (tests/fixtures/proxy/classify.yaml),
and its cost: the head of a statement is all it reads unless asked to parse."""
from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from proxy.classify import FORMS, Kind, Statement, classify

CASES = yaml.safe_load((Path(__file__).parents[1] / "fixtures/proxy/classify.yaml")
                       .read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["title"] for c in CASES])
def test_classifies(case):
    got = classify(case["sql"], "db1", None if case.get("parse") else 0)
    want = Statement(Kind(case["kind"]), tuple(case.get("tables", ())),
                     case.get("overwrite", False), case.get("key"), case.get("value"),
                     case.get("database"), case.get("error"))
    assert got == want


def test_parse_limit_keeps_long_statements_to_a_look_at_the_head():
    sql = "WITH c AS (SELECT 1 AS a) INSERT INTO t SELECT * FROM c"
    assert classify(sql, "db1", len(sql)).kind is Kind.WRITE
    assert classify(sql, "db1", len(sql) - 1).kind is Kind.QUERY
    assert classify(sql, "db1").kind is Kind.QUERY               # default: never parse


def test_every_form_starts_with_a_word():
    assert all(f.steps[0].isalpha() for f in FORMS)


@pytest.mark.parametrize("sql", [
    "SELECT " + "x, " * 300_000 + "1",
    "INSERT INTO t VALUES " + "(1), " * 300_000 + "(1)",
    "WITH c AS (SELECT " + "x, " * 300_000 + "1) SELECT * FROM c",
], ids=["select", "insert", "cte"])
def test_a_megabyte_statement_is_classified_from_its_head(sql):
    t0 = time.perf_counter()
    for _ in range(100):
        classify(sql, "db1")
    assert time.perf_counter() - t0 < 0.5     # ~10 µs each; a parse would take seconds


def test_a_decision_classifies_its_statement_once(monkeypatch):
    from proxy import classify as module
    from proxy.router import Router, StatementContext
    calls = []
    head = module._head
    monkeypatch.setattr(module, "_head", lambda *a: calls.append(a[0]) or head(*a))

    def handler(ctx, sql):
        assert classify(sql, ctx.current_db) is classify(sql, ctx.current_db, None)
    Router(handlers=[handler, handler]).decide(StatementContext("s", "u", "db1", {}, 10),
                                               "INSERT INTO t VALUES (1)")
    assert calls == ["INSERT INTO t VALUES (1)"]
    classify("SET a=1")
    classify("SET a=1")                  # outside a decision nothing is kept
    assert len(calls) == 3
