"""Two proxy replicas in front of the session's Spark Thrift Server, registered in a real
ZooKeeper; clients find them the way they find HiveServer2 (docs/discovery.md): beeline /
Hive JDBC with serviceDiscoveryMode=zooKeeper, PyHive and impyla through
proxy.ha.discovery.connect. Then one replica is killed (kill -9) while a workload runs."""
from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import uuid

import pytest

from proxy.ha.discovery import connect
from tests.support.clients import BEELINE_JVM_OPTS, beeline, impyla_connect, pyhive_connect
from tests.support.sts import spark_env
from tests.support.zookeeper import registered, registered_proxy, wait_for

# The replica killed below keeps its entry listed for this long: Hive JDBC meets the dead
# entry and must go on to the live one. The survivor's session is short.
VICTIM_SESSION_S = 20.0


@pytest.fixture(scope="module")
def replicas(sts, zookeeper, itest_dir):
    ns = f"replicas-{uuid.uuid4().hex[:6]}"
    upstream = (sts.host, sts.port)
    victim = registered_proxy(itest_dir / "replica-victim", upstream, zookeeper.hosts, ns,
                              session_timeout=VICTIM_SESSION_S)
    survivor = registered_proxy(itest_dir / "replica-survivor", upstream, zookeeper.hosts, ns)
    try:
        wait_for(lambda: len(registered(zookeeper.hosts, ns)) == 2, what="two registrations")
        yield ns, victim, survivor
    finally:
        victim.stop()
        survivor.stop()


def zk_url(zk_hosts: str, ns: str) -> str:
    return f"jdbc:hive2://{zk_hosts}/default;serviceDiscoveryMode=zooKeeper;zooKeeperNamespace={ns}"


def beeline_connects(url: str, n: int, workdir) -> tuple[int, str]:
    """One beeline (one JVM) that connects through ZooKeeper `n` times (each a fresh pick
    of a replica) and runs SELECT on each; returns (exit code, stdout)."""
    script = []
    for i in range(n):
        if i:
            script += ["!close", f"!connect {url} me x"]
        script.append(f"SELECT {100 + i} AS probe;")
    path = workdir / f"zk-{uuid.uuid4().hex[:6]}.sql"
    path.write_text("\n".join(script) + "\n")
    env = spark_env()
    env["JAVA_TOOL_OPTIONS"] = BEELINE_JVM_OPTS
    proc = subprocess.run(
        [str(beeline()), "-u", url, "-n", "me", "-p", "x", "--outputformat=csv2", "--silent=true",
         "-f", str(path)], cwd=workdir, env=env, capture_output=True, timeout=180)
    return proc.returncode, proc.stdout.decode(errors="replace") + proc.stderr.decode(errors="replace")


def pyhive_via(zk_hosts: str, ns: str):
    return connect(zk_hosts, ns, lambda host, port: pyhive_connect(host, port))


def query_one(conn, sql: str = "SELECT 1"):
    cur = conn.cursor()
    try:
        cur.execute(sql)
        return cur.fetchall()
    finally:
        cur.close()


def test_clients_find_both_replicas_through_zookeeper(replicas, zookeeper, itest_dir):
    ns, victim, survivor = replicas
    rc, out = beeline_connects(zk_url(zookeeper.hosts, ns), 1, itest_dir)
    assert rc == 0 and "\n100\n" in out, out[-3000:]

    served = set()
    for _ in range(16):
        conn = connect(zookeeper.hosts, ns,
                       lambda host, port: (port, pyhive_connect(host, port)))
        port, c = conn
        try:
            assert query_one(c) == [(1,)]
        finally:
            c.close()
        served.add(port)
    assert served == {victim.port, survivor.port}

    conn = connect(zookeeper.hosts, ns, lambda host, port: impyla_connect(host, port))
    try:
        cur = conn.cursor()
        cur.execute("SELECT 2 AS two")
        assert cur.fetchall() == [(2,)]
        cur.close()
    finally:
        conn.close()


def test_killed_replica_new_connections_go_to_the_other(replicas, zookeeper, itest_dir):
    ns, victim, survivor = replicas
    log: list[tuple[float, int | None, str]] = []      # (start time, port, outcome)
    stop = threading.Event()

    def workload():
        while not stop.is_set():
            t0 = time.monotonic()
            try:
                port, c = connect(zookeeper.hosts, ns,
                                  lambda host, p: (p, pyhive_connect(host, p)))
            except Exception as e:  # noqa: BLE001 - recorded, asserted below
                log.append((t0, None, f"connect: {e}"))
                continue
            try:
                for _ in range(3):
                    query_one(c)
                log.append((t0, port, "ok"))
            except Exception as e:  # noqa: BLE001
                log.append((t0, port, f"query: {e}"))
            finally:
                try:
                    c.close()
                except Exception:  # noqa: BLE001 - the victim's connection is gone
                    pass

    threads = [threading.Thread(target=workload, name=f"zk-workload-{i}") for i in range(2)]
    for t in threads:
        t.start()
    try:
        wait_for(lambda: {p for _, p, o in log if o == "ok"} >= {victim.port, survivor.port},
                 what="the workload on both replicas")
        killed_at = time.monotonic()
        os.killpg(victim.pid, signal.SIGKILL)
        # the dead entry is still listed: Hive JDBC picks it about half of the time, and
        # must go on to the survivor
        assert len(registered(zookeeper.hosts, ns)) == 2
        rc, out = beeline_connects(zk_url(zookeeper.hosts, ns), 4, itest_dir)
        assert rc == 0 and all(f"\n{100 + i}\n" in out for i in range(4)), out[-3000:]
        wait_for(lambda: [e.port for e in registered(zookeeper.hosts, ns)] == [survivor.port],
                 timeout=VICTIM_SESSION_S + 15, what="the dead replica's entry to expire")
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    after = [(p, o) for t0, p, o in log if t0 > killed_at + 0.5]
    assert after and all(o == "ok" and p == survivor.port for p, o in after), after[:5]
    # only what ran on the victim when it died may fail
    failed = [(p, o) for t0, p, o in log if o != "ok"]
    assert all(p == victim.port for p, _ in failed), failed


def test_hive_jdbc_takes_the_published_authentication(sts, zookeeper, itest_dir):
    """A NOSASL replica publishes hive.server2.authentication=NOSASL; beeline's URL does not
    say auth=noSasl, Hive JDBC reads it from the znode (a SASL client would hang up on a
    raw-Thrift server)."""
    ns = f"nosasl-{uuid.uuid4().hex[:6]}"
    proxy = registered_proxy(itest_dir / "replica-nosasl", (sts.host, sts.port),
                             zookeeper.hosts, ns, extra_args=["--auth", "nosasl"])
    try:
        [entry] = wait_for(lambda: registered(zookeeper.hosts, ns), what="the registration")
        assert entry.conf["hive.server2.authentication"] == "NOSASL"
        rc, out = beeline_connects(zk_url(zookeeper.hosts, ns), 1, itest_dir)
        assert rc == 0 and "\n100\n" in out, out[-3000:]
    finally:
        assert proxy.stop() == 0
