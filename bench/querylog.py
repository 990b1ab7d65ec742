"""What the query log costs (proxy/observability/querylog/log.py, docs/querylog.md), medians of repeated runs
in one process:

  hot path     per statement on the event loop: building the StatementEvent and
               Observers.statement -> QueryLog.statement (an append to a queue), with the
               writer thread busy meanwhile; per fetch: counting the rows of a relayed
               FetchResults reply (proxy/thrift/rowcount.py). Target: <= 0.1 ms p50.
  writer       statements/s the background writer shapes, classifies and inserts (SQLite)
  store        bytes per 100,000 entries in the catalog's SQLite file

    python bench/querylog.py [--runs 20000] [--writer 20000] [--store 100000]
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

from timing import per_call_us  # noqa: E402  (bench/timing.py)
from proxy.config import QueryLogSettings  # noqa: E402
from proxy.observability.observe import Observers, StatementEvent  # noqa: E402
from proxy.observability.querylog.log import LoggedQuery, QueryLog  # noqa: E402
from proxy.thrift import codec  # noqa: E402
from proxy.thrift.gen.TCLIService import ttypes as T  # noqa: E402
from proxy.thrift.rowcount import fetched_rows  # noqa: E402

REGIONS = ("north", "south", "east", "west")


def statement(i: int) -> str:
    """Dashboard-like statements: 50 shapes, literals varying."""
    shape = i % 50
    return (f"SELECT region, product_{shape % 7}, sum(amount), count(*) FROM sales s "
            f"JOIN products p ON s.pid = p.id WHERE s.day >= '2026-{1 + i % 12:02d}-01' "
            f"AND region IN ('{REGIONS[i % 4]}', 'x{shape}') AND qty > {i % 97} "
            f"GROUP BY region, product_{shape % 7}")


def event(i: int) -> StatementEvent:
    hit = i % 3 == 0
    return StatementEvent(
        at=time.time(), session_id="s1", user=f"user{i % 20}", client="Tableau",
        statement=statement(i), current_db="shop", decision="served" if hit else "forwarded",
        datamaps=("shop.agg",) if hit else (),
        why_not=() if hit else (("shop.agg", "column p.product_3 is not in datamap agg"),),
        duration_s=0.05 if hit else 2.5, rows=12, outcome="FINISHED")


def reply(rows: int) -> bytes:
    cols = [T.TColumn(stringVal=T.TStringColumn(values=["abc"] * rows, nulls=b"")),
            T.TColumn(i64Val=T.TI64Column(values=list(range(rows)), nulls=b""))]
    return codec.encode_reply("FetchResults", 1, T.TFetchResultsResp(
        status=T.TStatus(statusCode=0), hasMoreRows=True,
        results=T.TRowSet(startRowOffset=0, rows=[], columns=cols)))


def percentiles(fn, runs: int) -> tuple[float, float]:
    """p50 and p99 of single calls, in µs (each timed alone: includes ~0.1 µs of timer)."""
    times = []
    clock = time.perf_counter_ns
    for i in range(runs):
        t0 = clock()
        fn(i)
        times.append(clock() - t0)
    times.sort()
    return times[len(times) // 2] / 1e3, times[len(times) * 99 // 100] / 1e3


def hot_path(tmp: Path, runs: int) -> None:
    qlog = QueryLog(str(tmp / "hot.db"), QueryLogSettings(), queue_size=10 * runs)
    observers = Observers(qlog)
    texts = [statement(i) for i in range(1000)]
    try:
        def one(i: int) -> None:
            observers.statement(StatementEvent(
                at=0.0, session_id="s1", user="u", client="", statement=texts[i % 1000],
                current_db="shop", decision="forwarded", duration_s=1.0, rows=10,
                outcome="FINISHED"))
        us = per_call_us(one, runs)
        p50, p99 = percentiles(one, runs)
        print(f"hot path, per statement (event + enqueue, writer busy): {us:8.2f} µs "
              f"(single calls: p50 {p50:.2f} µs, p99 {p99:.2f} µs)")
        qlog.flush(120)
    finally:
        qlog.close()
    for rows in (1000, 10000):
        data = reply(rows)
        us = per_call_us(lambda i: fetched_rows(data), runs)
        p50, p99 = percentiles(lambda i: fetched_rows(data), runs)
        print(f"hot path, per fetch (row count of a {rows:>5}-row reply, "
              f"{len(data) // 1024:>4} KB):    {us:8.2f} µs (p50 {p50:.2f}, p99 {p99:.2f})")


def writer(tmp: Path, n: int) -> None:
    qlog = QueryLog(str(tmp / "writer.db"), QueryLogSettings(), queue_size=10 * n)
    events = [event(i) for i in range(n)]
    rates = []
    try:
        for _ in range(3):
            t0 = time.perf_counter()
            for ev in events:
                qlog.statement(ev)
            qlog.flush(600)
            rates.append(n / (time.perf_counter() - t0))
    finally:
        qlog.close()
    print(f"writer: {statistics.median(rates):,.0f} statements/s "
          f"(SQLite, {n} statements x3, 50 shapes)")


def store(tmp: Path, n: int) -> None:
    path = tmp / "store.db"
    qlog = QueryLog(str(path), QueryLogSettings())
    empty = _size(path)
    try:
        qlog.write_many(LoggedQuery(
            id=0, at=time.time() - n + i, user=f"user{i % 20}", client="Tableau",
            session_id=f"{i // 50:032x}", shape_hash=f"{i % 50:016x}",
            shape=statement(i % 50), statement=statement(i), current_db="shop",
            tables=("shop.products", "shop.sales"), decision="forwarded", datamaps=(),
            why_not=(("shop.agg", "column p.product_3 is not in datamap agg"),),
            reason_class="columns", duration_s=2.5, rows=12, outcome="FINISHED", sqlstate=None,
            saved_s=None) for i in range(n))
    finally:
        qlog.close()
    size = _size(path) - empty
    print(f"store: {size / 1e6 * 100_000 / n:.1f} MB per 100,000 entries "
          f"({len(statement(1))}-byte statements; SQLite file incl. indexes)")


def _size(path: Path) -> int:
    import sqlite3
    c = sqlite3.connect(path)
    c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    c.close()
    return sum(os.path.getsize(p) for p in (path, Path(f"{path}-wal")) if p.exists())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20000)
    ap.add_argument("--writer", type=int, default=20000)
    ap.add_argument("--store", type=int, default=100000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        hot_path(Path(d), args.runs)
        writer(Path(d), args.writer)
        store(Path(d), args.store)


if __name__ == "__main__":
    main()
