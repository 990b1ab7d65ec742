"""Run the proxy (`python -m proxy serve ...`) as a subprocess: in front of a given Spark
Thrift Server (start_proxy -> ProxyProc) or embedded with its own Spark (ServeProc). The one
process harness of the tests.

The proxy is started from the repository checkout (PYTHONPATH = repo root) in its own
working directory and process group, on an ephemeral 127.0.0.1 port. It is up when its
stderr shows the word `ready` and the port accepts a connection. `stop()` sends SIGTERM and
returns the exit code (the contract says 0); `stop(check=True)` raises otherwise.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.package import outside_env
from tests.support.ports import free_port, log_tail, port_accepts, signal_group
from tests.support.sts import fast_start_env

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_RE = re.compile(rb"\bready\b", re.IGNORECASE)
START_TIMEOUT_S = 60.0
# for a proxy with nothing to serve (no Spark, no datamaps): no serving engine started in
# the background, which its stop would wait for
NO_SERVING = {"DATAMAP_PROXY_SERVING_ENABLED": "false"}


class ProxyStartError(RuntimeError):
    """The proxy did not come up; the message carries its stderr tail."""


class ProxyExitError(AssertionError):
    """The proxy did not exit 0 on SIGTERM."""


@dataclass
class ProxyProc:
    host: str
    port: int
    pid: int
    log_path: Path          # the proxy's stderr (and stdout)
    workdir: Path
    argv: list[str]
    _proc: subprocess.Popen = field(repr=False)
    http_port: int | None = None        # [server] http_port, when started with http=True

    def alive(self) -> bool:
        return self._proc.poll() is None

    @property
    def returncode(self) -> int | None:
        return self._proc.poll()

    def rss_peak_kb(self) -> int | None:
        """VmHWM of the proxy process (peak resident set), in kB."""
        return self._status_kb("VmHWM")

    def rss_kb(self) -> int | None:
        """VmRSS of the proxy process (resident set now), in kB."""
        return self._status_kb("VmRSS")

    def _status_kb(self, key: str) -> int | None:
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith(f"{key}:"):
                    return int(line.split()[1])
        except OSError:
            return None
        return None

    def cpu_seconds(self) -> float | None:
        """utime + stime of the proxy process, in seconds."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return None
        fields = stat[stat.rindex(")") + 2:].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def stop(self, timeout: float = 30.0, *, check: bool = False) -> int:
        """SIGTERM, wait up to `timeout`, then SIGKILL. Returns the exit code (negative for a
        signal). With check=True, raise ProxyExitError unless it exited 0 after SIGTERM."""
        killed = False
        if self._proc.poll() is None:
            signal_group(self.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                killed = True
                signal_group(self.pid, signal.SIGKILL)
                self._proc.wait(10)
        signal_group(self.pid, signal.SIGKILL)
        log = getattr(self._proc, "_log_file", None)
        if log is not None and not log.closed:
            log.close()
        rc = self._proc.returncode
        if check and (killed or rc != 0):
            raise ProxyExitError(
                f"proxy pid {self.pid} {'ignored SIGTERM for %.0fs' % timeout if killed else ''}"
                f" exit code {rc} (expected 0); stderr tail:\n{log_tail(self.log_path)}")
        return rc


def _spawn(argv: list[str], cwd: Path, log_path: Path,
           env: dict[str, str] | None = None, installed: Path | None = None) -> subprocess.Popen:
    """`argv` in its own process group, output to `log_path`: from this checkout, or, with
    `installed` (a virtual environment), as that environment's own install runs it: its
    bin first on PATH, nothing of this checkout or of the tests' environment importable."""
    if installed is None:
        full = dict(os.environ)
        full["PYTHONPATH"] = os.pathsep.join(
            [str(REPO_ROOT)] + ([full["PYTHONPATH"]] if full.get("PYTHONPATH") else []))
    else:
        full = outside_env(installed)
    full["PYTHONUNBUFFERED"] = "1"
    full.update(env or {})
    log = open(log_path, "wb")
    proc = subprocess.Popen(argv, cwd=cwd, env=full, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    proc._log_file = log  # type: ignore[attr-defined]
    return proc


def _wait_ready(proc: subprocess.Popen, log_path: Path, host: str, port: int,
                timeout: float, argv: list[str]) -> None:
    """Until the proxy logged `ready` and accepts on its port; ProxyStartError otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise ProxyStartError(
                f"proxy exited with code {proc.returncode} during start-up "
                f"({' '.join(argv[1:])}); output:\n{log_tail(log_path)}")
        if READY_RE.search(log_path.read_bytes()) and port_accepts(host, port):
            return
        if time.monotonic() > deadline:
            raise ProxyStartError(
                f"proxy did not log 'ready' and accept on {host}:{port} within "
                f"{timeout:.0f}s; output:\n{log_tail(log_path)}")
        time.sleep(0.1)


def start_proxy(workdir: Path, upstream: tuple[str, int], *, auth: str | None = None,
                upstream_auth: str | None = None, state_dir: Path | None = None,
                extra_args: list[str] | None = None,
                timeout: float = START_TIMEOUT_S,
                env: dict[str, str] | None = None, http: bool = False) -> ProxyProc:
    """Start `python -m proxy serve` against `upstream` (host, port). auth / upstream_auth:
    None (proxy default), "none"/"plain"/"nosasl" as the proxy's CLI takes them. `env` is
    added to the proxy's environment (e.g. DATAMAP_PROXY_* settings, a Kerberos realm's).
    http: also serve the HTTP transport on a port of its own (ProxyProc.http_port)."""
    workdir = Path(workdir).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    host = "127.0.0.1"
    port = free_port()
    state_dir = Path(state_dir) if state_dir else workdir / "state"
    argv = [sys.executable, "-m", "proxy", "serve", "--host", host, "--port", str(port),
            "--upstream", f"{upstream[0]}:{upstream[1]}", "--state-dir", str(state_dir)]
    if auth:
        argv += ["--auth", auth]
    if upstream_auth:
        argv += ["--upstream-auth", upstream_auth]
    http_port = free_port() if http else None
    if http_port is not None:
        argv += ["--http-port", str(http_port)]
    argv += extra_args or []
    log_path = workdir / f"proxy-{port}.log"
    proc = _spawn(argv, workdir, log_path, env)
    pp = ProxyProc(host, port, proc.pid, log_path, workdir, argv, proc, http_port)
    try:
        _wait_ready(proc, log_path, host, port, timeout, argv)
    except BaseException:
        pp.stop(5)
        raise
    return pp


class ServeProc:
    """`python -m proxy serve` in embedded mode (its own Spark), as a subprocess in its own
    process group, for the embedded and end-to-end tests."""

    def __init__(self, workdir: Path, state: Path, timeout: float = 240.0,
                 env: dict[str, str] | None = None, metrics: bool = False,
                 console: bool = False, installed: Path | None = None,
                 config: Path | None = None, fast_start: bool = True):
        """`installed`: run the `datamap-proxy` that virtual environment installed, as a
        user would, instead of this checkout's `python -m proxy`. `config`: its --config
        TOML file (what reload() makes it read again). `fast_start`: the test servers'
        JVM options (C1-only JIT: quick to start, slower queries); benches that time
        Spark pass False, so that Spark runs as it would for a user."""
        self.cwd = workdir / "cwd"
        # [metrics] port and [console] port, on loopback, when asked for (else None)
        self.metrics_port = free_port() if metrics else None
        self.console_port = free_port() if console else None
        env = dict(env or {})
        if self.metrics_port:
            env["DATAMAP_PROXY_METRICS_PORT"] = str(self.metrics_port)
        if self.console_port:
            env["DATAMAP_PROXY_CONSOLE_PORT"] = str(self.console_port)
        self.cwd.mkdir(parents=True)
        self.log_path = workdir / "serve.log"
        t0 = time.monotonic()
        # The port is picked before the embedded Spark starts, and Spark binds ephemeral
        # ports of its own (driver, block manager, connections) meanwhile: it can take ours
        # first (seen once in CI). Then start again on another port, as start_sts does.
        for attempt in range(3):
            self.port = free_port()
            command = ([str(installed / "bin" / "datamap-proxy")] if installed
                       else [sys.executable, "-m", "proxy"])
            argv = [*command, "serve", "--host", "127.0.0.1",
                    "--port", str(self.port), "--state-dir", str(state),
                    "--spark-master", "local[2]"] + (["--config", str(config)] if config else [])
            # the embedded JVM starts with the test servers' fast-start options
            # (tests/support/sts.py), through spark-submit's SPARK_SUBMIT_OPTS: the
            # proxy's own [spark] settings stay the tests' to choose
            spawn_env = {"DATAMAP_PROXY_SPARK_DRIVER_MEMORY": "1g",
                         "DATAMAP_PROXY_SPARK_CONF": "spark.sql.shuffle.partitions=4",
                         **(env or {})}
            self.proc = _spawn(argv, self.cwd, self.log_path,
                               fast_start_env(spawn_env) if fast_start else spawn_env,
                               installed)
            self._log = self.proc._log_file   # type: ignore[attr-defined]
            try:
                _wait_ready(self.proc, self.log_path, "127.0.0.1", self.port, timeout, argv)
                break
            except ProxyStartError as e:
                self.kill()
                if "address already in use" in str(e) and attempt < 2:
                    continue
                raise AssertionError(f"proxy serve did not get ready: {e}") from None
        self.ready_seconds = time.monotonic() - t0
        m = re.search(r"engine: Spark Thrift server on 127\.0\.0\.1:(\d+)",
                      self.log_path.read_text(errors="replace"))
        assert m, self.tail()
        self.engine_port = int(m.group(1))
        self.jvm_pids = self._children(self.proc.pid)

    @staticmethod
    def _children(pid: int) -> list[int]:
        out = []
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                out += [int(c) for c in (task / "children").read_text().split()]
            except OSError:
                pass
        return out

    def jvm_pids_alive(self) -> list[int]:
        return [p for p in self.jvm_pids if Path(f"/proc/{p}").exists()
                and "zombie" not in Path(f"/proc/{p}/status").read_text().lower()]

    def reload(self, timeout: float = 30.0) -> str:
        """SIGHUP to the proxy (not its JVM): it reads its settings again; its log line
        saying what it applied, once written."""
        start = self.log_path.stat().st_size
        os.kill(self.proc.pid, signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while True:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                new = f.read().decode(errors="replace")
            line = next((ln for ln in new.splitlines() if "SIGHUP: settings" in ln), None)
            if line is not None:
                return line
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"no SIGHUP reload logged within {timeout:.0f}s:\n"
                                     f"{self.tail()}")
            time.sleep(0.1)

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])

    def stop(self, timeout: float = 90.0) -> int:
        signal_group(self.proc.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        finally:
            self._log.close()

    def kill(self) -> None:
        if self.proc.poll() is None:
            signal_group(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        if not self._log.closed:
            self._log.close()
