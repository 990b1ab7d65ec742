"""What index pruning costs on the decision path (proxy/indexes/pruning.py), per query, in
µs: the median of many runs in one process, for a table of 200 files x 100 minmax columns
plus one bloom column (exact-set membership standing in for the bloom filter). Files are
real (empty) local files, so the stat() before skipping each one is measured too.

    python bench/prune.py [--runs 300]

Rows: a query on a table without indexes (the cost every other query pays: one parse),
a needle (one file read: 199 files stat()ed and listed), a range on a minmax column, an
IN list on the bloom column, and a query whose filter prunes nothing.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proxy.indexes.pruning import Pruner, TableShape  # noqa: E402
from rewriter.filestats import ColumnStats, FileStats  # noqa: E402

FILES, COLUMNS = 200, 100
QUERIES = {
    "no index on the table": "SELECT c1, count(*) FROM other WHERE c2 = 5 GROUP BY c1",
    "needle (minmax)": "SELECT * FROM t WHERE c0 = 123456",
    "range (minmax)": "SELECT c1, sum(c2) FROM t WHERE c0 BETWEEN 20000 AND 60000 GROUP BY c1",
    "IN list (bloom)": "SELECT * FROM t WHERE id IN (1000001, 5000003, 9000007)",
    "nothing pruned": "SELECT * FROM t WHERE c5 >= 0",
}


def info(name: str, kind: str, columns: tuple):
    """An index datamap as the store describes it (IndexInfo)."""
    return SimpleNamespace(db="db", name=name, table="db.t", kind=kind, columns=columns,
                           enabled=True)


class Members:
    def __init__(self, values):
        self.values = frozenset(values)

    def might_contain(self, value):
        return value in self.values


class Store:
    def __init__(self, root: Path):
        self.stats, self.identity = {}, {}
        for i in range(FILES):
            f = root / f"part-{i:05d}.csv"
            f.touch()
            st = os.stat(f)
            path = f"file:{f}"
            self.identity[path] = (st.st_size, st.st_mtime_ns)
            cols = {f"c{c}": ColumnStats(1000 * i + c, 1000 * i + c + 999, 0)
                    for c in range(COLUMNS)}
            cols["id"] = ColumnStats(nulls=0, bloom=Members(
                range(i * 1_000_000 // 20, i * 1_000_000 // 20 + 5000)))
            self.stats[path] = FileStats(path, 5000, cols)
        self.indexes = [info("t_mm", "minmax", tuple(f"c{c}" for c in range(COLUMNS))),
                        info("t_bloom", "bloomfilter", ("id",))]

    def indexes_on(self, table):
        return self.indexes if table == "db.t" else []

    def file_stats(self, table):
        return self.stats

    def file_identity(self, table):
        return self.identity


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=300)
    args = ap.parse_args()
    columns = {f"c{c}": "bigint" for c in range(COLUMNS)} | {"id": "bigint"}
    with tempfile.TemporaryDirectory() as tmp:
        pruner = Pruner(Store(Path(tmp)), lambda t: TableShape(columns, "db.t_src"))
        print(f"{FILES} files x {COLUMNS} minmax columns + 1 bloom column; median of "
              f"{args.runs} runs")
        for label, sql in QUERIES.items():
            times = []
            for _ in range(args.runs):
                t0 = time.perf_counter()
                out = pruner.prune(sql, "db")
                times.append(time.perf_counter() - t0)
            kept = out.lines if out else ("not pruned",)
            print(f"  {label:24s} {statistics.median(times) * 1e6:9.0f} µs   {'; '.join(kept)}")


if __name__ == "__main__":
    main()
