"""SET datamap.rewrite.approximate (rewriter/distinct.py): the session's opt-in to distinct
counts estimated from a datamap's HLL sketches, and EXPLAIN's line for them (pure logic)."""
import asyncio

import pytest

from proxy.datamaps.explain import approximate_lines
from proxy.hs2.session import Session
from proxy.routing import statements
from proxy.routing.router import Local, Reject, StatementContext
from proxy.routing.session_keys import APPROXIMATE_KEY, approximate_on
from rewriter.api import RewriteResult


def _ctx(conf):
    return StatementContext(session_id="s", user="u", current_db="default", conf=conf,
                            protocol_version=9)


def _answer(conf, sql):
    d = statements.set_rewrite_enabled(_ctx(conf), sql)
    assert isinstance(d, Local)
    return d, asyncio.run(d.runner(None)).rows


def test_off_unless_set_and_shown_as_false():
    assert not approximate_on(Session(user="u", protocol=9, client_protocol=9).conf)
    d, rows = _answer({}, "SET datamap.rewrite.approximate")
    assert rows == [(APPROXIMATE_KEY, "false")] and d.settings == ()


@pytest.mark.parametrize("sql,value", [("SET datamap.rewrite.approximate=true", "true"),
                                       ("set DATAMAP.REWRITE.APPROXIMATE = 'FALSE';", "false")])
def test_set_it(sql, value):
    d, rows = _answer({}, sql)
    assert d.settings == ((APPROXIMATE_KEY, value),) and rows == [(APPROXIMATE_KEY, value)]
    assert approximate_on(dict(d.settings)) is (value == "true")


def test_a_bad_value_names_the_setting():
    d = statements.set_rewrite_enabled(_ctx({}), "SET datamap.rewrite.approximate=maybe")
    assert isinstance(d, Reject) and d.sqlstate == "42000"
    assert "datamap.rewrite.approximate" in d.message and "maybe" in d.message


def test_explain_lines_only_for_estimates_of_a_hit():
    hit = RewriteResult("SELECT 1", True, ["db.dm"], approximate=["APPROX_COUNT_DISTINCT(x) "
                                                                  "estimated from the HLL sketch dm.s"])
    assert approximate_lines(hit) == [
        "Approximate: APPROX_COUNT_DISTINCT(x) estimated from the HLL sketch dm.s (not Spark's "
        "HLL++ estimate; SET datamap.rewrite.approximate=true)"]
    assert approximate_lines(RewriteResult("SELECT 1", True, ["db.dm"])) == []
    assert approximate_lines(RewriteResult("SELECT 1", False)) == []
