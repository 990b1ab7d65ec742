"""ZooKeeper discovery (proxy/ha/discovery.py) against a real ZooKeeper and the proxy as a
subprocess. No Spark: the proxy serves (and registers) before any upstream is reached, so
these run in the fast tier; the client half (beeline, PyHive, impyla through ZooKeeper,
two replicas, kill -9) is tests/proxy/clients/test_discovery_replicas.py."""
from __future__ import annotations

import re
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from proxy import config as cfg
from proxy.ha.discovery import (advertised_host, parse_entry, proxy_version, znode_data,
                             znode_prefix)
from tests.support.zookeeper import registered, registered_proxy, start_zookeeper, wait_for

DEAD_UPSTREAM = ("127.0.0.1", 1)
HIVE_JDBC_PAIR = re.compile(r"([^=;]*)=([^;]*)[;]?")    # ZooKeeperHiveClientHelper's kvPattern


def start_registered(workdir: Path, zk_hosts: str, namespace: str, *,
                     session_timeout: float = 2.0, extra_args: list[str] | None = None):
    return registered_proxy(workdir, DEAD_UPSTREAM, zk_hosts, namespace,
                            session_timeout=session_timeout, extra_args=extra_args,
                            serving=False)


# ---------------------------------------------------------------- pure: what is published

def test_published_configuration_is_what_hive_jdbc_reads():
    server = cfg.ServerSettings(host="10.0.0.5", port=10009, http_port=10010,
                                http_path="gw", tls_cert="c.pem", auth="kerberos",
                                kerberos_principal="hive/_HOST@EXAMPLE.COM")
    data = znode_data(server, "gw1.example.com", 10009, http_port=10010)
    pairs = HIVE_JDBC_PAIR.findall(data)
    assert ";".join(f"{k}={v}" for k, v in pairs) == data
    conf = dict(pairs)
    assert conf == {
        "hive.server2.instance.uri": "gw1.example.com:10009",
        "hive.server2.thrift.bind.host": "gw1.example.com",
        "hive.server2.transport.mode": "binary",
        "hive.server2.thrift.port": "10009",
        "hive.server2.thrift.sasl.qop": "auth",
        "hive.server2.thrift.http.port": "10010",
        "hive.server2.thrift.http.path": "gw",
        "hive.server2.authentication": "KERBEROS",
        "hive.server2.authentication.kerberos.principal": "hive/_HOST@EXAMPLE.COM",
        "hive.server2.use.SSL": "true"}
    # Hive JDBC keeps the first port it reads: the binary one must come first
    assert [k for k, _ in pairs].index("hive.server2.thrift.port") < \
        [k for k, _ in pairs].index("hive.server2.thrift.http.port")


@pytest.mark.parametrize("auth, users_file, published", [
    ("none", None, "NONE"), ("none", "users", "CUSTOM"), ("nosasl", None, "NOSASL"),
    ("ldap", None, "LDAP")])
def test_published_authentication(auth, users_file, published):
    data = znode_data(cfg.ServerSettings(auth=auth, users_file=users_file), "h", 1)
    conf = dict(HIVE_JDBC_PAIR.findall(data))
    assert conf["hive.server2.authentication"] == published
    assert "hive.server2.thrift.http.port" not in conf
    assert "hive.server2.authentication.kerberos.principal" not in conf


def test_advertised_host():
    d = cfg.DiscoverySettings(zookeeper="zk:2181")
    assert advertised_host(d, cfg.ServerSettings(host="10.1.2.3")) == "10.1.2.3"
    wildcard = advertised_host(d, cfg.ServerSettings(host="0.0.0.0"))
    assert wildcard and wildcard != "0.0.0.0"
    assert advertised_host(cfg.DiscoverySettings(advertise_host="gw.example.com"),
                           cfg.ServerSettings(host="0.0.0.0")) == "gw.example.com"


def test_client_side_parse_reads_both_formats():
    new = parse_entry("serverUri=h:1;version=v;sequence=0000000001",
                      "hive.server2.thrift.bind.host=h;hive.server2.thrift.port=1")
    assert (new.host, new.port) == ("h", 1)
    old = parse_entry("serverUri=h:2;version=v;sequence=0000000002", "h:2")
    assert (old.host, old.port, old.conf) == ("h", 2, {})


