"""What `advise` costs on a week of logged statements (target: <= 10 s for 100,000).

A synthetic star schema (a fact table, four dimensions) and a realistic log: a few hundred
distinct dashboard shapes (1-3 grouping columns of the dimensions, 0-2 filters, sums,
averages, counts, min/max of the measures), each run with varying literals, drawn with a
Zipf-like skew (a few tiles run all day), durations log-normal. The advisor runs as the
proxy runs it: the statements are written to a real query log (proxy/querylog.QueryLog in
the catalog's SQLite database, through write_many), and each run is Advisor.suggest over
that log, the catalog and a DatamapService, the log's read (entries()) included; synthetic
sampled statistics stand in for Spark's (the Spark sampling job is a few jobs per table,
not per statement). Prints the median of --runs runs and the rate.

    python bench/advise.py [--statements 100000] [--shapes 300] [--runs 3]
"""
from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from proxy.advisor.core import Advisor  # noqa: E402
from proxy.config import AdvisorSettings  # noqa: E402
from proxy.datamaps.catalog.store import Catalog  # noqa: E402
from proxy.datamaps.service import DatamapService  # noqa: E402
from proxy.observability.querylog.log import LoggedQuery, QueryLog  # noqa: E402
from rewriter.advise.candidates import FixedSizes  # noqa: E402
from rewriter.advise.shape import shape_of  # noqa: E402

DIMS = {
    "date_dim": {"date_key": "int", "year": "int", "month": "int", "quarter": "int",
                 "weekday": "string"},
    "store": {"store_key": "int", "region": "string", "city": "string", "format": "string"},
    "product": {"product_key": "int", "category": "string", "brand": "string",
                "color": "string"},
    "customer": {"customer_key": "int", "segment": "string", "country": "string",
                 "age_band": "string"},
}
FACT = {"date_key": "int", "store_key": "int", "product_key": "int", "customer_key": "int",
        "amount": "double", "qty": "int", "discount": "double", "order_id": "bigint"}
SCHEMAS = {"bench": {"sales": FACT, **DIMS}}
NDV = {"year": 5, "month": 12, "quarter": 4, "weekday": 7, "region": 8, "city": 200,
       "format": 4, "category": 30, "brand": 400, "color": 16, "segment": 5, "country": 60,
       "age_band": 8}
ROWS = {"bench.sales": 500_000_000, "bench.date_dim": 2000, "bench.store": 1000,
        "bench.product": 50_000, "bench.customer": 2_000_000}
AGGS = ["sum(sales.amount) AS amount", "avg(sales.qty) AS avg_qty", "count(*) AS n",
        "max(sales.discount) AS max_discount", "sum(sales.qty) AS qty",
        "min(sales.amount) AS min_amount"]


def shape_templates(n: int, rnd: random.Random) -> list[str]:
    cols = [(t, c) for t, cs in DIMS.items() for c in cs if not c.endswith("_key")]
    out: dict[str, None] = {}
    while len(out) < n:
        group = rnd.sample(cols, rnd.randint(1, 3))
        filters = rnd.sample(cols, rnd.randint(0, 2))
        tables = sorted({t for t, _ in group + filters})
        aggs = rnd.sample(AGGS, rnd.randint(1, 3))
        sel = ", ".join(f"{t}.{c}" for t, c in group)
        joins = " ".join(f"JOIN bench.{t} ON sales.{next(iter(DIMS[t]))} = "
                         f"{t}.{next(iter(DIMS[t]))}" for t in tables)
        where = " AND ".join(f"{t}.{c} = '{{v{i}}}'" for i, (t, c) in enumerate(filters))
        out[f"SELECT {sel}, {', '.join(aggs)} FROM bench.sales {joins}"
            + (f" WHERE {where}" if where else "") + f" GROUP BY {sel}"] = None
    return list(out)


def workload(statements: int, shapes: int, seed: int = 17) -> list[LoggedQuery]:
    """Misses on the base tables over the last day, as the query log records them."""
    rnd = random.Random(seed)
    templates = shape_templates(shapes, rnd)
    weights = [1 / (i + 1) for i in range(len(templates))]
    shaped = {t: shape_of(t.format(v0="x", v1="x"), "bench") for t in templates}
    now = time.time()
    out = []
    for t in rnd.choices(templates, weights, k=statements):
        sql = t.format(**{f"v{i}": f"x{rnd.randint(1, 50)}" for i in range(2)})
        sh = shaped[t]
        out.append(LoggedQuery(0, now - rnd.random() * 86400, "bench", "", "s", sh.hash,
                               sh.text, sql, "bench", sh.tables, "forwarded", (), (),
                               "no_datamap", rnd.lognormvariate(1.0, 0.8), 10, "FINISHED",
                               None, None))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--statements", type=int, default=100_000)
    ap.add_argument("--shapes", type=int, default=300)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    times, got = [], []
    with tempfile.TemporaryDirectory() as d:
        catalog = Catalog.in_state_dir(d)
        qlog = QueryLog(str(catalog.path), writer=False)
        t0 = time.perf_counter()
        qlog.write_many(workload(args.statements, args.shapes))
        written = time.perf_counter() - t0
        provider = lambda tables: {"bench": {t.split(".", 1)[1]: SCHEMAS["bench"][t.split(".", 1)[1]]  # noqa: E731
                                             for t in tables if t.split(".", 1)[1] in SCHEMAS["bench"]}}
        service = DatamapService(catalog, lambda: None, schemas_provider=provider)
        try:
            for _ in range(args.runs):
                advisor = Advisor(service, qlog, AdvisorSettings(),
                                  sizes=FixedSizes(ROWS, NDV, default=1000))
                t0 = time.perf_counter()
                got = advisor.suggest()
                times.append(time.perf_counter() - t0)
        finally:
            qlog.close()
            service.close()
            catalog.close()
    med = statistics.median(times)
    print(f"advise: {args.statements} logged statements (made and written to the query log "
          f"in {written:.1f} s), {args.shapes} shapes, {len(got)} suggestions")
    print(f"median of {args.runs} runs: {med:.2f} s ({args.statements / med:,.0f} statements/s;"
          f" target <= 10 s), runs: {', '.join(f'{t:.2f}' for t in times)}")
    for s in got[:3]:
        print(f"  {s.kind} {s.datamap}: {s.queries} queries, saves ~{s.est_saving_s:.0f} s")


if __name__ == "__main__":
    main()
