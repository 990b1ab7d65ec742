"""What classifying a statement costs (proxy/routing/classify.py), per statement shape, in µs:
the median of many runs in one process. A plain SELECT must stay a look at its first
word; a statement starting with WITH / FROM pays a keyword pre-check over its text, and
a parse only when INSERT occurs in it.

    python bench/classify.py [--repo DIR] [--runs 20000]

--repo: classify with the proxy package of another checkout (e.g. an export of the base
commit), to compare before and after in the same interpreter conditions.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

CTE_BODY = "SELECT country, sum(qty) AS q FROM db1.sales WHERE day >= '2026-01-01' GROUP BY 1"
SHAPES = {
    "select, short": "SELECT country, sum(qty) FROM sales GROUP BY country",
    "select, 7 KB": "SELECT " + ", ".join(f"c{i}" for i in range(1200)) + " FROM sales",
    "comment + select": "/* dashboard 7, tile 3 */\n-- owner: bi\nSELECT 1",
    "CTE select": f"WITH c AS ({CTE_BODY}) SELECT * FROM c WHERE q > 10",
    "CTE select, 7 KB": f"WITH c AS ({CTE_BODY}) SELECT "
                        + ", ".join(f"c{i}" for i in range(1200)) + " FROM c",
    "CTE insert (parsed)": f"WITH c AS ({CTE_BODY}) INSERT INTO t SELECT * FROM c",
    "insert values": "INSERT INTO sales VALUES ('a', 1)",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]))
    ap.add_argument("--runs", type=int, default=20000)
    args = ap.parse_args()
    sys.path.insert(0, args.repo)
    from proxy.routing.classify import classify
    print(f"proxy.routing.classify from {sys.modules['proxy.routing.classify'].__file__}")
    for title, sql in SHAPES.items():
        runs = args.runs if "parsed" not in title else args.runs // 50
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(runs):
                classify(sql, "db1", 1 << 20)
            samples.append((time.perf_counter() - t0) / runs * 1e6)
        print(f"{title:22s} {statistics.median(samples):8.2f} µs  -> "
              f"{classify(sql, 'db1', 1 << 20).kind.value}")


if __name__ == "__main__":
    main()
