"""NOSASL (raw binary transport) end to end: a second, module-scoped STS started with
hive.server2.authentication=NOSASL, and a proxy with --auth nosasl --upstream-auth nosasl.
beeline `;auth=noSasl`, PyHive auth='NOSASL' and impyla auth_mechanism='NOSASL'."""
from __future__ import annotations

import pytest

from tests.support.client_matrix import Target, TYPES_COLUMNS, types_select, types_statements
from tests.support.clients import (RawHS2, impyla_connect, impyla_execute, pyhive_connect,
                                   pyhive_execute, run_beeline)
from tests.support.proxy_proc import start_proxy

TABLE = "default.nosasl_types"


@pytest.fixture(scope="module")
def sts(sts_starts):
    # Shadows the session STS inside this module; started alongside it (conftest), stopped
    # at the end of the session.
    server = sts_starts["nosasl"].result()
    with RawHS2(server.host, server.port, auth="NOSASL") as raw:
        for stmt in types_statements(TABLE):
            raw.execute(stmt)
    return server


@pytest.fixture(scope="module")
def _nosasl_proxy(sts, itest_dir):
    state = {}
    try:
        state["proc"] = start_proxy(itest_dir / "proxy-nosasl", (sts.host, sts.port),
                                    auth="nosasl", upstream_auth="nosasl")
    except Exception as exc:  # noqa: BLE001 - reported by each proxy-side test
        state["error"] = f"{type(exc).__name__}: {exc}"
    yield state
    if "proc" in state:
        state["proc"].stop()


@pytest.fixture(scope="module")
def direct(sts) -> Target:
    return Target("direct", sts.host, sts.port, nosasl=True)


@pytest.fixture
def target(request, direct, _nosasl_proxy) -> Target:
    if request.param == "direct":
        return direct
    if "error" in _nosasl_proxy:
        pytest.fail("the NOSASL proxy could not be started:\n" + _nosasl_proxy["error"],
                    pytrace=False)
    p = _nosasl_proxy["proc"]
    return Target("proxy", p.host, p.port, nosasl=True)


def test_nosasl_pyhive(target, observe):
    def run(t):
        conn = pyhive_connect(t.host, t.port, auth="NOSASL")
        try:
            cur = conn.cursor()
            res = pyhive_execute(cur, types_select(TABLE))
            db = pyhive_execute(cur, "SELECT current_database()").rows
            cur.close()
            return res, db
        finally:
            conn.close()

    res, db = observe("pyhive", run)
    assert res.columns == TYPES_COLUMNS and len(res.rows) == 3
    assert db == [("default",)]


def test_nosasl_impyla(target, observe):
    def run(t):
        conn = impyla_connect(t.host, t.port, auth="NOSASL")
        try:
            cur = conn.cursor()
            res = [impyla_execute(cur, types_select(TABLE)), impyla_execute(cur, "SELECT 2 AS two")]
            cur.close()
            return res
        finally:
            conn.close()

    res = observe("impyla", run)
    assert len(res[0].rows) == 3 and res[1].rows == [(2,)]


def test_nosasl_beeline(target, observe, itest_dir):
    def run(t):
        r = run_beeline(t.jdbc(), [types_select(TABLE), "SELECT current_database() AS db",
                                   "!tables"], workdir=itest_dir / "beeline")
        assert r.errors == [], r.stderr[-3000:]
        return r.results

    res = observe("beeline", run)
    assert res[0].columns == TYPES_COLUMNS and len(res[0].rows) == 3
    assert res[1].rows == [("default",)]
    assert "nosasl_types" in [row[2] for row in res[2].rows]
