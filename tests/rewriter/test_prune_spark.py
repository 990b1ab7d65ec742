"""Index pruning on real Spark: the pruned SQL returns exactly the original's rows.

Two tables with many small files in the shared rewriter Spark session: a CSV data-source
table read through a view (an external table as the shared design makes it: the view
`prune_db.ev` over the source table `prune_db.ev_src`, one file gzip-compressed) and a
Parquet table. Per-file statistics are computed from Spark directly (min / max / NULL count
per `_metadata.file_path`; the bloom column as the exact value set), handed to the
proxy's Pruner through a test-only store, and every query runs twice: as written and as
the Pruner would send it. Pruning must happen where a case says so and nowhere else."""
from __future__ import annotations

import datetime as dt
import gzip
import os
import random

import pytest

from proxy.datamaps.indexes.pruning import Pruner, TableShape
from rewriter.prune.filestats import ColumnStats, FileStats
from tests.support.prune import ExactSet, FakeStore, Info

pytestmark = pytest.mark.spark

FIELDS = {"id": "bigint", "s": "string", "v": "double", "d": "date", "ts": "timestamp",
          "n": "decimal(10,2)", "k": "int"}
FILES = 12
ROWS = 25                      # per file; ids of file i in [100 i, 100 i + 99]


def _rows(rng: random.Random, i: int):
    for r in range(ROWS):
        maybe = (lambda x: None if rng.random() < 0.1 else x)
        day = dt.date(2024, 1, 1) + dt.timedelta(days=7 * i + rng.randrange(7))
        yield {"id": maybe(100 * i + rng.randrange(100)),
               "s": maybe(chr(ord("a") + i) + rng.choice("xyz") * rng.randrange(1, 4)),
               "v": maybe(round(i * 10 + rng.random() * 10 - 5, 3)),
               "d": maybe(day.isoformat()),
               "ts": maybe(f"{day.isoformat()} {rng.randrange(24):02d}:30:00"),
               "n": maybe(f"{i * 50 + rng.randrange(5000) / 100:.2f}"),
               "k": maybe(1000 * i + rng.randrange(20) if i != 5 else None),
               "extra": f"x{r}"}


def _csv(rows) -> str:
    cols = list(FIELDS) + ["extra"]
    lines = [",".join(cols)]
    lines += [",".join("" if r[c] is None else str(r[c]) for c in cols) for r in rows]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def tables(spark, tmp_path_factory):
    rng = random.Random(15)
    root = tmp_path_factory.mktemp("prune_csv")
    every = []
    for i in range(FILES):
        rows = list(_rows(rng, i))
        every += rows
        if i == 3:
            (root / f"part-{i}.csv.gz").write_bytes(gzip.compress(_csv(rows).encode()))
        else:
            (root / f"part-{i}.csv").write_text(_csv(rows))
    cols = ", ".join(f"{c} {t}" for c, t in FIELDS.items())
    spark.sql("CREATE DATABASE IF NOT EXISTS prune_db")
    spark.sql(f"CREATE TABLE prune_db.ev_src ({cols}, extra STRING) USING csv OPTIONS "
              f"(header 'true', recursiveFileLookup 'true') LOCATION '{root}'")
    spark.sql("CREATE VIEW prune_db.ev TBLPROPERTIES ('datamap.external.source'="
              f"'prune_db.ev_src', 'datamap.external.format'='csv') AS SELECT "
              f"{', '.join(FIELDS)} FROM prune_db.ev_src")
    (spark.table("prune_db.ev_src").select(*FIELDS).repartitionByRange(8, "id")
     .write.format("parquet").saveAsTable("prune_db.pq"))
    yield {"prune_db.ev": _stats(spark, "prune_db.ev_src"), "prune_db.pq":
           _stats(spark, "prune_db.pq")}
    for stmt in ("DROP VIEW prune_db.ev", "DROP TABLE prune_db.ev_src", "DROP TABLE prune_db.pq"):
        spark.sql(stmt)


