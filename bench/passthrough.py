"""Pass-through overhead of the proxy, measured in one run against the same Spark Thrift
Server, with the same client, directly and through the proxy:

  (a) tiny query round trip (ExecuteStatement + FetchResults + CloseOperation of SELECT 1):
      p50/p90 latency each way and the ms the proxy adds at p50 (target <= 2 ms)
  (b) fetching 1,000,000 rows x 3 columns with FetchResults(maxRows=10000): rows/s each
      way and the throughput ratio proxy/direct (target >= 0.95)
  (c) 200 concurrent sessions x 20 small queries through the proxy: errors (target 0),
      wall time, and the proxy's peak RSS (VmHWM) and CPU seconds

Usage:  python bench/passthrough.py [--rounds N] [--sessions 200] [--queries 20]
The client is PyHive's generated TCLIService over thrift_sasl (SASL PLAIN), used raw, so
that client-side row conversion does not hide the proxy's cost. Direct and proxy runs are
interleaved in blocks so that load drift on a shared machine hits both sides equally.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.proxy_proc import start_proxy  # noqa: E402
from tests.support.sts import start_sts  # noqa: E402

BIG_QUERY = "SELECT id, id * 2 AS twice, cast(id AS string) AS s FROM range(1000000)"


class Raw:
    """One HS2 session with the generated Thrift client (no per-row conversion)."""

    def __init__(self, host: str, port: int):
        from pyhive import hive
        from TCLIService import ttypes
        self.t = ttypes
        self.conn = hive.connect(host=host, port=port, username="bench", auth="NONE")
        self.client = self.conn.client
        self.session = self.conn.sessionHandle

    def _ok(self, resp):
        if resp.status.statusCode != 0:
            raise RuntimeError(f"[{resp.status.sqlState}] {resp.status.errorMessage}")
        return resp

    def run(self, sql: str, batch: int = 10000) -> int:
        """Execute synchronously, fetch every row, close; returns the row count."""
        t = self.t
        op = self._ok(self.client.ExecuteStatement(t.TExecuteStatementReq(
            sessionHandle=self.session, statement=sql, runAsync=False))).operationHandle
        rows = 0
        try:
            while True:
                res = self._ok(self.client.FetchResults(t.TFetchResultsReq(
                    operationHandle=op, orientation=t.TFetchOrientation.FETCH_NEXT,
                    maxRows=batch))).results
                n = 0
                for col in res.columns or []:
                    for attr in ("i32Val", "i64Val", "stringVal", "boolVal", "doubleVal",
                                 "byteVal", "i16Val", "binaryVal"):
                        v = getattr(col, attr)
                        if v is not None:
                            n = len(v.values)
                            break
                    break
                if n == 0:
                    break
                rows += n
        finally:
            self._ok(self.client.CloseOperation(t.TCloseOperationReq(operationHandle=op)))
        return rows

    def close(self):
        self.conn.close()


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(p / 100 * (len(s) - 1))))
    return s[k]


def bench_latency(direct: Raw, proxy: Raw, rounds: int) -> dict:
    """Alternate direct and proxy query by query (random order within each pair), so that
    load changes on a shared machine hit both sides alike; keep the pairs."""
    lat = {"direct": [], "proxy": [], "pairs": []}
    for side in (direct, proxy):          # warm-up
        for _ in range(20):
            side.run("SELECT 1")
    rng = random.Random(7)
    for _ in range(rounds):
        sample = {}
        order = [("direct", direct), ("proxy", proxy)]
        rng.shuffle(order)
        for name, side in order:
            t0 = time.perf_counter()
            side.run("SELECT 1")
            sample[name] = (time.perf_counter() - t0) * 1000
            lat[name].append(sample[name])
        lat["pairs"].append(sample["proxy"] - sample["direct"])
    return lat


def bench_throughput(direct: Raw, proxy: Raw, repeats: int) -> dict:
    secs = {"direct": [], "proxy": []}
    for i in range(repeats):
        order = [("direct", direct), ("proxy", proxy)]
        if i % 2:
            order.reverse()
        for name, side in order:
            t0 = time.perf_counter()
            n = side.run(BIG_QUERY)
            secs[name].append(time.perf_counter() - t0)
            if n != 1_000_000:
                raise RuntimeError(f"{name}: fetched {n} rows, expected 1000000")
    return secs


def bench_concurrency(host: str, port: int, sessions: int, queries: int) -> dict:
    errors: list[str] = []
    lock = threading.Lock()
    start = threading.Barrier(sessions)

    def worker(i: int):
        try:
            start.wait(timeout=120)
            raw = Raw(host, port)
            try:
                for q in range(queries):
                    rows = raw.run(f"SELECT {i * 1000 + q} AS v")
                    if rows != 1:
                        raise RuntimeError(f"session {i} query {q}: {rows} rows")
            finally:
                raw.close()
        except Exception as exc:  # noqa: BLE001 - counted and reported
            with lock:
                errors.append(f"session {i}: {type(exc).__name__}: {exc}")

    threads = [threading.Thread(target=worker, args=(i,), name=f"bench-{i}", daemon=True)
               for i in range(sessions)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join(600)
    return {"wall_s": time.perf_counter() - t0, "errors": errors,
            "hung": sum(th.is_alive() for th in threads)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=400, help="tiny queries per side")
    ap.add_argument("--repeats", type=int, default=5, help="1M-row fetches per side")
    ap.add_argument("--sessions", type=int, default=200, help="0 skips (c)")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--concurrency-direct", action="store_true",
                    help="also run (c) directly against Spark, for its wall time")
    args = ap.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-passthrough-"))
    print(f"workdir {workdir}", flush=True)
    sts = start_sts(workdir / "sts")
    proxy = None
    try:
        proxy = start_proxy(workdir / "proxy", (sts.host, sts.port))
        print(f"STS {sts.host}:{sts.port} pid {sts.pid}; proxy {proxy.host}:{proxy.port} "
              f"pid {proxy.pid}", flush=True)
        cpu0 = proxy.cpu_seconds()
        direct, via = Raw(sts.host, sts.port), Raw(proxy.host, proxy.port)

        c0 = proxy.cpu_seconds()
        lat = bench_latency(direct, via, args.rounds)
        c1 = proxy.cpu_seconds()
        d50, p50 = statistics.median(lat["direct"]), statistics.median(lat["proxy"])
        paired = statistics.median(lat["pairs"])
        print(f"\n(a) tiny query round trip (execute + fetch + close), ms; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        for name in ("direct", "proxy"):
            print(f"    {name:6s} p50 {statistics.median(lat[name]):7.2f}  p90 {pct(lat[name], 90):7.2f}"
                  f"  n={len(lat[name])}")
        print(f"    added at p50: {p50 - d50:+.2f} ms; median of paired differences "
              f"{paired:+.2f} ms (target <= 2 ms)  -> {'OK' if paired <= 2 else 'MISSED'}")
        print(f"    proxy CPU per query: {(c1 - c0) * 1000 / (args.rounds + 20):.2f} ms", flush=True)

        c2 = proxy.cpu_seconds()
        secs = bench_throughput(direct, via, args.repeats)
        c3 = proxy.cpu_seconds()
        ds, ps = statistics.median(secs["direct"]), statistics.median(secs["proxy"])
        ratio, best = ds / ps, min(secs["direct"]) / min(secs["proxy"])
        print(f"\n(b) 1,000,000 rows x 3 columns, FetchResults(maxRows=10000); load average "
              f"{os.getloadavg()[0]:.1f}")
        for name, s_ in (("direct", ds), ("proxy", ps)):
            print(f"    {name:6s} median {s_:6.2f} s  = {1_000_000 / s_:10,.0f} rows/s"
                  f"  (runs: {', '.join(f'{x:.2f}' for x in secs[name])})")
        print(f"    throughput ratio proxy/direct: median {ratio:.3f}, best-of-{args.repeats} "
              f"{best:.3f} (target >= 0.95 on the median)  -> {'OK' if ratio >= 0.95 else 'MISSED'}")
        print(f"    proxy CPU per 1M rows: {(c3 - c2) / args.repeats:.2f} s", flush=True)
        direct.close()
        via.close()

        if args.sessions <= 0:
            print(f"\nproxy exit code after SIGTERM: {proxy.stop(timeout=60)}")
            proxy = None
            return 0
        cpu1 = proxy.cpu_seconds()
        conc = bench_concurrency(proxy.host, proxy.port, args.sessions, args.queries)
        cpu2 = proxy.cpu_seconds()
        print(f"\n(c) {args.sessions} concurrent sessions x {args.queries} queries via proxy")
        print(f"    wall {conc['wall_s']:.1f} s, errors {len(conc['errors'])}, "
              f"hung {conc['hung']}  -> {'OK' if not conc['errors'] and not conc['hung'] else 'MISSED'}")
        for e in conc["errors"][:10]:
            print(f"      {e}")
        if args.concurrency_direct:
            cd = bench_concurrency(sts.host, sts.port, args.sessions, args.queries)
            print(f"    direct (same load): wall {cd['wall_s']:.1f} s, errors {len(cd['errors'])}, "
                  f"hung {cd['hung']}")
        print(f"    proxy peak RSS (VmHWM) {proxy.rss_peak_kb() / 1024:.1f} MiB; CPU seconds: "
              f"phase (c) {cpu2 - cpu1:.2f}, whole run {cpu2 - cpu0:.2f}", flush=True)
        ok_exit = proxy.stop(timeout=60)
        print(f"\nproxy exit code after SIGTERM: {ok_exit}")
        proxy = None
        return 0
    finally:
        if proxy is not None:
            proxy.stop()
        sts.stop()


if __name__ == "__main__":
    sys.exit(main())
