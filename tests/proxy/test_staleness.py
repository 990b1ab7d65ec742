"""The freshness contract's settings (how old a datamap's data may be): durations, `[datamaps]
max_staleness`, `SET datamap.max_staleness`, the OpenSession configuration and
`staleness_budget`. Pure logic, no Spark."""
from __future__ import annotations

import asyncio

import pytest

from proxy import config
from proxy.errors import ClientError
from proxy.hs2.session import Session
from proxy.routing import statements
from proxy.routing.router import Local, Reject, StatementContext
from proxy.routing.session_keys import session_settings, staleness_budget
from proxy.staleness import MAX_STALENESS_KEY, BadDuration, parse_duration

KEY = MAX_STALENESS_KEY


@pytest.mark.parametrize("raw,want", [
    ("0", "0"), ("300", "300"), ("30s", "30"), ("5m", "300"), ("1h", "3600"), ("1d", "86400"),
    ("'5m'", "300"), ('"30s"', "30"), ("`1h`", "3600"), (" 5 M ", "300"), ("1.5s", "1.5"),
    ("0.25", "0.25"), ("0m", "0"), ("0.0", "0"), (300, "300"), (1.5, "1.5"), ("007", "7"),
])
def test_durations(raw, want):
    assert parse_duration(raw) == want


@pytest.mark.parametrize("raw", ["", "-1", "5 minutes", "5mm", "m", "1e3", "1h30m", "soon",
                                 "nan", "inf", True, "5 s s"])
def test_bad_durations_name_the_value_and_the_forms(raw):
    with pytest.raises(BadDuration) as e:
        parse_duration(raw)
    assert f"'{raw}'" in str(e.value) and KEY in str(e.value) and "30s, 5m, 1h" in str(e.value)


def test_the_setting_is_parsed_once_at_start_up(tmp_path):
    assert config.load(env={}).datamaps.max_staleness == "0"
    toml = tmp_path / "p.toml"
    toml.write_text("[datamaps]\nmax_staleness = 300\n")
    assert config.load(toml, env={}).datamaps.max_staleness_s == 300.0
    s = config.load(toml, env={"DATAMAP_PROXY_DATAMAPS_MAX_STALENESS": "'5m'"}).datamaps
    assert s.max_staleness == "300" and s.max_staleness_s == 300.0
    toml.write_text('[datamaps]\nmax_staleness = "5 minutes"\n')
    with pytest.raises(config.ConfigError) as e:
        config.load(toml, env={})
    assert str(toml) in str(e.value) and "[datamaps] max_staleness" in str(e.value) \
        and "'5 minutes'" in str(e.value)
    with pytest.raises(config.ConfigError):
        config.DatamapsSettings(max_staleness="1 fortnight")


def _ctx(conf):
    return StatementContext("s", "u", "default", conf, 10)


@pytest.mark.parametrize("sql,value", [
    ("SET datamap.max_staleness = 5m", "300"), ("set DATAMAP.MAX_STALENESS='30s';", "30"),
    ("SET datamap.max_staleness=0", "0"), ("SET datamap.max_staleness = 300", "300"),
])
def test_set_is_answered_by_the_proxy_and_kept_in_seconds(sql, value):
    d = statements.set_rewrite_enabled(_ctx({}), sql)
    assert isinstance(d, Local) and d.settings == ((KEY, value),)
    assert asyncio.run(d.runner(None)).rows == [(KEY, value)]


def test_set_alone_shows_the_value():
    d = statements.set_rewrite_enabled(_ctx({KEY: "60"}), "SET datamap.max_staleness")
    assert asyncio.run(d.runner(None)).rows == [(KEY, "60")] and d.settings == ()
    d = statements.set_rewrite_enabled(_ctx({}), "SET datamap.max_staleness ;")
    assert asyncio.run(d.runner(None)).rows == [(KEY, "0")]


def test_a_bad_set_is_a_42000_error():
    d = statements.set_rewrite_enabled(_ctx({}), "SET datamap.max_staleness = later")
    assert isinstance(d, Reject) and d.sqlstate == "42000" and "'later'" in d.message \
        and "5m" in d.message


def test_the_jdbc_url_hiveconf_sets_it():
    assert session_settings({"set:hiveconf:datamap.max_staleness": "5m",
                             "use:database": "db1"}) == {KEY: "300"}
    assert session_settings({"datamap.max_staleness": "'1h'"}) == {KEY: "3600"}
    assert session_settings(None) == {} and session_settings({"set:hiveconf:a": "b"}) == {}
    s = Session("u", 9, 9, configuration={"set:hiveconf:datamap.max_staleness": "30s"})
    assert s.conf[KEY] == "30"


def test_a_bad_url_value_fails_opensession_naming_it():
    with pytest.raises(ClientError) as e:
        session_settings({"set:hiveconf:datamap.max_staleness": "5 min"})
    assert e.value.sqlstate == "42000" and "'5 min'" in str(e.value) \
        and "set:hiveconf:datamap.max_staleness" in str(e.value)


def test_staleness_budget():
    assert staleness_budget({}, 0.0) == 0.0
    assert staleness_budget({}, 120.0) == 120.0
    assert staleness_budget({KEY: "300"}, 0.0) == 300.0
    assert staleness_budget({KEY: "0"}, 120.0) == 0.0        # the session asks for exact
    assert staleness_budget({KEY: "1.5"}, 0.0) == 1.5
