"""Fixture-driven tests of the statement classifier (tests/fixtures/proxy/classify.yaml),
and its cost: the head of a statement is all it reads unless asked to parse."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from proxy.routing.classify import FORMS, Kind, Statement, classify
from tests.support import yamlfile as yaml

CASES = yaml.safe_load((Path(__file__).parents[2] / "fixtures/proxy/classify.yaml")
                       .read_text())["cases"]


@pytest.mark.parametrize("case", CASES, ids=[c["title"] for c in CASES])
def test_classifies(case):
    got = classify(case["sql"], "db1", None if case.get("parse") else 0)
    want = Statement(Kind(case["kind"]), tuple(case.get("tables", ())),
                     case.get("overwrite", False), case.get("key"), case.get("value"),
                     case.get("database"), case.get("error"))
    assert got == want


def test_over_the_parse_limit_an_insert_may_write():
    sql = "WITH c AS (SELECT 1 AS a) INSERT INTO t SELECT * FROM c"
    assert classify(sql, "db1", len(sql)).kind is Kind.WRITE
    assert classify(sql, "db1", len(sql) - 1).kind is Kind.MAYBE_WRITE   # not parsed
    assert classify(sql, "db1").kind is Kind.QUERY               # default: the head only
    query = "WITH c AS (SELECT 1 AS a) SELECT * FROM c"
    assert classify(query, "db1", len(query) - 1).kind is Kind.QUERY


@pytest.mark.parametrize("sql,tables,want", [
    ("WITH c AS (SELECT 1) INSERT INTO `DB1`.`Sales` SELECT * FROM c",
     ["db1.sales", "db1.other"], ["db1.sales"]),
    ("from src insert into sales select *", ["db1.sales", "db2.sales", "db1.src"],
     ["db1.sales", "db2.sales", "db1.src"]),
    ("INSERT INTO sales_2024 SELECT * FROM presales", ["db1.sales"], []),
    ("INSERT INTO x SELECT * FROM t", ["db1.t", "db1.tt"], ["db1.t"]),
    ("", ["db1.t"], []),
    ("INSERT INTO `My-Table` SELECT 1", ["db1.my-table", "db1.my"], ["db1.my-table", "db1.my"]),
    ("INSERT INTO t", [], []),
], ids=["qualified and backquoted", "every table named", "whole words only",
        "a name inside another", "empty text", "a name of several words", "no tables"])
def test_mentioned_tables(sql, tables, want):
    from proxy.routing.classify_parse import mentioned
    assert sorted(mentioned(sql, tables)) == sorted(want)


def test_mentioned_is_one_pass_over_a_megabyte():
    from proxy.routing.classify_parse import mentioned
    sql = "WITH c AS (SELECT " + "x, " * 300_000 + "1) INSERT INTO sales SELECT * FROM c"
    assert classify(sql, "db1", 1 << 16).kind is Kind.MAYBE_WRITE      # over: not parsed
    t0 = time.perf_counter()
    assert mentioned(sql, [f"db1.t{i}" for i in range(500)] + ["db1.sales"]) == ("db1.sales",)
    assert time.perf_counter() - t0 < 2.0       # ~50 ms; a parse would take seconds


def test_every_form_starts_with_a_word():
    assert all(f.steps[0].isalpha() for f in FORMS)


@pytest.mark.parametrize("sql", [
    "SELECT " + "x, " * 300_000 + "1",
    "INSERT INTO t VALUES " + "(1), " * 300_000 + "(1)",
    "WITH c AS (SELECT " + "x, " * 300_000 + "1) SELECT * FROM c",
    "WITH c AS (SELECT " + "x, " * 300_000 + "1) INSERT INTO t SELECT * FROM c",
], ids=["select", "insert", "cte", "cte insert"])
def test_a_megabyte_statement_is_classified_from_its_head(sql):
    t0 = time.perf_counter()
    for _ in range(100):
        classify(sql, "db1")
    assert time.perf_counter() - t0 < 5.0     # ~10 µs each; a parse would take minutes


def test_a_decision_classifies_its_statement_once(monkeypatch):
    from proxy.routing import classify as module
    from proxy.routing.router import Router, StatementContext
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