# ------------------------------------------------------------- real ZooKeeper, real proxy

def test_the_http_port_published_is_the_one_bound(zookeeper, tmp_path):
    """--http-port 0 listens on any free port: the entry names that port, which the log
    line "HTTP transport on host:port" also gives."""
    ns = f"http-{uuid.uuid4().hex[:8]}"
    proxy = start_registered(tmp_path / "p", zookeeper.hosts, ns, extra_args=["--http-port", "0"])
    try:
        [entry] = wait_for(lambda: registered(zookeeper.hosts, ns), what="the registration")
        bound = re.search(r"HTTP transport on [\d.]+:(\d+)", proxy.log_path.read_text())
        assert bound and entry.conf["hive.server2.thrift.http.port"] == bound.group(1) != "0"
        assert entry.conf["hive.server2.thrift.port"] == str(proxy.port)
    finally:
        proxy.stop()


def test_registers_as_hiveserver2_and_leaves_before_exiting(zookeeper, tmp_path):
    ns = f"reg-{uuid.uuid4().hex[:8]}"
    proxy = start_registered(tmp_path / "p", zookeeper.hosts, ns)
    try:
        [entry] = wait_for(lambda: registered(zookeeper.hosts, ns), what="the registration")
        assert re.fullmatch(rf"serverUri=127\.0\.0\.1:{proxy.port};"
                            rf"version={re.escape(proxy_version())};sequence=\d{{10}}",
                            entry.znode)
        assert (entry.host, entry.port) == ("127.0.0.1", proxy.port)
        assert entry.conf["hive.server2.authentication"] == "NONE"
        assert entry.conf["hive.server2.transport.mode"] == "binary"

        # SIGTERM: the znode goes while the process still runs (ZooKeeper's own
        # notification, not the session closing at exit)
        client = KazooClient(hosts=zookeeper.hosts)
        client.start(timeout=10)
        gone = threading.Event()
        alive_when_gone: list[bool] = []

        def watch(children):
            if not children and not gone.is_set():
                alive_when_gone.append(proxy.alive())
                gone.set()
                return False
            return True
        client.ChildrenWatch(f"/{ns}", watch)
        try:
            assert proxy.stop(check=True) == 0
            assert gone.wait(10), "the znode was not deleted"
        finally:
            client.stop()
            client.close()
        assert alive_when_gone == [True]
        log = proxy.log_path.read_text()
        assert log.index("deregistered from ZooKeeper") < log.index("draining") \
            < log.index("stopped")
    finally:
        proxy.stop()


def test_registers_again_after_zookeeper_loses_its_state(tmp_path):
    zk = start_zookeeper(tmp_path / "zk")
    ns = "restarts"
    proxy = start_registered(tmp_path / "p", zk.hosts, ns, session_timeout=1.0)
    try:
        wait_for(lambda: registered(zk.hosts, ns), what="the registration")
        # a crash and restart with its data: still registered, once (the same entry, or a
        # new one when the restart outlasted the one-second session, once ZooKeeper expired
        # the old one)
        connects = _connects(proxy)
        zk.restart()
        [entry] = wait_for(lambda: _connects(proxy) > connects and _once(registered(zk.hosts, ns)),
                           what="the proxy back on the restarted ZooKeeper, registered once")
        assert entry.port == proxy.port
        wait_for(lambda: entry.znode in proxy.log_path.read_text(), what="its log line")

        # a ZooKeeper that lost every session and node (its data wiped)
        logged = _registrations(proxy)
        zk.restart(wipe=True)
        _advance_zxid(zk.hosts)     # ZooKeeper refuses clients that have seen a later zxid
        [again] = wait_for(lambda: registered(zk.hosts, ns), timeout=30,
                           what="the registration after ZooKeeper lost its state")
        assert again.port == proxy.port
        # the znode exists a moment before the proxy logs it
        wait_for(lambda: _registrations(proxy) == logged + 1, what="the new registration")
        assert "session expired" in proxy.log_path.read_text()
        assert proxy.alive()
    finally:
        proxy.stop()
        zk.stop()


def _connects(proxy) -> int:
    return proxy.log_path.read_text().count(": connected")


