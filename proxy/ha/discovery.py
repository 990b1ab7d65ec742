"""ZooKeeper service discovery, the way HiveServer2 registers itself.

With `[discovery] zookeeper` set, a serving proxy holds one EPHEMERAL_SEQUENTIAL znode

    /<namespace>/serverUri=<host>:<port>;version=<version>;sequence=<10 digits>

whose data is the `key=value;...` string Hive JDBC's ZooKeeper helper reads (the keys of
HiveServer2's `hive.server2.zookeeper.publish.configs`). Clients connect with
`jdbc:hive2://<quorum>/;serviceDiscoveryMode=zooKeeper;zooKeeperNamespace=<namespace>`,
pick one child at random, and try another when that one refuses the connection.

The znode lives as long as the ZooKeeper session: a replica that dies (kill -9, lost
host) disappears after `session_timeout`; a replica that stops (SIGTERM) deletes it first,
so no new client is sent to it while it drains. After a session expiry (ZooKeeper down
longer than the timeout, a long pause) the next connected state registers again; a
ZooKeeper that is down at start-up is retried in the background and the proxy serves
meanwhile. kazoo runs its own thread; its callbacks only wake the registrar task, which
does the blocking calls in a worker thread.

`servers()` is the client half (for PyHive, impyla and scripts): the registered entries.
"""
from __future__ import annotations

import asyncio
import logging
import random
import socket
import threading
from dataclasses import dataclass
from importlib import metadata

from proxy.config import DiscoverySettings, ServerSettings

log = logging.getLogger("proxy.discovery")

# Hive JDBC reads `([^=;]*)=([^;]*)` pairs; these are the keys it acts on (HIVE-11581)
_AUTH = {"none": "NONE", "nosasl": "NOSASL", "ldap": "LDAP", "kerberos": "KERBEROS"}
RECHECK_S = 10.0        # also re-check the znode this often (deleted by hand, missed event)
FIRST_CONNECT_S = 2.0
DELETE_TIMEOUT_S = 10.0


def proxy_version() -> str:
    try:
        return metadata.version("datamap-proxy")
    except metadata.PackageNotFoundError:   # a source checkout that was never installed
        return "0.1.0"


def advertised_host(discovery: DiscoverySettings, server: ServerSettings) -> str:
    """The host clients are told to dial: the setting, else the listen address, else (for a
    wildcard listen address, which no client can dial) this machine's FQDN."""
    if discovery.advertise_host:
        return discovery.advertise_host
    if server.host in ("", "0.0.0.0", "::", "[::]"):
        return socket.getfqdn()
    return server.host


def znode_prefix(namespace: str, host: str, port: int) -> str:
    return f"/{namespace.strip('/')}/serverUri={host}:{port};version={proxy_version()};sequence="


def znode_data(server: ServerSettings, host: str, port: int,
               http_port: int | None = None) -> str:
    """The published configuration. Binary is the transport advertised (HTTP is also
    answered on the binary port when sniffing is on); the binary port comes before the HTTP
    one because Hive JDBC keeps the first port it reads."""
    auth = _AUTH.get(server.auth, server.auth.upper())
    if auth == "NONE" and server.users_file:
        auth = "CUSTOM"             # PLAIN with a password check, HiveServer2's name for it
    conf = {"hive.server2.instance.uri": f"{host}:{port}",
            "hive.server2.thrift.bind.host": host,
            "hive.server2.transport.mode": "binary",
            "hive.server2.thrift.port": str(port),
            "hive.server2.thrift.sasl.qop": "auth"}
    if http_port:
        conf["hive.server2.thrift.http.port"] = str(http_port)
        conf["hive.server2.thrift.http.path"] = server.http_path
    conf["hive.server2.authentication"] = auth
    if server.auth == "kerberos" and server.kerberos_principal:
        conf["hive.server2.authentication.kerberos.principal"] = server.kerberos_principal
    conf["hive.server2.use.SSL"] = "true" if server.tls_cert else "false"
    return ";".join(f"{k}={v}" for k, v in conf.items())


