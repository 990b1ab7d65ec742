"""Start and stop a real standalone ZooKeeper from the Debian package's jars, for tests.

    zk = start_zookeeper(tmp_path / "zk")        # free 127.0.0.1 port, temp dataDir
    ... KazooClient(zk.hosts) ...
    zk.stop(); zk.restart(); zk.restart(wipe=True)   # the same port each time
    zk.close()

`/usr/share/java/zookeeper.jar` names its dependencies in its manifest (Class-Path), so the
class path is that jar plus an SLF4J binding. A short tickTime lets tests ask for sessions
of one or two seconds (the server allows 2..20 ticks). Up in about a second.
"""
from __future__ import annotations

import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support import waiting
from tests.support.ports import free_port, log_tail, port_accepts
from tests.support.proxy_proc import NO_SERVING, ProxyProc, start_proxy

JARS = Path("/usr/share/java")
ZOOKEEPER_JAR = JARS / "zookeeper.jar"
TICK_MS = 250
JVM_OPTS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx128m"]
START_TIMEOUT_S = 30.0


class ZooKeeperStartError(RuntimeError):
    """The server did not come up; the message carries its log tail."""


def available() -> bool:
    return ZOOKEEPER_JAR.exists() and shutil.which("java") is not None


@dataclass
class ZooKeeper:
    host: str
    port: int
    workdir: Path
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def hosts(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        return self.workdir / "zookeeper.log"

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text(f"tickTime={TICK_MS}\ndataDir={self.data_dir}\nclientPort={self.port}\n"
                       f"clientPortAddress={self.host}\nadmin.enableServer=false\n"
                       "maxClientCnxns=0\nmaxSessionTimeout=60000\n4lw.commands.whitelist=stat,cons,dump\n")
        binding = next((p for p in (JARS / "slf4j-simple.jar", JARS / "slf4j-nop.jar")
                        if p.exists()), None)
        cp = ":".join(str(p) for p in (ZOOKEEPER_JAR, binding) if p)
        argv = ["java", *JVM_OPTS, "-cp", cp,
                "org.apache.zookeeper.server.ZooKeeperServerMain", str(cfg)]
        with open(self.log_path, "ab") as log:
            self._proc = subprocess.Popen(argv, cwd=self.workdir, stdin=subprocess.DEVNULL,
                                          stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._serving():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise ZooKeeperStartError(f"ZooKeeper did not answer on {self.hosts}:\n"
                                          f"{log_tail(self.log_path)}")
            time.sleep(0.1)

    def _serving(self) -> bool:
        """`stat` names the mode only once the server serves requests (`ruok` answers
        earlier, while the database is still loading)."""
        import socket
        if not port_accepts(self.host, self.port):
            return False
        try:
            with socket.create_connection((self.host, self.port), timeout=1) as s:
                s.sendall(b"stat")
                reply = b""
                while chunk := s.recv(4096):
                    reply += chunk
                return b"Mode: " in reply
        except OSError:
            return False

    def stop(self) -> None:
        """SIGKILL: a crashed server, as far as its clients can tell."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait(10)
        self._proc = None

    def restart(self, *, wipe: bool = False) -> None:
        """Stop and start on the same port; `wipe` drops its data (a quorum that lost its
        state: every session and ephemeral node is gone)."""
        self.stop()
        if wipe:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        self.start()

    close = stop


def start_zookeeper(workdir: Path) -> ZooKeeper:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    zk = ZooKeeper("127.0.0.1", free_port(), workdir)
    zk.start()
    return zk


def registered_proxy(workdir: Path, upstream: tuple[str, int], zk_hosts: str, namespace: str,
                     *, session_timeout: float = 2.0, extra_args: list[str] | None = None,
                     serving: bool = True) -> ProxyProc:
    """The proxy (tests/support/proxy_proc.py) registering in `zk_hosts` under `namespace`
    with a short ZooKeeper session, so that a killed replica's entry goes soon; `serving`
    False: no serving engine (nothing to serve)."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / "discovery.toml"
    conf.write_text(f'[discovery]\nzookeeper = "{zk_hosts}"\nnamespace = "{namespace}"\n'
                    f"session_timeout = {session_timeout}\n")
    return start_proxy(workdir, upstream, extra_args=["--config", str(conf), *(extra_args or [])],
                       env=None if serving else NO_SERVING)


def registered(zk_hosts: str, namespace: str) -> list:
    """The entries under `namespace` (proxy.ha.discovery.servers), [] before the first one."""
    from proxy.ha.discovery import servers
    try:
        return servers(zk_hosts, namespace, timeout=5)
    except Exception:  # noqa: BLE001 - no namespace node yet
        return []


def wait_for(predicate, timeout: float = 20.0, what: str = "condition"):
    """Poll `predicate` until it returns something true; that value, or AssertionError."""
    return waiting.wait_until(predicate, timeout=timeout, what=what, interval=0.1)
