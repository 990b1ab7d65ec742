"""Real-stack fixtures: one Spark Thrift Server (STS) for the whole session (tests/proxy's
`sts`, which the gateway tests share), the proxy in front of it, and a `target` parameter so every test runs against both:

    target = direct  -> the STS itself (proves the test and the harness are right)
    target = proxy   -> `python -m proxy serve --upstream <sts>` (the thing under test)

A test computes its observation through `target`; through the proxy it must equal the same
observation made directly (`reference(...)`, cached from the direct run of the same test).
If the proxy cannot start, every proxy-side test FAILS with the proxy's output; nothing is
skipped. `pytest --targets=direct` narrows the run while developing.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

from tests.support.client_matrix import ITEST_DB, META_DB, TYPES_DDL, Target, USE_DB, types_statements
from tests.support.proxy_proc import ProxyProc, start_proxy
from tests.support.sts import Sts

ALL_TARGETS = ("direct", "proxy")


def pytest_generate_tests(metafunc):
    if "target" in metafunc.fixturenames:
        wanted = [t.strip() for t in metafunc.config.getoption("--targets").split(",") if t.strip()]
        unknown = set(wanted) - set(ALL_TARGETS)
        if unknown:
            raise pytest.UsageError(f"--targets: unknown target(s) {sorted(unknown)}; "
                                    f"expected some of {ALL_TARGETS}")
        metafunc.parametrize("target", wanted, indirect=True)


_SPARK_FIXTURES = {"sts", "sts_starts", "target", "direct", "proxy", "itest_db"}


def pytest_collection_modifyitems(items):
    # Tests that touch a real Spark Thrift Server carry the `spark` marker.
    for item in items:
        if "/proxy/clients/" in str(item.fspath) and \
                _SPARK_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.spark)


@pytest.fixture(scope="session")
def itest_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("integration")


class _ProxyHolder:
    """Starts the shared proxy once; remembers a start failure so that every proxy-side test
    fails fast with the same message instead of retrying a slow start."""

    def __init__(self):
        self.proc: ProxyProc | None = None
        self.error: str | None = None


@pytest.fixture(scope="session")
def _proxy_holder(sts, itest_dir):
    holder = _ProxyHolder()
    yield holder
    if holder.proc is not None:
        holder.proc.stop()


@pytest.fixture
def proxy(_proxy_holder, sts, itest_dir) -> ProxyProc:
    h = _proxy_holder
    if h.proc is None and h.error is None:
        try:
            h.proc = start_proxy(itest_dir / "proxy", (sts.host, sts.port), http=True)
        except Exception as exc:  # noqa: BLE001 - reported verbatim below
            h.error = f"{type(exc).__name__}: {exc}"
    if h.error is not None:
        pytest.fail(f"the proxy could not be started, so this proxy-side test fails:\n{h.error}",
                    pytrace=False)
    if not h.proc.alive():
        pytest.fail(f"the shared proxy died (exit code {h.proc.returncode}); log "
                    f"{h.proc.log_path}", pytrace=False)
    return h.proc


@pytest.fixture(scope="session")
def direct(sts) -> Target:
    return Target("direct", sts.host, sts.port)


@pytest.fixture
def target(request, direct) -> Target:
    if request.param == "direct":
        return direct
    p = request.getfixturevalue("proxy")
    return Target("proxy", p.host, p.port)


@pytest.fixture(scope="session")
def _reference_cache() -> dict:
    return {}


@pytest.fixture
def reference(request, direct, _reference_cache) -> Callable[[str, Callable[[Target], Any]], Any]:
    """reference(key, observe) -> observe(direct), computed once per test function and key.
    The direct-side run of a test fills the cache; the proxy-side run reuses it."""
    def get(key: str, observe: Callable[[Target], Any]) -> Any:
        k = (request.node.module.__name__, request.node.originalname, key)
        if k not in _reference_cache:
            _reference_cache[k] = observe(direct)
        return _reference_cache[k]
    return get


@pytest.fixture
def observe(target, reference):
    """observe(key, fn): run fn(target); through the proxy, assert it equals fn(direct).
    Returns the target's observation."""
    def run(key: str, fn: Callable[[Target], Any]) -> Any:
        got = fn(target)
        if target.name == "direct":
            reference(key, lambda _d: got)
        else:
            want = reference(key, fn)
            if isinstance(got, dict) and isinstance(want, dict) and got.keys() == want.keys():
                for part in got:   # name the first differing part (e.g. the RPC)
                    assert got[part] == want[part], (
                        f"{key}/{part}: through the proxy differs from Spark direct\n"
                        f"  proxy : {got[part]!r}\n  direct: {want[part]!r}")
            assert got == want, (f"{key}: through the proxy differs from Spark direct\n"
                                 f"  proxy : {got!r}\n  direct: {want!r}")
        return got
    return run


# --------------------------------------------------------------------------- shared data

@pytest.fixture(scope="session")
def itest_db(sts) -> str:
    """Created directly on the STS, once: every database the suite uses (so that GetSchemas
    is stable), `itest.all_types` (TYPES_ROWS), and in `imeta` a table `meta_cols_t` with
    every type plus a view `meta_view_v`."""
    from tests.support.clients import RawHS2
    with RawHS2(sts.host, sts.port) as raw:
        for db in (ITEST_DB, META_DB, USE_DB):
            raw.execute(f"CREATE DATABASE IF NOT EXISTS {db}")
        for stmt in types_statements(f"{ITEST_DB}.all_types"):
            raw.execute(stmt)
        raw.execute(f"CREATE TABLE IF NOT EXISTS {META_DB}.meta_cols_t {TYPES_DDL}")
        raw.execute(f"CREATE OR REPLACE VIEW {META_DB}.meta_view_v AS "
                    f"SELECT c_int, c_string FROM {META_DB}.meta_cols_t")
        raw.execute(f"CREATE TABLE IF NOT EXISTS {USE_DB}.marker_t (x INT) USING parquet")
    return ITEST_DB
