"""The hot catalog operations on SQLite (the embedded default) and on PostgreSQL (replicas'
shared catalog), measured in one run: a catalog of --datamaps datamaps with a few segments
each, then per backend the median of --reps calls of

  version          the catalog version (one read transaction)
  recent_version   what every SELECT asks (answered from memory while younger than 1 s)
  list_datamaps    all definitions
  publish_segment  begin_segment + publish_segment (two write transactions)
  index_put        one index-store write (20 file entries with bloom filters)
  lease_renew      one leader-lease renewal

Prints milliseconds per call and the PostgreSQL / SQLite ratio. PostgreSQL is started by
tests/support/postgres.py on a loopback port with fsync on (both backends then make a
commit durable, SQLite's WAL with its default synchronous=FULL), or given with --url.

    python bench/catalog.py [--datamaps 50] [--reps 200] [--url postgresql://...]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from proxy.datamaps.catalog.store import Catalog  # noqa: E402
from proxy.datamaps.indexes.entries import Entry, IndexStore  # noqa: E402

SQL = "SELECT country, sum(price) AS p FROM db1.sales GROUP BY country"


def populate(c: Catalog, datamaps: int) -> None:
    c.add_base_segment("db1.sales", ["f0"])
    for i in range(datamaps):
        c.create_datamap("db1", f"dm{i}", provider="mv", select_sql=SQL,
                         base_tables=["db1.sales"], properties={"k": "v"})
        for _ in range(3):
            sid = c.begin_segment("db1", f"dm{i}", {"db1.sales": ["0"]})
            c.publish_segment("db1", f"dm{i}", sid, rows=10, files=[f"f{sid}"])


def timed(reps: int, op) -> float:
    times = []
    for i in range(reps):
        t = time.perf_counter()
        op(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def measure(location: str, datamaps: int, reps: int) -> dict[str, float]:
    c = Catalog(location)
    populate(c, datamaps)
    store = IndexStore(c, version_max_age=0.0)
    info = store.create("db1", "idx", "db1.sales", "bloomfilter", [("id", "bigint")], {})
    entries = [Entry(f"file:/w/part-{n}.parquet", 1000, 1, 100, {"id": (1, 100, 0)},
                     {"id": (1024, 3, bytes(128))}) for n in range(20)]

    def publish(i: int) -> None:
        sid = c.begin_segment("db1", "dm0", {"db1.sales": ["0"]})
        c.publish_segment("db1", "dm0", sid, rows=1, files=[f"g{i}"])

    out = {"version": timed(reps, lambda i: c.version()),
           "recent_version": timed(reps, lambda i: c.recent_version()),
           "list_datamaps": timed(reps, lambda i: c.list_datamaps()),
           "publish_segment": timed(reps, publish),
           "index_put": timed(reps, lambda i: store.put(info, entries, segment=str(i % 5))),
           "lease_renew": timed(reps, lambda i: c.acquire_lease("leader", "bench", 15))}
    c.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datamaps", type=int, default=50)
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--url", help="an empty PostgreSQL database (default: start one)")
    args = ap.parse_args()
    pg = None
    if args.url is None:
        from tests.support.postgres import PostgresServer
        pg = PostgresServer.start(durable=True)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            sqlite = measure(str(Path(tmp) / "catalog.db"), args.datamaps, args.reps)
        postgres = measure(args.url or pg.new_database(), args.datamaps, args.reps)
    finally:
        if pg is not None:
            pg.stop()
    print(f"{args.datamaps} datamaps, median of {args.reps} calls, ms per call")
    print(f"{'operation':<16} {'sqlite':>9} {'postgres':>9} {'ratio':>7}")
    for op in sqlite:
        ratio = postgres[op] / sqlite[op] if sqlite[op] else float("nan")
        print(f"{op:<16} {sqlite[op]:9.3f} {postgres[op]:9.3f} {ratio:7.1f}")


if __name__ == "__main__":
    main()
