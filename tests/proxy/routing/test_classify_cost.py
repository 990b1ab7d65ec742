"""Classifying a statement costs time linear in its size, never quadratic: hostile
inputs through the gateway's handlers, the datamap handlers (a real catalog with schemas
given as data, no Spark) and the session-state tracking that runs after upstream."""
from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from proxy.datamaps.handler import DatamapDdlHandler, DatamapLoadHandler, DatamapSelectHandler
from proxy.hs2.session import track_statement
from proxy.routing import statements
from proxy.routing.router import Router, StatementContext
from tests.support.datamaps import add_datamap, decision_service

SCHEMAS = {"db1": {"sales": {"country": "string", "qty": "int"}}}

# Inputs that made a classification regex backtrack: exponentially over leading blanks or
# comments (24 blanks took 7 s), cubically over blanks after `SET k = v` (3,000 took 68 s),
# quadratically over blanks after `USE db` or a long backquoted table name with dots.
HOSTILE = [
    " " * 24 + "x",
    "/**/" * 24 + "x",
    "--\n" * 24 + "x",
    "set a = 1" + " " * 1500 + "x",
    "set datamap.rewrite.enabled" + " " * 1500 + "x",
    "set datamap.rewrite.enabled=" + " " * 1500 + "'",
    "use a" + " " * 30_000 + "x",
    "use database a" + " " * 30_000 + "x",
    "insert into `" + "a." * 20_000 + "` values (1)",
    "alter table `" + "a." * 20_000 + "` drop partition (p=1)",
    "load data inpath '" + "x" * 50_000,
    "create datamap d" + " " * 50_000 + "x",
    "explain" + " /**/" * 10_000 + " x",
    "select * from sales where x = '" + "'" * 50_000,
]


@pytest.fixture
def router(tmp_path):
    gen = decision_service(tmp_path, SCHEMAS)
    service = next(gen)
    add_datamap(service, SCHEMAS, "db1", "agg", "SELECT country, sum(qty) FROM sales GROUP BY country")
    r = Router()
    statements.install(r)
    r.handlers += [DatamapDdlHandler(service), DatamapLoadHandler(service),
                   DatamapSelectHandler(service)]
    yield r
    gen.close()


def _ctx():
    return StatementContext("s", "u", "db1", {}, 10)


@pytest.mark.parametrize("sql", HOSTILE, ids=lambda s: repr(s[:30]))
def test_hostile_statements_are_classified_in_linear_time(router, sql):
    session = SimpleNamespace(current_db="db1", conf={}, spark_sets={})
    t0 = time.perf_counter()
    router.decide(_ctx(), sql)
    track_statement(session, sql)   # what runs after upstream accepted it
    # ~20 ms each when quiet; the backtracking regexes took 7 to 68 s. 0.5 s failed twice
    # while Spark jobs loaded the 2-core box
    assert time.perf_counter() - t0 < 3.0


def test_session_state_tracking_still_reads_use_and_set():
    session = SimpleNamespace(current_db="default", conf={}, spark_sets={})
    for sql in ("USE `Db2` ;", "set spark.sql.x = 'a b' ;  ", "use database db3\n"):
        track_statement(session, sql)
    assert session.current_db == "db3" and session.conf == {"spark.sql.x": "'a b'"}