def _stats(spark, table: str) -> dict[str, FileStats]:
    """Per file: rows, per column min / max / NULL count (as strings where Python's own
    conversion would move a value: timestamps), and k's exact value set."""
    aggs = ["count(*) AS rows", "collect_set(k) AS k_set"]
    for c in FIELDS:
        conv = (lambda x: f"CAST({x} AS STRING)") if FIELDS[c] == "timestamp" else (lambda x: x)
        aggs += [f"{conv(f'min({c})')} AS {c}_lo", f"{conv(f'max({c})')} AS {c}_hi",
                 f"count_if({c} IS NULL) AS {c}_nulls"]
    out = {}
    for row in spark.sql(f"SELECT _metadata.file_path AS p, {', '.join(aggs)} FROM {table} "
                         "GROUP BY _metadata.file_path").collect():
        cols = {}
        for c in FIELDS:
            lo, hi = row[f"{c}_lo"], row[f"{c}_hi"]
            if FIELDS[c] == "timestamp" and lo is not None:
                lo, hi = dt.datetime.fromisoformat(lo), dt.datetime.fromisoformat(hi)
            cols[c] = ColumnStats(lo, hi, row[f"{c}_nulls"],
                                  ExactSet(row["k_set"]) if c == "k" else None)
        out[row["p"]] = FileStats(row["p"], row["rows"], cols)
    return out


def _pruner(spark, tables) -> Pruner:
    identity = {p: (os.stat(p[5:]).st_size, os.stat(p[5:]).st_mtime_ns)
                for stats in tables.values() for p in stats}
    indexes = [Info("prune_db", f"{t}_mm", f"prune_db.{t}", "minmax", tuple(FIELDS))
               for t in ("ev", "pq")] + [Info("prune_db", "ev_bloom", "prune_db.ev",
                                              "bloomfilter", ("k",))]

    class Store(FakeStore):        # statistics as data: what Spark says each file holds
        def file_stats(self, table):
            return tables.get(table, {})

        def file_identity(self, table):
            return identity
    shapes = {"prune_db.ev": TableShape(FIELDS, read_from="prune_db.ev_src"),
              "prune_db.pq": TableShape(FIELDS)}
    return Pruner(Store({}, identity, indexes), shapes.get)


# (query, pruned?) on both tables: {t} is ev (CSV through the view) or pq (Parquet)
QUERIES = [
    ("SELECT * FROM {t} WHERE id = 512", True),
    ("SELECT id, s FROM {t} WHERE id IN (5, 730, 1105)", True),
    ("SELECT count(*) FROM {t} WHERE id BETWEEN 250 AND 420", True),
    ("SELECT * FROM {t} WHERE id < 150 OR s >= 'k'", True),
    ("SELECT * FROM {t} WHERE NOT (id >= 100) AND v < 3", True),
    # NULL ids: spread over the CSV files, all in the Parquet table's first range
    ("SELECT count(*), sum(n) FROM {t} WHERE id IS NULL", {"ev": False, "pq": True}),
    ("SELECT count(*) FROM {t} WHERE d = DATE '2024-02-14'", True),
    ("SELECT * FROM {t} WHERE d >= '2024-03-10'", True),
    ("SELECT * FROM {t} WHERE ts < TIMESTAMP '2024-01-10 00:00:00'", True),
    ("SELECT * FROM {t} WHERE n > 500.5", True),
    ("SELECT * FROM {t} WHERE v <= -1", True),
    ("SELECT * FROM {t} WHERE id < 0", True),
    ("SELECT a.id, b.s FROM {t} a JOIN {t} b ON a.id = b.id WHERE a.id < 200 AND b.id > 50", True),
    ("SELECT x.id FROM {t} x LEFT JOIN prune_db.pq y ON x.id = y.id AND y.id = 7 "
     "WHERE x.id < 100", True),
    ("SELECT x.id, y.id FROM prune_db.pq x LEFT JOIN {t} y ON x.id = y.id WHERE y.id IS NULL", False),
    ("SELECT * FROM {t} WHERE id = '512'", False),
    ("SELECT * FROM {t} WHERE id + 0 = 512", False),
    ("WITH c AS (SELECT * FROM {t} WHERE id > 1000) SELECT count(*) FROM c "
     "UNION ALL SELECT count(*) FROM {t} WHERE id IS NOT NULL AND id < 60", True),
    ("SELECT * FROM prune_db.pq WHERE id IN (SELECT id FROM {t} WHERE id = 512)", True),
    ("SELECT * FROM (SELECT * FROM {t}) x WHERE x.id = 512", True),
    ("SELECT q, s FROM (SELECT id AS q, s FROM {t} WHERE v > 0) w WHERE q BETWEEN 300 AND 350",
     True),
    ("SELECT * FROM (SELECT id, row_number() OVER (ORDER BY id) AS r FROM {t}) x "
     "WHERE x.id = 512", False),
]
CASES = [(q.replace("{t}", f"prune_db.{t}"), hit[t] if isinstance(hit, dict) else hit, t)
         for q, hit in QUERIES for t in ("ev", "pq")]
