"""Sessions that change result-affecting settings are not answered from datamaps."""
import pytest

from proxy.hs2.session import Session
from proxy.routing.router import PassThrough, Remember, Router, StatementContext
from proxy.routing.session_keys import BLOCKED_KEY, semantic_setting
from proxy.routing.statements import install, watch_semantic_settings


def ctx(conf=None):
    return StatementContext(session_id="s", user="u", current_db="default",
                            conf={} if conf is None else conf, protocol_version=5)


@pytest.mark.parametrize("statement", [
    "SET spark.sql.session.timeZone=Asia/Kathmandu",
    "set SPARK.SQL.SESSION.TIMEZONE = 'UTC'",
    "SET TIME ZONE 'America/Caracas'",
    "set time zone local",
    "SET spark.sql.ansi.enabled=false",
    "SET spark.sql.legacy.timeParserPolicy=LEGACY",
    "SET spark.sql.caseSensitive=true",
    "SET spark.sql.session.collation.default=UTF8_LCASE",
])
def test_result_affecting_set_blocks_rewriting_and_still_forwards(statement):
    note = watch_semantic_settings(ctx(), statement)   # not a decision: Spark gets the SET
    assert isinstance(note, Remember)
    assert "datamaps were not built with" in dict(note.settings)[BLOCKED_KEY]
    d = Router(handlers=[watch_semantic_settings]).decide(ctx(), statement)
    assert isinstance(d, PassThrough) and BLOCKED_KEY in dict(d.settings)


def test_a_session_blocked_already_keeps_its_first_reason():
    assert watch_semantic_settings(ctx({BLOCKED_KEY: "first"}), "SET TIME ZONE 'UTC'") is None


def test_handlers_after_the_watch_see_the_block_and_a_reject_drops_it():
    from proxy.routing.router import Reject
    seen = []

    def spy(c, s):
        seen.append(BLOCKED_KEY in c.conf)
        return Reject("no") if "ansi" in s else None
    r = Router(handlers=[watch_semantic_settings, spy])
    conf = {}
    assert BLOCKED_KEY in dict(r.decide(ctx(conf), "SET TIME ZONE 'UTC'").settings)
    assert isinstance(r.decide(ctx(conf), "SET spark.sql.ansi.enabled=true"), Reject)
    assert seen == [True, True] and conf == {}          # the context's conf is never changed


@pytest.mark.parametrize("statement", [
    "SET spark.sql.shuffle.partitions=8",
    "SET datamap.rewrite.enabled=false",
    "SELECT 'SET spark.sql.session.timeZone=UTC'",
    "SET",
    "SET -v",
    "SET spark.sql.session.timeZone",
])
def test_other_statements_leave_the_session_alone(statement):
    assert watch_semantic_settings(ctx(), statement) is None


def test_open_session_configuration_blocks_too():
    s = Session(user="u", protocol=5, client_protocol=5,
                configuration={"set:hiveconf:spark.sql.session.timeZone": "UTC"})
    assert BLOCKED_KEY in s.conf
    s2 = Session(user="u", protocol=5, client_protocol=5,
                 configuration={"set:hiveconf:hive.server2.thrift.resultset.default.fetch.size": "1000",
                                "use:database": "default"})
    assert BLOCKED_KEY not in s2.conf


def test_semantic_setting_names():
    assert semantic_setting("spark.sql.session.timeZone")
    assert semantic_setting("spark.sql.legacy.anything")
    assert not semantic_setting("spark.sql.shuffle.partitions")


def test_install_puts_gateway_handlers_first_once():
    r = Router(handlers=[lambda c, s: None])
    install(r)
    install(r)
    assert r.handlers[1] is watch_semantic_settings
    assert len(r.handlers) == 3
    d = r.decide(ctx(), "/* c */ SET spark.sql.session.timeZone=UTC")
    assert isinstance(d, PassThrough) and BLOCKED_KEY in dict(d.settings)


def test_datamap_handlers_honour_the_block():
    from proxy.datamaps.handler import rewrite_enabled
    assert rewrite_enabled(ctx({"datamap.rewrite.enabled": "true"}))
    assert not rewrite_enabled(ctx({"datamap.rewrite.enabled": "false"}))
    assert not rewrite_enabled(ctx({BLOCKED_KEY: "the session changed spark.sql.session.timeZone"}))
