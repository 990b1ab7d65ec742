"""Embedded mode figures, measured in one run of `python -m proxy serve` (no --upstream):

  start-up: seconds from launch to the `ready` log line (Spark + its Thrift server + proxy)
  idle RSS: the proxy's Python process and its Spark JVM, after start-up
  latency:  median of a tiny query (SELECT 1, PyHive, one connection) straight to the
            embedded Thrift server vs through the proxy; the difference is the proxy's cost

    python bench/embedded.py [--queries 200] [--keep-state DIR]
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def latency_ms(ports: dict[str, int], n: int, warmup: int = 30) -> dict[str, tuple[float, float]]:
    """{name: (median, p95)} of SELECT 1 round trips, one PyHive connection per endpoint,
    the endpoints alternating query by query so that drift (JIT warm-up, other load on the
    machine) hits both alike."""
    from pyhive import hive

    conns = {name: hive.connect(host="127.0.0.1", port=port, username="bench")
             for name, port in ports.items()}
    samples: dict[str, list[float]] = {name: [] for name in ports}
    try:
        cursors = {name: c.cursor() for name, c in conns.items()}
        for i in range(n + warmup):
            for name, cur in cursors.items():
                t0 = time.perf_counter()
                cur.execute("SELECT 1")
                cur.fetchall()
                if i >= warmup:
                    samples[name].append((time.perf_counter() - t0) * 1000)
    finally:
        for c in conns.values():
            c.close()
    out = {}
    for name, xs in samples.items():
        xs.sort()
        out[name] = (statistics.median(xs), xs[max(0, int(len(xs) * 0.95) - 1)])
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--keep-state", help="state dir to use (default: a temp dir, removed)")
    a = ap.parse_args(argv)
    tmp = tempfile.TemporaryDirectory(prefix="bench-embedded-")
    state = Path(a.keep_state) if a.keep_state else Path(tmp.name) / "state"
    cwd = Path(tmp.name) / "cwd"
    cwd.mkdir()
    log_path = Path(tmp.name) / "serve.log"
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               DATAMAP_PROXY_SPARK_DRIVER_MEMORY="1g",
               DATAMAP_PROXY_SPARK_CONF="spark.sql.shuffle.partitions=4")
    with open(log_path, "wb") as log:
        t0 = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "proxy", "serve", "--host", "127.0.0.1",
                                 "--port", str(port), "--state-dir", str(state),
                                 "--spark-master", "local[2]"],
                                cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            while not re.search(r"\bready\b", log_path.read_text(errors="replace")):
                if proc.poll() is not None or time.monotonic() - t0 > 300:
                    print(log_path.read_text(errors="replace")[-3000:], file=sys.stderr)
                    return 1
                time.sleep(0.1)
            ready = time.monotonic() - t0
            text = log_path.read_text(errors="replace")
            engine_port = int(re.search(r"Spark Thrift server on 127\.0\.0\.1:(\d+)", text)[1])
            time.sleep(3)
            jvm = sum(rss_mib(p) for p in children(proc.pid))
            print(f"start-up to ready: {ready:.1f} s")
            print(f"idle RSS: proxy (python) {rss_mib(proc.pid):.0f} MiB, Spark JVM {jvm:.0f} MiB")
            lat = latency_ms({"direct": engine_port, "proxy": port}, a.queries)
            direct, proxied = lat["direct"], lat["proxy"]
            print(f"SELECT 1 x{a.queries}: direct median {direct[0]:.2f} ms (p95 {direct[1]:.2f}), "
                  f"proxy median {proxied[0]:.2f} ms (p95 {proxied[1]:.2f}), "
                  f"added {proxied[0] - direct[0]:.2f} ms")
            print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            rc = proc.wait(120)
            print(f"SIGTERM -> exit {rc}")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
