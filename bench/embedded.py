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
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.proxy_proc import ServeProc  # noqa: E402 - the tests' harness


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


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
    try:
        srv = ServeProc(Path(tmp.name), state, timeout=300, fast_start=False)
    except AssertionError as e:
        print(e, file=sys.stderr)
        return 1
    try:
        time.sleep(3)
        jvm = sum(rss_mib(p) for p in srv.jvm_pids_alive())
        print(f"start-up to ready: {srv.ready_seconds:.1f} s")
        print(f"idle RSS: proxy (python) {rss_mib(srv.proc.pid):.0f} MiB, Spark JVM {jvm:.0f} MiB")
        lat = latency_ms({"direct": srv.engine_port, "proxy": srv.port}, a.queries)
        direct, proxied = lat["direct"], lat["proxy"]
        print(f"SELECT 1 x{a.queries}: direct median {direct[0]:.2f} ms (p95 {direct[1]:.2f}), "
              f"proxy median {proxied[0]:.2f} ms (p95 {proxied[1]:.2f}), "
              f"added {proxied[0] - direct[0]:.2f} ms")
        print(f"load average during the run: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    finally:
        print(f"SIGTERM -> exit {srv.stop(120)}")
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