class Registration:
    """One replica's znode, kept while the proxy serves (start() once ready, deregister()
    on SIGTERM before the drain)."""

    def __init__(self, discovery: DiscoverySettings, server: ServerSettings, port: int,
                 http_port: int | None = None):
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        self.settings = discovery
        self._server, self._port, self._http_port = server, port, http_port
        self.prefix = self.data = None      # set in the worker thread: the FQDN may ask DNS
        self.path: str | None = None        # the znode this process created last
        # Retry the first connection forever: the proxy serves without ZooKeeper meanwhile
        self.client = KazooClient(
            hosts=discovery.zookeeper, timeout=discovery.session_timeout,
            connection_retry=KazooRetry(max_tries=-1, max_delay=5.0),
            command_retry=KazooRetry(max_tries=3, max_delay=2.0))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake = asyncio.Event()
        self._lock = threading.Lock()
        self._task: asyncio.Task | None = None
        self._stopping = False
        self._last_state: str | None = None

    # -- kazoo's thread ------------------------------------------------------------------
    def _on_state(self, state) -> None:
        if state != self._last_state:
            self._last_state = state
            if state == "CONNECTED":
                log.info("ZooKeeper %s: connected", self.settings.zookeeper)
            elif state == "SUSPENDED":
                log.warning("ZooKeeper %s: connection lost; reconnecting", self.settings.zookeeper)
            else:
                log.warning("ZooKeeper %s: session expired; the registration is gone until "
                            "the next session", self.settings.zookeeper)
        if self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._wake.set)
            except RuntimeError:    # the loop closed under a late callback: nothing to wake
                pass

    # -- the event loop --------------------------------------------------------------------
    def start(self) -> None:
        """Connect in the background and keep the znode registered until deregister()."""
        self._loop = asyncio.get_running_loop()
        self.client.add_listener(self._on_state)
        log.info("registering in ZooKeeper %s under /%s", self.settings.zookeeper,
                 self.settings.namespace.strip("/"))
        self.client.start_async()
        self._task = asyncio.create_task(self._keep(), name="discovery-registrar")

    async def _keep(self) -> None:
        warned = False
        wait = FIRST_CONNECT_S      # then say so when ZooKeeper was not there at start-up
        while not self._stopping:
            try:
                await asyncio.wait_for(self._wake.wait(), wait)
            except asyncio.TimeoutError:
                pass
            self._wake.clear()
            wait = RECHECK_S
            if self._stopping:
                return
            if not self.client.connected:
                # a lost connection keeps the session (and the entry) for a while: the
                # listener said so; this is about never having registered yet
                if not warned and self.path is None:
                    log.warning("ZooKeeper %s unreachable; serving unregistered and retrying",
                                self.settings.zookeeper)
                    warned = True
                continue
            warned = False
            try:
                await asyncio.to_thread(self._ensure)
            except Exception as e:  # noqa: BLE001 - ZooKeeper errors: logged, retried
                log.warning("ZooKeeper registration failed (%s: %s); retrying",
                            type(e).__name__, e)
                await asyncio.sleep(1.0)
                self._wake.set()

    def _ensure(self) -> None:
        """Create the znode unless this session already holds it (blocking)."""
        with self._lock:
            if self._stopping:
                return
            if self.path is not None:
                stat = self.client.exists(self.path)
                if stat is not None and stat.ephemeralOwner == self.client.client_id[0]:
                    return
            if self.prefix is None:
                host = advertised_host(self.settings, self._server)
                self.prefix = znode_prefix(self.settings.namespace, host, self._port)
                self.data = znode_data(self._server, host, self._port, self._http_port).encode()
            namespace = "/" + self.settings.namespace.strip("/")
            self.client.ensure_path(namespace)
            self.path = self.client.create(self.prefix, self.data, ephemeral=True,
                                           sequence=True)
            log.info("registered in ZooKeeper as %s", self.path)

    async def deregister(self) -> None:
        """Delete the znode and wait for ZooKeeper's answer, then close the session. Bounded:
        an unreachable ZooKeeper removes the entry itself when the session times out."""
        self._stopping = True
        self._wake.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
        # Past the session timeout the entry is ZooKeeper's to expire: waiting longer only
        # holds up the drain.
        wait = min(DELETE_TIMEOUT_S, max(1.0, self.settings.session_timeout))
        try:
            await asyncio.wait_for(asyncio.to_thread(self._delete), wait)
        except Exception as e:  # noqa: BLE001 - no answer, or kazoo gave up: drain anyway
            why = (f"no answer within {wait:.0f}s" if isinstance(e, TimeoutError)
                   else f"{type(e).__name__}: {e}")
            log.warning("ZooKeeper did not confirm the deregistration (%s): %s goes when its "
                        "session times out (%.0fs)", why, self.path,
                        self.settings.session_timeout)
        try:
            await asyncio.to_thread(self._close)
        except Exception as e:  # noqa: BLE001 - the session ends with the process anyway
            log.warning("closing the ZooKeeper session failed: %s: %s", type(e).__name__, e)

    def _delete(self) -> None:
        from kazoo.exceptions import NoNodeError
        with self._lock:
            if self.path is None:
                log.info("deregistered (no ZooKeeper entry was held)")
                return
            if not self.client.connected:
                log.warning("ZooKeeper unreachable: %s goes when its session times out "
                            "(%.0fs)", self.path, self.settings.session_timeout)
                return
            try:
                self.client.retry(self.client.delete, self.path)
            except NoNodeError:
                pass
            log.info("deregistered from ZooKeeper: %s deleted", self.path)
            self.path = None

    def _close(self) -> None:
        self.client.remove_listener(self._on_state)
        self.client.stop()
        self.client.close()


