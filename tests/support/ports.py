"""Local ports and child processes, for the test servers (Spark Thrift Server, PostgreSQL,
ZooKeeper, the KDC, slapd, the proxy itself). Nothing here needs pyspark, so that
tests/conftest.py and the helpers that only start a process stay importable where pyspark is
not installed (the pure tier, `-m "not spark"`)."""
from __future__ import annotations

import os
import socket
from pathlib import Path


def free_port() -> int:
    """An ephemeral port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as exc:
        return f"<no log: {exc}>"
    return "\n".join(text.splitlines()[-lines:])


def signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def port_accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False
