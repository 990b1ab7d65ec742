"""Fixture-driven tests of the datamap DDL parser (tests/fixtures/datamaps/ddl.yaml)."""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest

from proxy.datamaps.ddl import parser as ddl
from proxy.datamaps.ddl.parser import DdlError, Name, parse
from tests.support import yamlfile as yaml

CASES = yaml.safe_load((Path(__file__).parents[3] / "fixtures/datamaps/ddl.yaml").read_text())


def _plain(value):
    if isinstance(value, Name):
        return str(value)
    if isinstance(value, tuple) and value and all(isinstance(p, tuple) for p in value):
        return dict(value)
    if isinstance(value, tuple):
        return list(value)
    return value


@pytest.mark.parametrize("case", CASES["ok"], ids=[c["title"] for c in CASES["ok"]])
def test_parses(case):
    stmt = parse(case["sql"])
    expect = dict(case["expect"])
    assert type(stmt).__name__ == expect.pop("type")
    fields = {f.name: _plain(getattr(stmt, f.name)) for f in dataclasses.fields(stmt)}
    for key, want in expect.items():
        if key == "properties":
            want = {k: str(v) for k, v in want.items()}
        assert fields[key] == want, key


@pytest.mark.parametrize("sql", CASES["none"])
def test_not_datamap_ddl(sql):
    assert parse(sql) is None


@pytest.mark.parametrize("case", CASES["errors"], ids=[c["title"] for c in CASES["errors"]])
def test_errors(case):
    with pytest.raises(DdlError) as info:
        parse(case["sql"])
    err = info.value
    want = case["error"]
    assert err.sqlstate == str(want["sqlstate"])
    assert want["message"] in str(err), str(err)
    if "token" in want:
        assert err.token == str(want["token"])
        assert case["sql"][err.position:].startswith(err.token)


def test_statements_are_frozen_and_hashable():
    stmt = parse("CREATE DATAMAP d USING 'mv' DMPROPERTIES ('a'='1') AS SELECT 1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        stmt.lazy = True
    assert hash(stmt) == hash(parse("CREATE DATAMAP d USING 'mv' DMPROPERTIES ('a'='1') AS SELECT 1"))
    assert stmt.props == {"a": "1"}


def test_name_qualified():
    assert Name("d").qualified("db1") == "db1.d"
    assert Name("d", "x").qualified("db1") == "x.d"


def test_precheck_is_cheap():
    sql = "SELECT country, sum(price) FROM sales WHERE year = 2020 GROUP BY country " * 20
    start = time.perf_counter()
    for _ in range(20000):
        assert parse(sql) is None
    assert time.perf_counter() - start < 1.0


def test_every_granularity_is_accepted():
    for gran in ddl.GRANULARITIES:
        stmt = parse(f"CREATE DATAMAP d ON TABLE t USING 'timeseries' DMPROPERTIES "
                     f"('event_time'='ts', '{gran}_granularity'='1') "
                     f"AS SELECT ts, max(x) FROM t GROUP BY ts")
        assert f"TIMESERIES(ts, '{gran}')" in stmt.select_sql