CASES += [("SELECT * FROM prune_db.ev WHERE k = 2007", True, "ev"),
          ("SELECT * FROM prune_db.ev WHERE k IN (1, 11003) OR k IS NULL", True, "ev"),
          ("SELECT * FROM prune_db.ev WHERE k NOT IN (1)", True, "ev"),   # file 5: k all NULL
          ("SELECT * FROM prune_db.ev WHERE k <> 2007 AND k > 0", True, "ev")]


def _sorted(rows):
    return sorted((tuple(r) for r in rows), key=repr)


@pytest.mark.parametrize("sql,hit,table", CASES, ids=[f"{c[2]}:{c[0][:60]}" for c in CASES])
def test_pruned_sql_returns_the_same_rows(spark, tables, sql, hit, table):
    outcome = _pruner(spark, tables).prune(sql, "default")
    assert (outcome is not None) == hit, outcome
    if outcome is None:
        return
    assert "_metadata.file_path" in outcome.sql and outcome.lines
    want = _sorted(spark.sql(sql).collect())
    assert _sorted(spark.sql(outcome.sql).collect()) == want


def test_spark_lists_only_the_files_left(spark, tables):
    """The `_metadata.file_path NOT IN` filter prunes at file listing: the scan's
    numFiles metric counts the files read."""
    outcome = _pruner(spark, tables).prune("SELECT * FROM prune_db.ev WHERE id = 512", "default")
    df = spark.sql(outcome.sql)
    df.collect()
    scans = [n for n in _nodes(df._jdf.queryExecution().executedPlan()) if "Scan" in n.nodeName()]
    assert [s.metrics().apply("numFiles").value() for s in scans] == [1]
    assert outcome.lines == ("Pruned by index datamap prune_db.ev_mm: 1 of 12 files",)


def _nodes(plan):
    yield plan
    children = plan.children()
    for i in range(children.size()):
        yield from _nodes(children.apply(i))


def test_the_shape_of_an_external_view_and_of_a_parquet_table(spark, tables):
    from proxy.datamaps.indexes.pruning import read_kind
    assert read_kind(spark, "prune_db.ev") == ("prune_db.ev_src", True)
    assert read_kind(spark, "prune_db.pq") == (None, True)
    spark.sql("CREATE OR REPLACE VIEW prune_db.v AS SELECT * FROM prune_db.pq")
    spark.sql("CREATE OR REPLACE TEMPORARY VIEW tv AS SELECT * FROM prune_db.pq")
    assert read_kind(spark, "prune_db.v") == (None, False)     # no _metadata on a view
    assert read_kind(spark, "default.tv") == (None, False)
    spark.sql("DROP VIEW prune_db.v")
    spark.catalog.dropTempView("tv")


def test_pruned_sql_keeps_the_column_names_as_the_table_spells_them(spark, tmp_path):
    """Schemas reach the pruner lower-cased; a Parquet table keeps `Id` as written, and
    `SELECT *` of the rewritten reference must still answer `Id`, not `id`."""
    spark.sql("CREATE DATABASE IF NOT EXISTS prune_db")
    (spark.range(0, 20, numPartitions=2).selectExpr("id AS Id", "CAST(id AS STRING) AS Kind")
     .write.format("parquet").saveAsTable("prune_db.mixed"))
    try:
        stats = {r.p: FileStats(r.p, r.n, {"id": ColumnStats(r.lo, r.hi, 0)}) for r in spark.sql(
            "SELECT _metadata.file_path AS p, count(*) AS n, min(Id) AS lo, max(Id) AS hi "
            "FROM prune_db.mixed GROUP BY 1").collect()}
        shape = TableShape({"id": "bigint", "kind": "string"})

        class Store(FakeStore):        # TEST ONLY, as FakeStore above
            def file_identity(self, table):
                return {p: (os.stat(p[5:]).st_size, os.stat(p[5:]).st_mtime_ns) for p in stats}
        store = Store(stats, {}, [Info("prune_db", "mx", "prune_db.mixed", "minmax", ("id",))])
        store.file_stats = lambda table: stats
        sql = "SELECT * FROM prune_db.mixed WHERE Id = 3"
        outcome = Pruner(store, lambda t: shape).prune(sql, "default")
        assert outcome is not None
        assert spark.sql(outcome.sql).columns == spark.sql(sql).columns == ["Id", "Kind"]
        assert _sorted(spark.sql(outcome.sql).collect()) == _sorted(spark.sql(sql).collect())
    finally:
        spark.sql("DROP TABLE prune_db.mixed")
