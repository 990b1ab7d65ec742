"""Tests of the proxy against one real Spark Thrift Server for the whole session (`sts`: the
client suite's, which the gateway tests share) and the proxy as a subprocess. A
fault-injecting TCP relay sits between proxy and Spark where a test needs to cut the
upstream."""
from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from tests.support.proxy_proc import start_proxy
from tests.support.relay import Relay
from tests.support.sts import Sts, start_sts


@pytest.fixture(params=["sqlite", "postgresql"])
def catalog_location(request, tmp_path):
    """Where a test's catalog lives: a SQLite file, then a fresh PostgreSQL database (the
    session's `postgres`, tests/conftest.py)."""
    if request.param == "sqlite":
        return str(tmp_path / "catalog.db")
    return request.getfixturevalue("postgres").new_database()


@pytest.fixture(scope="package")
def gw_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("gateway")


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory):
    """One real ZooKeeper for the run (tests/support/zookeeper.py); tests use their own
    namespace. Fails, with the reason, where the Debian package is not installed
    (scripts/test installs it; no test is ever skipped)."""
    from tests.support import zookeeper as zk
    if not zk.available():
        pytest.fail(f"ZooKeeper not installed ({zk.ZOOKEEPER_JAR}; apt-get install zookeeper)")
    server = zk.start_zookeeper(tmp_path_factory.mktemp("zookeeper"))
    yield server
    server.stop()


@pytest.fixture(scope="session")
def sts_starts(request, tmp_path_factory) -> dict[str, Future]:
    """Start, in parallel, every Spark Thrift Server the selected tests need: "main" (SASL
    PLAIN, the session's) and, when test_nosasl.py is selected, "nosasl". Start-up is
    mostly JVM and Hive warm-up, so overlapping the two saves wall-clock time. Each server
    is stopped at the end of the session."""
    wanted = {"main": "NONE"}
    if any("test_nosasl.py" in item.nodeid for item in request.session.items):
        wanted["nosasl"] = "NOSASL"
    root = tmp_path_factory.mktemp("sts")
    pool = ThreadPoolExecutor(max_workers=len(wanted), thread_name_prefix="sts-start")
    futures = {name: pool.submit(start_sts, root / name, auth=auth, fast_start=True)
               for name, auth in wanted.items()}
    yield futures
    for fut in futures.values():
        try:
            fut.result().stop()
        except Exception:  # noqa: BLE001 - a failed start was already reported by its user
            pass
    pool.shutdown(wait=True)


@pytest.fixture(scope="session")
def sts(sts_starts) -> Sts:
    return sts_starts["main"].result()


@pytest.fixture(scope="package")
def gw_sts(sts):
    """The gateway tests' Spark Thrift Server: the session's (a start of its own cost
    about 13 s in CI; they create no table in it, and cut only their relays)."""
    return sts


@pytest.fixture(scope="package")
def gw_relay(gw_sts):
    r = Relay(gw_sts.host, gw_sts.port)
    yield r
    r.close()


@pytest.fixture(scope="package")
def gw_proxy(gw_dir, gw_relay):
    p = start_proxy(gw_dir / "proxy", ("127.0.0.1", gw_relay.port))
    yield p
    p.stop()


@pytest.fixture(scope="session")
def kdc(tmp_path_factory):
    """A real MIT KDC (realm DMP.TEST, tests/support/kdc.py) for the whole run, with alice
    holding a ticket in kdc.ccache. Its environment (krb5.conf, ccache, replay cache off)
    is put in os.environ, because python-gssapi in this process reads it from there."""
    import os

    from tests.support.kdc import available, start_kdc
    missing = available()
    if missing:
        pytest.fail(missing)    # scripts/test installs them: no test is ever skipped
    k = start_kdc(tmp_path_factory.mktemp("kdc"))
    saved = {key: os.environ.get(key) for key in k.env}
    os.environ.update(k.env)
    k.kinit("alice")
    yield k
    k.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(scope="session")
def directory(tmp_path_factory):
    """A real OpenLDAP slapd (tests/support/slapd.py) shared by the LDAP tests; fails
    where Debian's slapd or openssl is missing (scripts/test installs them)."""
    from tests.support import slapd
    if not slapd.available():
        pytest.fail("needs slapd (Debian slapd) and openssl")
    s = slapd.start_slapd(tmp_path_factory.mktemp("slapd"))
    yield s
    s.stop()