def _once(entries: list) -> list | None:
    return entries if len(entries) == 1 else None


def _registrations(proxy) -> int:
    return proxy.log_path.read_text().count("registered in ZooKeeper as")


def _advance_zxid(hosts: str, n: int = 200) -> None:
    client = KazooClient(hosts=hosts)
    client.start(timeout=10)
    try:
        client.ensure_path("/zxid")
        for _ in range(n):
            client.set("/zxid", b"")
    finally:
        client.stop()
        client.close()


def test_serves_while_zookeeper_is_down_and_registers_when_it_comes(tmp_path):
    zk = start_zookeeper(tmp_path / "zk")
    zk.stop()
    proxy = start_registered(tmp_path / "p", zk.hosts, "late")   # ready without ZooKeeper
    try:
        wait_for(lambda: "unreachable; serving unregistered" in proxy.log_path.read_text(),
                 what="the warning")
        zk.start()
        [entry] = wait_for(lambda: registered(zk.hosts, "late"), timeout=30,
                           what="the late registration")
        assert entry.port == proxy.port
        zk.stop()       # and gone again: SIGTERM cannot deregister, and must not hang
        t0 = time.monotonic()
        assert proxy.stop(timeout=30) == 0
        assert time.monotonic() - t0 < 20
        assert "goes when its session times out" in proxy.log_path.read_text()
    finally:
        proxy.stop()
        zk.stop()


def test_sigterm_drains_when_zookeeper_hangs_without_answering(tmp_path):
    # a ZooKeeper that stops answering (paused, partitioned) while the proxy believes it is
    # connected: the delete gets no answer, and the drain must still run, soon
    zk = start_zookeeper(tmp_path / "zk")
    proxy = start_registered(tmp_path / "p", zk.hosts, "hung")
    try:
        wait_for(lambda: registered(zk.hosts, "hung"), what="the registration")
        zk._proc.send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        assert proxy.stop(timeout=30) == 0
        assert time.monotonic() - t0 < 15
        log = proxy.log_path.read_text()
        assert "goes when its session times out" in log and "draining" in log
    finally:
        if zk._proc is not None:
            zk._proc.send_signal(signal.SIGCONT)
        proxy.stop()
        zk.stop()


# ------------------------------------------------------------------ docs/discovery.md

DOC = Path(__file__).resolve().parents[3] / "docs" / "discovery.md"


def _blocks(lang: str = "") -> list[str]:
    """The fenced blocks opened with ```<lang>, in order."""
    out, fence, body = [], None, []
    for line in DOC.read_text().splitlines():
        if line.startswith("```"):
            if fence is None:
                fence, body = line[3:], []
            else:
                if fence == lang:
                    out.append("\n".join(body) + "\n")
                fence = None
        elif fence is not None:
            body.append(line)
    return out


def test_doc_settings_load_and_cover_every_key(tmp_path):
    conf = tmp_path / "doc.toml"
    conf.write_text(_blocks("toml")[0])
    s = cfg.load(conf, env={})
    assert s.discovery == cfg.DiscoverySettings(
        zookeeper="zk1:2181,zk2:2181,zk3:2181", namespace="datamap-proxy",
        advertise_host="gw1.example.com", session_timeout=30.0)
    assert s.discovery.namespace == cfg.DiscoverySettings().namespace
    text = DOC.read_text()
    for key in cfg.DiscoverySettings.__dataclass_fields__:
        assert f"| `{key}`" in text, key


def test_doc_znode_is_what_the_proxy_writes():
    name, data = [b.strip() for b in _blocks() if "serverUri=" in b or "instance.uri" in b]
    server = cfg.ServerSettings(host="0.0.0.0", port=10000)
    advertised = advertised_host(cfg.DiscoverySettings(advertise_host="gw1.example.com"), server)
    assert data == znode_data(server, advertised, 10000)
    assert re.fullmatch(re.escape(znode_prefix("datamap-proxy", advertised, 10000))
                        .replace(re.escape(proxy_version()), r"[^;]+") + r"\d{10}", name)
    url = next(b for b in _blocks() if b.startswith("jdbc:hive2://")).strip()
    assert url.endswith(";serviceDiscoveryMode=zooKeeper;zooKeeperNamespace=datamap-proxy")
