"""What the Prometheus metrics cost, measured in one run:

  statement   Metrics.statement() for a mix of events (a hit, a miss with a reason, a
              forwarded non-query): what every statement pays on the event loop
  rpc         Metrics.rpc(): what every TCLIService call pays
  fan-out     Observers.statement() with the metrics registered vs with no observer
              (the whole added cost on the client's path)
  scrape      Metrics.render() with a catalog of --datamaps datamaps, each with a few
              segments and refresh events: the scrape thread's work, off the event loop

Prints the median of --reps rounds (each of --n calls) in microseconds per call, and
the scrape in milliseconds.

    python bench/metrics.py [--n 20000] [--reps 7] [--datamaps 200]
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

from timing import per_call_us  # noqa: E402  (bench/timing.py)
from proxy.datamaps.catalog.store import Catalog  # noqa: E402
from proxy.observability.metrics.registry import Metrics  # noqa: E402
from proxy.observability.metrics.collect import DatamapCollector  # noqa: E402
from proxy.observability.observe import Observers, StatementEvent  # noqa: E402

EVENTS = [
    StatementEvent(at=0.0, session_id="s", user="ann", client="", current_db="default",
                   statement="SELECT region, sum(amount) FROM sales GROUP BY region",
                   decision="served", datamaps=("default.agg",), duration_s=0.002),
    StatementEvent(at=0.0, session_id="s", user="ann", client="", current_db="default",
                   statement="SELECT amount FROM sales WHERE amount > 1", decision="forwarded",
                   why_not=(("default.agg", "column amount is not in the datamap"),),
                   duration_s=0.4),
    StatementEvent(at=0.0, session_id="s", user="bob", client="", current_db="default",
                   statement="INSERT INTO sales VALUES ('eu', 1)", decision="forwarded",
                   duration_s=3.0),
]


def populate(c: Catalog, datamaps: int, files_dir: Path) -> None:
    f = files_dir / "part-0.parquet"
    f.write_bytes(b"x" * 4096)
    base = c.add_base_segment("db1.sales", ["file:/x/0"])
    for i in range(datamaps):
        c.create_datamap("db1", f"dm{i}", provider="mv", select_sql="SELECT 1",
                         base_tables=["db1.sales"])
        for kind in ("built", "refreshed", "refreshed"):
            sid = c.begin_segment("db1", f"dm{i}", {"db1.sales": [base.id]})
            c.publish_segment("db1", f"dm{i}", sid, rows=10, files=[f"file:{f}"], seconds=1.0,
                              kind=kind)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=20000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--datamaps", type=int, default=200)
    a = ap.parse_args()
    m = Metrics()
    for ev in EVENTS:           # children made once, as after the first statements
        m.statement(ev)
    stmt = per_call_us(lambda i: m.statement(EVENTS[i % 3]), a.n, a.reps)
    rpc = per_call_us(lambda i: m.rpc("FetchResults", 0.001, True), a.n, a.reps)
    none, with_metrics = Observers(), Observers(m)
    bare = per_call_us(lambda i: none.statement(EVENTS[i % 3]), a.n, a.reps)
    fan = per_call_us(lambda i: with_metrics.statement(EVENTS[i % 3]), a.n, a.reps)
    print(f"statement  {stmt:7.2f} µs per call (median of {a.reps} x {a.n})")
    print(f"rpc        {rpc:7.2f} µs per call")
    print(f"fan-out    {fan:7.2f} µs with the metrics vs {bare:.2f} µs with no observer "
          f"(+{fan - bare:.2f} µs per statement)")
    with tempfile.TemporaryDirectory() as d:
        catalog = Catalog(str(Path(d) / "catalog.db"))
        populate(catalog, a.datamaps, Path(d))
        scraped = Metrics(DatamapCollector(catalog))
        scraped.render()            # the first scrape stats every segment's files
        times = []
        for _ in range(a.reps):
            t0 = time.perf_counter()
            body = scraped.render()
            times.append((time.perf_counter() - t0) * 1000)
        catalog.close()
    print(f"scrape     {statistics.median(times):7.1f} ms with {a.datamaps} datamaps "
          f"({len(body)} bytes of text)")


if __name__ == "__main__":
    main()
