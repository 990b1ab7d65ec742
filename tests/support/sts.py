"""Start and stop a real Spark Thrift Server (STS) from the installed pyspark, for tests.

Each server gets its own working directory (cwd, Derby home, warehouse, log) and an
ephemeral 127.0.0.1 port, runs in its own process group, and is stopped by PID. It is
"up" only when the port accepts connections AND a real query answers through PyHive,
because STS opens the port a little before the Hive session machinery is usable.

    sts = start_sts(tmp_path / "sts")            # auth="NONE" (SASL PLAIN) or "NOSASL"
    ... connect to sts.host, sts.port ...
    sts.stop()
"""
from __future__ import annotations

import functools
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port, log_tail, port_accepts, signal_group

START_TIMEOUT_S = 180.0     # ~25 s on an idle machine; several times that under load
# C1-only JIT: halves start-up CPU and wall time (measured 49 s vs 110 s under load) at the
# cost of slower long-running queries. Derby without fsync: spares the syncs of creating a
# fresh metastore's schema at the first query. For test servers, never for benchmarks.
FAST_START_JVM_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dderby.system.durability=test"


def fast_start_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` plus SPARK_SUBMIT_OPTS with FAST_START_JVM_OPTS, for a process that starts a
    Spark driver through spark-submit (the embedded engine of `serve`, a pipeline session):
    spark-submit puts them on the driver JVM's command line before the application's own
    spark.driver.extraJavaOptions, which therefore still win. Options already in `env`
    come after ours."""
    env = dict(env or {})
    env["SPARK_SUBMIT_OPTS"] = " ".join(
        o for o in (FAST_START_JVM_OPTS, env.get("SPARK_SUBMIT_OPTS", "")) if o)
    return env


@functools.cache
def spark_home() -> Path:
    """The installed pyspark's directory (bin/spark-submit, bin/beeline, jars/). Imported
    here, at first use, so that this module loads where pyspark is not installed."""
    import pyspark
    return Path(pyspark.__file__).resolve().parent


class StsStartError(RuntimeError):
    """The Thrift server did not come up; the message carries its log tail."""


def spark_env() -> dict[str, str]:
    env = dict(os.environ)
    env["SPARK_HOME"] = str(spark_home())
    # Keep the JVM from picking up a stray config from the caller's environment.
    env.pop("SPARK_CONF_DIR", None)
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    return env


@dataclass
class Sts:
    host: str
    port: int
    pid: int
    log_path: Path
    workdir: Path
    auth: str
    _proc: subprocess.Popen = field(repr=False)
    http: bool = False          # transportMode=http at /cliservice on `port`

    def alive(self) -> bool:
        return self._proc.poll() is None

    def open_sessions(self) -> int:
        """How many HiveServer2 sessions are open right now. STS creates one operation-log
        directory per session at OpenSession and deletes it at CloseSession, so counting
        them needs no access to the server's internals."""
        oplogs = self.workdir / "oplogs"
        if not oplogs.is_dir():
            return 0
        return sum(1 for p in oplogs.iterdir() if p.is_dir())

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM the server's process group, then SIGKILL if it lingers. Idempotent."""
        if self._proc.poll() is None:
            signal_group(self.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                signal_group(self.pid, signal.SIGKILL)
                self._proc.wait(10)
        # Children that outlived the leader (none expected: spark-class execs java).
        signal_group(self.pid, signal.SIGKILL)
        log = getattr(self._proc, "_log_file", None)
        if log is not None and not log.closed:
            log.close()

    def kill(self) -> None:
        """SIGKILL the whole server at once, like a crash: no shutdown hook runs, every
        client connection drops. `start_sts(sts.workdir, port=sts.port)` starts it again
        on the same port and metastore."""
        signal_group(self.pid, signal.SIGKILL)
        self._proc.wait(30)
        self.stop()


def probe_query(host: str, port: int, auth: str, timeout: float = 30.0,
                http: bool = False) -> None:
    """Run SELECT 1 through PyHive; raises on any failure."""
    from pyhive import hive

    if http:
        conn = hive.connect(host=host, port=port, scheme="http", username="probe", password="x")
    else:
        conn = hive.connect(host=host, port=port, username="probe", auth=auth,
                            **({"password": "x"} if auth in ("LDAP", "CUSTOM") else {}))
    try:
        cur = conn.cursor()
        cur.execute("SELECT 1")
        rows = cur.fetchall()
        if rows != [(1,)]:
            raise RuntimeError(f"probe query returned {rows!r}")
        cur.close()
    finally:
        conn.close()


def start_sts(workdir: Path, *, auth: str = "NONE", timeout: float = START_TIMEOUT_S,
              extra_conf: dict[str, str] | None = None, fast_start: bool = False,
              port: int | None = None, http: bool = False) -> Sts:
    """Start an STS in `workdir` (created if needed). auth: "NONE" (SASL PLAIN, any
    user/password) or "NOSASL" (raw binary transport). fast_start: JVM options that favour
    start-up over peak speed (tests). port: this one instead of a free one (a restart, for
    clients that keep the address). http: HiveServer2's http transport (Basic auth, path
    /cliservice) instead of the binary one. Returns once a query answers."""
    auth = auth.upper()
    if auth not in ("NONE", "NOSASL"):
        raise ValueError(f"unsupported STS auth {auth!r}: expected NONE or NOSASL")
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    last_error: Exception | None = None
    for attempt in range(2):   # a second try covers losing the ephemeral-port race
        try:
            return _start_once(workdir, auth, timeout, extra_conf or {}, attempt,
                               FAST_START_JVM_OPTS if fast_start else "", port, http)
        except StsStartError as exc:
            last_error = exc
            if "Address already in use" not in str(exc) or port is not None:
                raise
    assert last_error is not None
    raise last_error


def _start_once(workdir: Path, auth: str, timeout: float, extra_conf: dict[str, str],
                attempt: int, jvm_opts: str, port: int | None = None,
                http: bool = False) -> Sts:
    host = "127.0.0.1"
    port = port or free_port()
    log_path = workdir / f"sts-{attempt}.log"
    if log_path.exists():              # a restart in the same directory keeps the first log
        log_path = workdir / f"sts-{attempt}-{int(time.time() * 1000)}.log"
    derby_home = workdir / "derby"
    derby_home.mkdir(exist_ok=True)
    for sub in ("scratch", "scratch-local", "oplogs", "tmp"):
        (workdir / sub).mkdir(exist_ok=True)
    cmd = [
        str(spark_home() / "bin" / "spark-submit"),
        "--master", "local[2]",
        "--class", "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2",
        "--name", f"test-sts-{port}",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=4",
        "--conf", f"spark.sql.warehouse.dir={workdir / 'warehouse'}",
        "--conf", f"spark.local.dir={workdir / 'tmp'}",
        "--driver-java-options", f"-Dderby.system.home={derby_home} {jvm_opts}".strip(),
        "--hiveconf", f"hive.server2.thrift.port={port}",
        "--hiveconf", f"hive.server2.thrift.bind.host={host}",
        "--hiveconf", f"hive.exec.scratchdir={workdir / 'scratch'}",
        "--hiveconf", f"hive.exec.local.scratchdir={workdir / 'scratch-local'}",
        "--hiveconf", f"hive.querylog.location={workdir / 'querylog'}",
        "--hiveconf", f"hive.server2.logging.operation.log.location={workdir / 'oplogs'}",
    ]
    if auth == "NOSASL":
        cmd += ["--hiveconf", "hive.server2.authentication=NOSASL"]
    if http:
        cmd += ["--hiveconf", "hive.server2.transport.mode=http",
                "--hiveconf", f"hive.server2.thrift.http.port={port}",
                "--hiveconf", "hive.server2.thrift.http.path=cliservice"]
    for key, value in extra_conf.items():
        cmd += ["--conf", f"{key}={value}"]
    cmd.append("spark-internal")

    log = open(log_path, "wb")
    proc = subprocess.Popen(cmd, cwd=workdir, env=spark_env(), stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    proc._log_file = log  # type: ignore[attr-defined]  # closed by Sts.stop
    sts = Sts(host, port, proc.pid, log_path, workdir, auth, proc, http)

    deadline = time.monotonic() + timeout
    last_probe_error: Exception | None = None
    try:
        while True:
            if proc.poll() is not None:
                raise StsStartError(
                    f"Spark Thrift Server exited with code {proc.returncode} during start-up "
                    f"(port {port}, log {log_path}):\n{log_tail(log_path)}")
            if time.monotonic() > deadline:
                raise StsStartError(
                    f"Spark Thrift Server did not answer a query within {timeout:.0f}s "
                    f"(port {port}, last probe error: {last_probe_error!r}, log {log_path}):\n"
                    f"{log_tail(log_path)}")
            if "Address already in use" in log_tail(log_path, 200):
                raise StsStartError(f"port {port}: Address already in use\n{log_tail(log_path)}")
            if port_accepts(host, port):
                try:
                    probe_query(host, port, auth, http=http)
                    return sts
                except Exception as exc:  # not ready yet: keep polling until the deadline
                    last_probe_error = exc
            time.sleep(0.25)
    except BaseException:
        sts.stop()
        raise


if __name__ == "__main__":  # manual smoke: python -m tests.support.sts /tmp/x
    import sys
    import tempfile

    d = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="sts-"))
    t0 = time.monotonic()
    s = start_sts(d, auth=(sys.argv[2] if len(sys.argv) > 2 else "NONE"))
    print(f"up in {time.monotonic() - t0:.1f}s: {s.host}:{s.port} pid {s.pid} log {s.log_path}")
    s.stop()
    print("stopped")
