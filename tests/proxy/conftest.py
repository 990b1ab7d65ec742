"""Gateway tests against a real Spark Thrift Server (one per module run) and the proxy as a
subprocess. A fault-injecting TCP relay sits between proxy and Spark where a test needs to
cut the upstream."""
from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from tests.support.proxy_proc import start_proxy
from tests.support.sts import start_sts


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


@pytest.fixture(scope="package")
def gw_sts(gw_dir):
    sts = start_sts(gw_dir / "sts")
    yield sts
    sts.stop()


class Relay:
    """127.0.0.1 TCP relay to (host, port) whose live connections can be cut."""

    def __init__(self, host: str, port: int):
        self.target = (host, port)
        self.loop = asyncio.new_event_loop()
        self.pairs: list[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = []
        self.port = 0
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        ready.wait(10)

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)

        async def pipe(r, w):
            try:
                while data := await r.read(65536):
                    w.write(data)
                    await w.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                w.close()

        async def handle(cr, cw):
            try:
                ur, uw = await asyncio.open_connection(*self.target)
            except OSError:
                cw.close()
                return
            self.pairs.append((cw, uw))
            await asyncio.gather(pipe(cr, uw), pipe(ur, cw))

        async def main():
            self.server = await asyncio.start_server(handle, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()
            await asyncio.Event().wait()

        try:
            self.loop.run_until_complete(main())
        except RuntimeError:
            pass

    def cut(self, index: int | None = None) -> None:
        """Reset one (or every) relayed connection, like Spark dying under it."""
        def do():
            for i, (a, b) in enumerate(self.pairs):
                if index is None or i == index:
                    for w in (a, b):
                        sock = w.get_extra_info("socket")
                        if sock is not None:
                            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                        w.close()
        self.loop.call_soon_threadsafe(do)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)


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


def kerberos_env(kdc) -> dict[str, str]:
    """The environment of a proxy with auth = kerberos on the realm's keytab. The principals
    are spelled out: the tests listen on 127.0.0.1, for which _HOST would be this machine's
    FQDN, not the localhost the realm knows."""
    return {**kdc.env, "DATAMAP_PROXY_SERVER_KERBEROS_KEYTAB": str(kdc.keytab),
            "DATAMAP_PROXY_SERVER_KERBEROS_PRINCIPAL": "hive/localhost@DMP.TEST",
            "DATAMAP_PROXY_SERVER_KERBEROS_SPNEGO_PRINCIPAL": "HTTP/localhost@DMP.TEST"}


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
