"""Test-side handle on tests/support/spark_driver.py running in a subprocess."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from tests.support.sts import fast_start_env

REPO = Path(__file__).resolve().parents[2]


class DriverError(AssertionError):
    pass


class SparkDriver:
    def __init__(self, mode: str, state_dir: Path, settings: dict, log_path: Path,
                 *, timeout: float = 150.0, wait: bool = True):
        self.log_path = log_path
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
        env.pop("PYSPARK_SUBMIT_ARGS", None)
        env.pop("PYSPARK_GATEWAY_PORT", None)
        env = fast_start_env(env)        # its JVM starts as the test servers' do
        self._log = open(log_path, "ab")
        cwd = log_path.parent / f"{mode}-cwd"
        cwd.mkdir(parents=True, exist_ok=True)
        self.cwd = cwd
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.spark_driver", mode, str(state_dir),
             json.dumps(settings)],
            cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=self._log, text=True, bufsize=1, start_new_session=True)
        self._lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True, name="driver-stdout").start()
        self.hello: dict[str, Any] | None = self._next(timeout) if wait else None

    def wait_ready(self, timeout: float = 150.0) -> dict[str, Any]:
        """The driver's first message ({"ready": ...} or {"error": ...})."""
        if self.hello is None:
            self.hello = self._next(timeout)
        return self.hello

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _next(self, timeout: float) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise DriverError(f"driver silent for {timeout}s; log tail:\n{self.tail()}") from None
        if line is None:
            raise DriverError(f"driver exited (rc={self.proc.poll()}); log tail:\n{self.tail()}")
        return json.loads(line)

    def tail(self, n: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""

    def sql(self, statement: str, timeout: float = 120.0) -> list[list[Any]]:
        reply = self.try_sql(statement, timeout)
        if "error" in reply:
            raise DriverError(f"{statement!r} failed: {reply['error']}")
        return reply["rows"]

    def try_sql(self, statement: str, timeout: float = 120.0) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(statement.replace("\n", " ") + "\n")
        self.proc.stdin.flush()
        return self._next(timeout)

    def close(self, timeout: float = 60.0) -> dict[str, Any] | None:
        """EOF on stdin = stop the engine cleanly; returns the driver's last message."""
        last = None
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                last = self._next(timeout)
                self.proc.wait(timeout=timeout)
            except (DriverError, subprocess.TimeoutExpired, BrokenPipeError):
                self.kill()
        self._log.close()
        return last

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=30)
