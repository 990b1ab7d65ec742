"""SET datamap.rewrite.enabled as a Router StatementHandler (pure logic)."""
import asyncio

import pytest

from proxy.routing import statements
from proxy.routing.router import Local, PassThrough, Reject, Router, StatementContext


def _ctx(conf=None):
    return StatementContext(session_id="s", user="u", current_db="default",
                            conf=conf if conf is not None else {"datamap.rewrite.enabled": "true"},
                            protocol_version=9)


@pytest.mark.parametrize("sql,value", [
    ("SET datamap.rewrite.enabled=false", "false"),
    ("set DATAMAP.REWRITE.ENABLED = TRUE ;", "true"),
    ("  SET datamap.rewrite.enabled='false'", "false"),
    ("/* dashboard */ SET datamap.rewrite.enabled = `true`;", "true"),
])
def test_set_returns_the_new_value_for_the_session(sql, value):
    conf = {"datamap.rewrite.enabled": "x"}
    d = statements.set_rewrite_enabled(_ctx(conf), sql)
    assert isinstance(d, Local)
    res = asyncio.run(d.runner(None))
    assert d.settings == (("datamap.rewrite.enabled", value),)
    assert conf == {"datamap.rewrite.enabled": "x"}          # applied by the owner, not here
    assert list(res.columns) == [("key", "string"), ("value", "string")]
    assert list(res.rows) == [("datamap.rewrite.enabled", value)]


def test_show_value():
    for sql in ("SET datamap.rewrite.enabled", "set datamap.rewrite.enabled ; ",
                "SET datamap.rewrite.enabled -- which?"):
        d = statements.set_rewrite_enabled(_ctx({"datamap.rewrite.enabled": "false"}), sql)
        assert asyncio.run(d.runner(None)).rows == [("datamap.rewrite.enabled", "false")]
        assert d.settings == ()


def test_bad_value_rejected_with_sqlstate():
    d = statements.set_rewrite_enabled(_ctx(), "SET datamap.rewrite.enabled=maybe")
    assert isinstance(d, Reject) and "maybe" in d.message and d.sqlstate == "42000"
    d = statements.set_rewrite_enabled(_ctx(), "SET datamap.rewrite.enabled false")
    assert isinstance(d, Reject) and "expected '='" in d.message and d.sqlstate == "42000"


@pytest.mark.parametrize("sql", ["SET spark.sql.shuffle.partitions=4", "SET", "select 1",
                                 "SET datamap.rewrite.enabledx=true"])
def test_other_statements_not_ours(sql):
    assert statements.set_rewrite_enabled(_ctx(), sql) is None


def test_install_is_idempotent_and_first():
    r = Router(handlers=[lambda ctx, s: None])
    statements.install(r)
    statements.install(r)
    assert r.handlers[0] is statements.set_rewrite_enabled
    assert r.handlers[1] is statements.watch_semantic_settings and len(r.handlers) == 3
    assert isinstance(r.decide(_ctx(), "select 1"), PassThrough)