# ------------------------------------------------------------------------ client side

@dataclass(frozen=True)
class Server:
    znode: str
    host: str
    port: int
    conf: dict[str, str]


def parse_entry(znode: str, data: str) -> Server:
    """One child of the namespace as Hive JDBC reads it: `k=v;...` pairs, or the older
    bare `host:port`."""
    conf = dict(p.split("=", 1) for p in data.split(";") if "=" in p)
    if conf:
        host = conf.get("hive.server2.thrift.bind.host", "")
        port = int(conf.get("hive.server2.thrift.port") or conf["hive.server2.thrift.http.port"])
    else:
        host, _, port_text = data.rpartition(":")
        port = int(port_text)
    return Server(znode, host, port, conf)


def servers(zookeeper: str, namespace: str, timeout: float = 10.0) -> list[Server]:
    """The registered replicas, in random order (the order a client should try them in,
    as Hive JDBC does)."""
    from kazoo.client import KazooClient
    client = KazooClient(hosts=zookeeper, timeout=timeout)
    client.start(timeout=timeout)
    try:
        ns = "/" + namespace.strip("/")
        out = []
        for child in client.get_children(ns):
            try:
                data, _ = client.get(f"{ns}/{child}")
            except Exception:  # noqa: BLE001 - gone between the listing and the read
                continue
            out.append(parse_entry(child, data.decode()))
    finally:
        client.stop()
        client.close()
    random.shuffle(out)
    return out


def connect(zookeeper: str, namespace: str, open_connection):
    """`open_connection(host, port)` on the registered replicas in random order until one
    accepts, as Hive JDBC does: an entry of a replica that just died stays listed until its
    ZooKeeper session times out, and refuses the connection meanwhile. Raises the last
    error, or LookupError when nothing is registered. For example, PyHive:

        conn = connect("zk:2181", "datamap-proxy",
                       lambda host, port: hive.connect(host=host, port=port, username="me"))
    """
    last: Exception | None = None
    for server in servers(zookeeper, namespace):
        try:
            return open_connection(server.host, server.port)
        except Exception as e:  # noqa: BLE001 - the client library's own "cannot connect"
            log.debug("%s:%d refused (%s); trying another", server.host, server.port, e)
            last = e
    if last is not None:
        raise last
    raise LookupError(f"no datamap-proxy registered under /{namespace.strip('/')} in "
                      f"ZooKeeper {zookeeper}")
