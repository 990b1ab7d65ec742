"""Run the proxy (`python -m proxy serve ...`) as a subprocess, for integration tests.

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

from tests.support.sts import _port_accepts, _signal_group, free_port, log_tail

REPO_ROOT = Path(__file__).resolve().parents[2]
READY_RE = re.compile(rb"\bready\b", re.IGNORECASE)
START_TIMEOUT_S = 60.0


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
            _signal_group(self.pid, signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                killed = True
                _signal_group(self.pid, signal.SIGKILL)
                self._proc.wait(10)
        _signal_group(self.pid, signal.SIGKILL)
        log = getattr(self._proc, "_log_file", None)
        if log is not None and not log.closed:
            log.close()
        rc = self._proc.returncode
        if check and (killed or rc != 0):
            raise ProxyExitError(
                f"proxy pid {self.pid} {'ignored SIGTERM for %.0fs' % timeout if killed else ''}"
                f" exit code {rc} (expected 0); stderr tail:\n{log_tail(self.log_path)}")
        return rc


def start_proxy(workdir: Path, upstream: tuple[str, int], *, auth: str | None = None,
                upstream_auth: str | None = None, state_dir: Path | None = None,
                extra_args: list[str] | None = None,
                timeout: float = START_TIMEOUT_S) -> ProxyProc:
    """Start `python -m proxy serve` against `upstream` (host, port). auth / upstream_auth:
    None (proxy default), "none"/"plain"/"nosasl" as the proxy's CLI takes them."""
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
    argv += extra_args or []

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYTHONUNBUFFERED"] = "1"
    log_path = workdir / f"proxy-{port}.log"
    log = open(log_path, "wb")
    proc = subprocess.Popen(argv, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    proc._log_file = log  # type: ignore[attr-defined]
    pp = ProxyProc(host, port, proc.pid, log_path, workdir, argv, proc)

    deadline = time.monotonic() + timeout
    try:
        while True:
            if proc.poll() is not None:
                raise ProxyStartError(
                    f"proxy exited with code {proc.returncode} during start-up "
                    f"({' '.join(argv[1:])}); output:\n{log_tail(log_path)}")
            if READY_RE.search(log_path.read_bytes()) and _port_accepts(host, port):
                return pp
            if time.monotonic() > deadline:
                raise ProxyStartError(
                    f"proxy did not log 'ready' and accept on {host}:{port} within "
                    f"{timeout:.0f}s; output:\n{log_tail(log_path)}")
            time.sleep(0.1)
    except BaseException:
        pp.stop(5)
        raise
