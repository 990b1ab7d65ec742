"""Pass-through overhead of the proxy, measured in one run against the same Spark Thrift
Server, with the same client, directly and through the proxy:

  (a) tiny query round trip (ExecuteStatement + FetchResults + CloseOperation of SELECT 1):
      p50/p90 latency each way and the ms the proxy adds at p50 (target <= 2 ms), over the
      binary port and over HTTP (`http`: Thrift in keep-alive POSTs to the proxy's
      http_port, as Hive JDBC and impyla send them), each against Spark direct (binary),
      and HTTP also against a second Spark Thrift Server in http mode with the same client
      (`direct-http`: what the HTTP client costs by itself; --no-direct-http skips it)
  (b) fetching 1,000,000 rows x 3 columns with FetchResults(maxRows=10000): rows/s each
      way and the throughput ratio proxy/direct (target >= 0.95), binary and HTTP
  (c) 200 concurrent sessions x 20 small queries through the proxy: errors (target 0),
      wall time, and the proxy's peak RSS (VmHWM) and CPU seconds
  (d) the proxy's RSS (VmRSS) after 0/250/500/1000 distinct 1 MB statements, each parsed
      and rewritten (timeseries() makes the rewriter translate it) and cached (target: flat
      within the rewrite cache's budget, rewriter.index.CACHE_BYTES)
  (e) `SELECT 1` latency p50/p99 in a second session while a 2 MB statement is processed
      (sent async; measured until its ExecuteStatement returns): with the default
      [datamaps] rewrite_max_sql_bytes (not parsed) and with it raised to 8 MiB on a second
      proxy (parsed and translated in a worker thread) (target: p99 <= 50 ms)

  (f) with --replicas: two proxies registered in a real ZooKeeper (tests/support/zookeeper.py)
      next to one plain proxy: how connections found through ZooKeeper spread over the two,
      the connect time (ZooKeeper lookup + OpenSession) vs connecting to one proxy, and the
      tiny query's p50 on a session found through ZooKeeper vs on the one proxy

Usage:  python bench/passthrough.py [--rounds N] [--sessions 200] [--queries 20]
                                    [--big-statements 1000] [--big-rounds 5] [--replicas]
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
MB = 1 << 20


def distinct_mb_statement(i: int) -> str:
    """1 MB (under the default rewrite_max_sql_bytes), distinct per i, parsed and rewritten
    by the proxy (timeseries() is translated), cheap for Spark: one string literal, over a
    table that does not exist (1,000 such queries run as jobs exhaust a test STS's heap)."""
    return (f"SELECT timeseries(ts, 'hour') AS h FROM bench_absent "
            f"WHERE s <> '{i:08d}{'x' * 999_800}'")


def in_list_statement(i: int, total: int = 2 * MB, in_list: int = 1_200_000) -> str:
    """~`total` characters, ~`in_list` of them an IN list (what costs a parser), distinct
    per i, over a table that does not exist (Spark rejects it after its parse)."""
    rng = random.Random(i)
    ints = ",".join(str(rng.randrange(10**6)) for _ in range(in_list // 7))
    head = (f"SELECT timeseries(ts, 'hour') AS h FROM bench_absent_{i} WHERE id IN ({ints}) "
            "AND s <> '")
    return head + "x" * max(0, total - len(head) - 2) + "'"


class KeepAliveHttp:
    """A Thrift transport that POSTs each call on one persistent HTTP/1.1 connection and
    returns the cookie it was given (thrift's THttpClient reconnects for every call, which
    would measure TCP set-up rather than the proxy)."""

    def __init__(self, host: str, port: int, path: str = "/cliservice"):
        import base64
        import http.client
        import io
        self._conn = http.client.HTTPConnection(host, port, timeout=600)
        self._path, self._io = path, io
        self._headers = {"Content-Type": "application/x-thrift",
                         "Authorization": "Basic " + base64.b64encode(b"bench:x").decode()}
        self._wbuf, self._rbuf = io.BytesIO(), io.BytesIO()

    def isOpen(self) -> bool:
        return True

    def open(self) -> None:
        pass

    def close(self) -> None:
        self._conn.close()

    def write(self, data: bytes) -> None:
        self._wbuf.write(data)

    def read(self, n: int) -> bytes:
        return self._rbuf.read(n)

    def readAll(self, n: int) -> bytes:
        return self._rbuf.read(n)

    def flush(self) -> None:
        body, self._wbuf = self._wbuf.getvalue(), self._io.BytesIO()
        self._conn.request("POST", self._path, body=body, headers=self._headers)
        resp = self._conn.getresponse()
        data = resp.read()
        if resp.status != 200:
            raise RuntimeError(f"HTTP {resp.status}: {data[:200]!r}")
        cookie = resp.getheader("Set-Cookie")
        if cookie:
            self._headers["Cookie"] = cookie.split(";", 1)[0]
        self._rbuf = self._io.BytesIO(data)


class Raw:
    """One HS2 session with the generated Thrift client (no per-row conversion); over
    HTTP when `http` (the port is then the proxy's http_port)."""

    def __init__(self, host: str, port: int, http: bool = False):
        from pyhive import hive
        from TCLIService import ttypes
        self.t = ttypes
        self.port = port
        if http:
            self.conn = hive.connect(thrift_transport=KeepAliveHttp(host, port))
        else:
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

    def submit(self, sql: str) -> int:
        """Execute synchronously and close; returns the status code (errors expected)."""
        t = self.t
        resp = self.client.ExecuteStatement(t.TExecuteStatementReq(
            sessionHandle=self.session, statement=sql, runAsync=False))
        if resp.operationHandle is not None:
            self.client.CloseOperation(t.TCloseOperationReq(operationHandle=resp.operationHandle))
        return resp.status.statusCode

    def close(self):
        self.conn.close()


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    k = max(0, min(len(s) - 1, round(p / 100 * (len(s) - 1))))
    return s[k]


def bench_latency(sides: dict[str, Raw], rounds: int) -> dict:
    """Alternate the sides query by query (random order within each round), so that load
    changes on a shared machine hit all alike; keep each side's difference to "direct" in
    the same round (pairs:<side>)."""
    lat = {name: [] for name in sides} | {f"pairs:{n}": [] for n in sides if n != "direct"}
    for side in sides.values():          # warm-up
        for _ in range(20):
            side.run("SELECT 1")
    rng = random.Random(7)
    for _ in range(rounds):
        sample = {}
        order = list(sides.items())
        rng.shuffle(order)
        for name, side in order:
            t0 = time.perf_counter()
            side.run("SELECT 1")
            sample[name] = (time.perf_counter() - t0) * 1000
            lat[name].append(sample[name])
        for name in sides:
            if name != "direct":
                lat[f"pairs:{name}"].append(sample[name] - sample["direct"])
        if "direct-http" in sides:
            lat.setdefault("pairs:http-direct-http", []).append(sample["http"] - sample["direct-http"])
    return lat


def bench_throughput(sides: dict[str, Raw], repeats: int, proxy) -> dict:
    """Seconds per 1M-row fetch per side, and the proxy's CPU seconds per side (cpu:<side>)."""
    secs = {name: [] for name in sides} | {f"cpu:{name}": 0.0 for name in sides}
    for i in range(repeats):
        order = list(sides.items())
        if i % 2:
            order.reverse()
        for name, side in order:
            c0, t0 = proxy.cpu_seconds(), time.perf_counter()
            n = side.run(BIG_QUERY)
            secs[name].append(time.perf_counter() - t0)
            secs[f"cpu:{name}"] += proxy.cpu_seconds() - c0
            if n != 1_000_000:
                raise RuntimeError(f"{name}: fetched {n} rows, expected 1000000")
    return secs


def cpu_per_query(proxy, side: Raw, n: int = 300) -> tuple[float, float]:
    """CPU milliseconds per tiny query over one transport, (the proxy's, this client's):
    unlike wall time on a shared machine, not blurred by the load; the client's share shows
    what its transport code (http.client vs a socket) adds to the round trip."""
    c0, k0 = proxy.cpu_seconds(), time.process_time()
    for _ in range(n):
        side.run("SELECT 1")
    return (proxy.cpu_seconds() - c0) * 1000 / n, (time.process_time() - k0) * 1000 / n


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


def bench_memory(proxy, raw: "Raw", n: int) -> list[tuple[int, float]]:
    """RSS after 0 and every quarter of n distinct ~1 MB statements."""
    marks = {0, n // 4, n // 2, 3 * n // 4, n}
    out = [(0, proxy.rss_kb() / 1024)]
    print(f"    after {0:5d}: RSS {out[0][1]:7.1f} MiB", flush=True)
    for i in range(1, n + 1):
        raw.submit(distinct_mb_statement(i))     # Spark: table not found
        if i in marks:
            out.append((i, proxy.rss_kb() / 1024))
            print(f"    after {i:5d}: RSS {out[-1][1]:7.1f} MiB", flush=True)
    return out


def bench_latency_under_big(host: str, port: int, rounds: int, seed: int) -> dict:
    """SELECT 1 round trips in one session while another sends 2 MB statements (async),
    one at a time; only the round trips that end before the big ExecuteStatement returned
    count (Spark's own parse of it, afterwards, is not the proxy's doing)."""
    from TCLIService import ttypes as t
    probe, sender = Raw(host, port), Raw(host, port)
    for _ in range(10):
        probe.run("SELECT 1")
    lat: list[float] = []
    windows: list[float] = []
    try:
        for r in range(rounds):
            sql = in_list_statement(seed + r)
            done = threading.Event()
            took: dict = {}

            def send():
                t0 = time.perf_counter()
                resp = sender.client.ExecuteStatement(t.TExecuteStatementReq(
                    sessionHandle=sender.session, statement=sql, runAsync=True))
                took["s"] = time.perf_counter() - t0
                took["end"] = time.perf_counter()
                if resp.operationHandle is not None:
                    sender.client.CloseOperation(t.TCloseOperationReq(
                        operationHandle=resp.operationHandle))
                done.set()
            th = threading.Thread(target=send, name="big-sender", daemon=True)
            samples = []
            th.start()
            while not done.is_set():
                t0 = time.perf_counter()
                probe.run("SELECT 1")
                samples.append((t0, time.perf_counter()))
            th.join()
            windows.append(took["s"])
            lat += [(b - a) * 1000 for a, b in samples if b <= took["end"]]
            time.sleep(3)             # let Spark finish parsing it before the next round
    finally:
        probe.close()
        sender.close()
    return {"lat": lat, "windows": windows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=400, help="tiny queries per side")
    ap.add_argument("--repeats", type=int, default=5, help="1M-row fetches per side")
    ap.add_argument("--sessions", type=int, default=200, help="0 skips (c)")
    ap.add_argument("--queries", type=int, default=20)
    ap.add_argument("--workdir", type=Path, default=None)
    ap.add_argument("--concurrency-direct", action="store_true",
                    help="also run (c) directly against Spark, for its wall time")
    ap.add_argument("--big-statements", type=int, default=1000,
                    help="distinct 1 MB statements for (d); 0 skips (d)")
    ap.add_argument("--big-rounds", type=int, default=5,
                    help="2 MB statements for (e), per proxy; 0 skips (e)")
    ap.add_argument("--only-big", action="store_true", help="run only (d) and (e)")
    ap.add_argument("--replicas", action="store_true",
                    help="run only (f): two replicas behind ZooKeeper vs one proxy")
    ap.add_argument("--connects", type=int, default=60, help="connections per side in (f)")
    ap.add_argument("--no-direct-http", action="store_true",
                    help="skip the second Spark Thrift Server in http mode (direct-http in (a), (b))")
    args = ap.parse_args()

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-passthrough-"))
    print(f"workdir {workdir}", flush=True)
    # (d) sends 1,000 distinct 1 MB statements: Spark's own status stores keep the text of
    # the last ~1,000 executions and 200 statements, which exhausts its heap
    sts = start_sts(workdir / "sts", extra_conf={
        "spark.sql.ui.retainedExecutions": "20",
        "spark.sql.thriftServer.ui.retainedStatements": "20",
        "spark.sql.thriftServer.ui.retainedSessions": "20"})
    proxy = sts_http = None
    try:
        # the same client over HTTP straight to Spark: what the HTTP client costs by itself
        sts_http = None if args.no_direct_http or args.only_big else start_sts(
            workdir / "sts-http", http=True)
        # (c)'s 200 sessions all come from loopback: over the per-address connection cap
        # (100 by default), which is for real clients spread over many addresses
        proxy = start_proxy(workdir / "proxy", (sts.host, sts.port), http=True, env={
            "DATAMAP_PROXY_SERVER_MAX_CONNECTIONS_PER_ADDRESS": str(max(100, args.sessions + 10))})
        print(f"STS {sts.host}:{sts.port} pid {sts.pid}; proxy {proxy.host}:{proxy.port} "
              f"pid {proxy.pid}", flush=True)
        cpu0 = proxy.cpu_seconds()
        if args.replicas:
            bench_replicas(args, workdir, sts, proxy)
            print(f"\nproxy exit code after SIGTERM: {proxy.stop(timeout=60)}")
            proxy = None
            return 0
        if args.only_big:
            bench_big(args, workdir, sts, proxy)
            print(f"\nproxy exit code after SIGTERM: {proxy.stop(timeout=60)}")
            proxy = None
            return 0
        sides = {"direct": Raw(sts.host, sts.port), "proxy": Raw(proxy.host, proxy.port),
                 "http": Raw(proxy.host, proxy.http_port, http=True)}
        if sts_http is not None:
            sides["direct-http"] = Raw(sts_http.host, sts_http.port, http=True)
        report_latency_throughput(args, proxy, sides)
        for side in sides.values():
            side.close()

        if args.sessions <= 0:
            bench_big(args, workdir, sts, proxy)
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
        bench_big(args, workdir, sts, proxy)
        ok_exit = proxy.stop(timeout=60)
        print(f"\nproxy exit code after SIGTERM: {ok_exit}")
        proxy = None
        return 0
    finally:
        if proxy is not None:
            proxy.stop()
        sts.stop()
        if sts_http is not None:
            sts_http.stop()


def report_latency_throughput(args, proxy, sides: dict[str, Raw]) -> None:
    """(a) and (b): every side against "direct"; proxy CPU over both proxy sides."""
    via = [name for name in sides if not name.startswith("direct")]     # through the proxy
    c0 = proxy.cpu_seconds()
    lat = bench_latency(sides, args.rounds)
    c1 = proxy.cpu_seconds()
    d50 = statistics.median(lat["direct"])
    print(f"\n(a) tiny query round trip (execute + fetch + close), ms; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    for name in sides:
        print(f"    {name:11s} p50 {statistics.median(lat[name]):7.2f}  p90 {pct(lat[name], 90):7.2f}"
              f"  n={len(lat[name])}")
    for name in sides:
        if name not in via:
            continue
        paired = statistics.median(lat[f"pairs:{name}"])
        print(f"    {name:6s} added at p50: {statistics.median(lat[name]) - d50:+.2f} ms; median "
              f"of paired differences {paired:+.2f} ms (target <= 2 ms)  -> "
              f"{'OK' if paired <= 2 else 'MISSED'}")
    if "http" in sides:
        print(f"    http vs binary through the proxy at p50: "
              f"{statistics.median(lat['http']) - statistics.median(lat['proxy']):+.2f} ms")
    if "direct-http" in sides:
        paired = statistics.median(lat["pairs:http-direct-http"])
        print(f"    http   added at p50 vs Spark's own http mode (same client): "
              f"{statistics.median(lat['http']) - statistics.median(lat['direct-http']):+.2f} ms; "
              f"median of paired differences {paired:+.2f} ms (target <= 2 ms)  -> "
              f"{'OK' if paired <= 2 else 'MISSED'}")
    queries = (args.rounds + 20) * (len(via))
    print(f"    proxy CPU per query: {(c1 - c0) * 1000 / queries:.2f} ms", flush=True)
    for name, side in sides.items():
        cpu_proxy, cpu_client = cpu_per_query(proxy, side)
        print(f"    {name:11s} CPU per query: proxy {cpu_proxy:.2f} ms, client {cpu_client:.2f} ms",
              flush=True)

    secs = bench_throughput(sides, args.repeats, proxy)
    ds = statistics.median(secs["direct"])
    print(f"\n(b) 1,000,000 rows x 3 columns, FetchResults(maxRows=10000); load average "
          f"{os.getloadavg()[0]:.1f}")
    for name in sides:
        s_ = statistics.median(secs[name])
        print(f"    {name:11s} median {s_:6.2f} s  = {1_000_000 / s_:10,.0f} rows/s"
              f"  (runs: {', '.join(f'{x:.2f}' for x in secs[name])})")
    if "direct-http" in sides:
        ratio = statistics.median(secs["direct-http"]) / statistics.median(secs["http"])
        print(f"    throughput ratio http/direct-http (same client): median {ratio:.3f}")
    for name in sides:
        if name not in via:
            continue
        ratio = ds / statistics.median(secs[name])
        best = min(secs["direct"]) / min(secs[name])
        print(f"    throughput ratio {name}/direct: median {ratio:.3f}, best-of-{args.repeats} "
              f"{best:.3f} (target >= 0.95 on the median)  -> {'OK' if ratio >= 0.95 else 'MISSED'}")
    print("    proxy CPU per 1M rows: " + ", ".join(
        f"{name} {secs[f'cpu:{name}'] / args.repeats:.2f} s" for name in via),
        flush=True)


def bench_replicas(args, workdir: Path, sts, proxy) -> None:
    """(f): two replicas registered in ZooKeeper, found the way clients find them
    (proxy.ha.discovery.connect: one ZooKeeper lookup per connection, as Hive JDBC does)."""
    from proxy.ha.discovery import connect, servers
    from tests.support.zookeeper import registered, registered_proxy, start_zookeeper, wait_for

    zk = start_zookeeper(workdir / "zk")
    reps = []
    try:
        reps = [registered_proxy(workdir / f"replica-{i}", (sts.host, sts.port), zk.hosts,
                                 "bench") for i in range(2)]
        wait_for(lambda: len(registered(zk.hosts, "bench")) == 2, what="two registrations")
        connect_ms = {"one proxy": [], "discovery": []}
        spread: dict[int, int] = {r.port: 0 for r in reps}
        for i in range(args.connects):
            order = [("one proxy", lambda: Raw(proxy.host, proxy.port)),
                     ("discovery", lambda: connect(zk.hosts, "bench", Raw))]
            if i % 2:
                order.reverse()
            for name, open_ in order:
                t0 = time.perf_counter()
                raw = open_()
                connect_ms[name].append((time.perf_counter() - t0) * 1000)
                if name == "discovery":
                    spread[raw.port] += 1
                raw.close()
        print(f"\n(f) two replicas behind ZooKeeper vs one proxy; load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
        print(f"    {args.connects} connections through ZooKeeper, per replica: "
              f"{', '.join(str(n) for n in spread.values())}")
        for name, v in connect_ms.items():
            print(f"    connect + OpenSession, {name:9s}: p50 {statistics.median(v):7.2f} ms"
                  f"  p90 {pct(v, 90):7.2f} ms")
        lookup_ms = []
        for _ in range(args.connects):
            t0 = time.perf_counter()
            servers(zk.hosts, "bench")
            lookup_ms.append((time.perf_counter() - t0) * 1000)
        print(f"    the ZooKeeper lookup alone (connect, list, read, close): p50 "
              f"{statistics.median(lookup_ms):.2f} ms  p90 {pct(lookup_ms, 90):.2f} ms")
        one, found = Raw(proxy.host, proxy.port), connect(zk.hosts, "bench", Raw)
        lat = bench_latency(one, found, args.rounds)
        print(f"    tiny query p50: one proxy {statistics.median(lat['direct']):.2f} ms, via "
              f"discovery {statistics.median(lat['proxy']):.2f} ms (median paired difference "
              f"{statistics.median(lat['pairs']):+.2f} ms)", flush=True)
        one.close()
        found.close()
    finally:
        for r in reps:
            r.stop()
        zk.stop()


def bench_big(args, workdir: Path, sts, proxy) -> None:
    """(d) and (e)."""
    if args.big_statements > 0:
        from rewriter.index import CACHE_BYTES
        print(f"\n(d) proxy RSS over {args.big_statements} distinct ~1 MB statements "
              f"(rewrite cache budget {CACHE_BYTES / MB:.0f} MiB)", flush=True)
        raw = Raw(proxy.host, proxy.port)
        try:
            marks = bench_memory(proxy, raw, args.big_statements)
        finally:
            raw.close()
        grew = marks[-1][1] - marks[len(marks) // 2][1]
        print(f"    growth over the second half: {grew:+.1f} MiB  -> "
              f"{'OK' if grew <= CACHE_BYTES / MB else 'MISSED'} (flat within the budget)")
    if args.big_rounds <= 0:
        return
    cfg = workdir / "parse-big.toml"
    cfg.write_text("[datamaps]\nrewrite_max_sql_bytes = 8388608\n")
    parsing = start_proxy(workdir / "proxy-parse-big", (sts.host, sts.port),
                          extra_args=["--config", str(cfg)])
    try:
        print(f"\n(e) SELECT 1 round trip in a second session while a 2 MB statement is "
              f"processed, ms; load average {os.getloadavg()[0]:.1f}", flush=True)
        for label, p, seed in (("default limit (not parsed)", proxy, 0),
                               ("limit 8 MiB (parsed)", parsing, 1000)):
            res = bench_latency_under_big(p.host, p.port, args.big_rounds, seed)
            lat = res["lat"]
            if not lat:
                print(f"    {label:28s} no round trip ended inside the windows "
                      f"({', '.join(f'{w:.2f}' for w in res['windows'])} s)")
                continue
            p99 = pct(lat, 99)
            print(f"    {label:28s} p50 {statistics.median(lat):7.1f}  p99 {p99:7.1f}  n={len(lat)}"
                  f"  windows {', '.join(f'{w:.2f}' for w in res['windows'])} s"
                  f"  -> {'OK' if p99 <= 50 else 'MISSED'} (p99 <= 50 ms)", flush=True)
        idle = Raw(proxy.host, proxy.port)
        try:
            base = []
            for _ in range(50):
                t0 = time.perf_counter()
                idle.run("SELECT 1")
                base.append((time.perf_counter() - t0) * 1000)
        finally:
            idle.close()
        print(f"    for reference, idle proxy: p50 {statistics.median(base):.1f}  "
              f"p99 {pct(base, 99):.1f}", flush=True)
    finally:
        parsing.stop()


if __name__ == "__main__":
    sys.exit(main())
