"""A datamap compensated with its base table's new files, answered in-process, without
Spark: a real catalog (SQLite), the real freshness guard over real files, Parquet written by
DuckDB, the real engine. Spark's side of the same answers: tests/e2e/test_freshness.py and
test_compensation_spark.py; here: what is read (only the guard's files), how partition
values are typed, the byte budget, what goes to Spark and why, memory."""
from __future__ import annotations

import asyncio
from pathlib import Path

import duckdb
import pytest
import sqlglot

from proxy.config import ServingSettings
from proxy.datamaps.explain import compensated_line, served_lines
from proxy.datamaps.handler import DatamapSelectHandler
from proxy.routing.router import Rewrite, Serve, StatementContext
from proxy.serving import ServingTier
from proxy.serving.compensation import BaseTable, partition_literal
from proxy.serving.tier import Served
from proxy.serving.translate import NotServable, Plan, translate
from rewriter.normalize import DIALECT
from tests.support.datamaps import add_datamap, decision_service
from tests.support.serving_tier import TIER_AGG as AGG, TIER_QUERY as QUERY, TIER_SCHEMAS as SCHEMAS, publish

COLUMNS = "id INTEGER, country VARCHAR, qty INTEGER, amount DECIMAL(10,2)"


def write(path: Path, rows) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t ({COLUMNS})")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", rows)
    con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    con.close()
    return str(path)


@pytest.fixture
def world(tmp_path):
    """db1.agg over db1.sales: one segment built from a.parquet; the guard lists
    tmp_path/sales as Spark's layout of the table would say."""
    gen = decision_service(tmp_path / "state", SCHEMAS)
    service = next(gen)
    root = tmp_path / "sales"
    a = write(root / "a.parquet", [(1, "de", 3, "1.50")])
    add_datamap(service, SCHEMAS, "db1", "agg", AGG, build=False)
    service.catalog.add_base_segment("db1.sales", [f"file:{a}"])
    publish(service, tmp_path, [("de", 3, "1.50", 1, 1)])
    layout = {"hive": False, "roots": [f"file:{root}"], "cached": False, "format": "parquet",
              "columns": [["id", "int"], ["country", "string"], ["qty", "int"],
                          ["amount", "decimal(10,2)"]], "partition_columns": []}
    service.guard._load_layout = lambda _t: layout
    service.guard.load_layouts(["db1.sales"])
    yield service, root, layout
    next(gen, None)


def _ctx(**conf):
    return StatementContext("s1", "me", "db1", dict(conf), 10)


def decide(service, query=QUERY, **settings):
    tier = ServingTier(service.catalog, ServingSettings(**settings),
                       layouts=service.guard.layout)
    h = DatamapSelectHandler(service, serving=tier)
    try:
        d = h(_ctx(**{"datamap.cache.enabled": "false"}), query)
        result = asyncio.run(d.attempt()) if isinstance(d, Serve) else None
        return d, result, tier
    finally:
        h.close()
        tier.close()


def test_new_files_are_compensated_in_process(world):
    service, root, _ = world
    write(root / "b.parquet", [(2, "de", 4, "2.25"), (3, "fr", None, None), (4, None, 1, "0.10")])
    d, (result, how), _ = decide(service)
    assert isinstance(d, Serve) and "compensated:agg" in d.fallback.note, d
    assert "UNION ALL" in d.fallback.sql and how == "local cache=bypassed"
    assert [tuple(map(str, r)) for r in sorted(result.rows, key=repr)] == [
        ("de", "7", "1.875000"), ("fr", "None", "None"), ("None", "1", "0.100000")]


def test_a_load_still_committing_is_not_read(world):
    """A Spark job's files still in _temporary are held back by the guard; the in-process
    answer reads only the files its filter names, never the table's directory."""
    service, root, _ = world
    job = "part-00000-1b2c3d4e-0000-0000-0000-000000000001"
    write(root / f"{job}-c000.snappy.parquet", [(5, "de", 100, "1.00")])
    write(root / "_temporary" / "0" / "task" / f"{job.replace('00000', '00001', 1)}-c000"
          ".snappy.parquet", [(6, "de", 1000, "1.00")])
    d, out, _ = decide(service)
    assert isinstance(d, Serve) and "compensated" not in d.fallback.note
    assert [r[:2] for r in out[0].rows] == [("de", 3)]       # neither file of the job


@pytest.mark.parametrize("change, settings, why", [
    ({}, {"max_base_bytes": 10}, "bytes, over [serving] max_base_bytes (10)"),
    ({"format": "orc"}, {}, "its files are orc, which the local engine does not read as Spark"),
    ({"format": "hive", "hive": True}, {}, "a Hive-format table (Spark reads it through its "
                                           "SerDe)"),
    ({"roots": ["hdfs://nn/w/sales"]}, {}, None),   # not listed: the catalog's word stands
], ids=["budget", "orc", "hive", "remote"])
def test_what_a_compensation_sends_to_spark(world, change, settings, why):
    service, root, layout = world
    layout.update(change)
    service.guard.load_layouts(["db1.sales"])
    write(root / "b.parquet", [(2, "de", 4, "2.25")])
    d, _, _ = decide(service, **settings)
    if why is None:
        assert isinstance(d, Serve) and "compensated" not in d.fallback.note
        return
    assert isinstance(d, Rewrite) and "compensated:agg" in d.note and why in d.note, d.note


def test_explain_names_the_budget(world):
    service, root, _ = world
    write(root / "b.parquet", [(2, "de", 4, "2.25")])
    d, _, _ = decide(service)
    tree = sqlglot.parse_one(d.fallback.sql, read=DIALECT)
    from rewriter.api import RewriteResult
    result = RewriteResult(d.fallback.sql, True, ["db1.agg"], tree=tree)
    for settings, line in [
        ({}, "Served by: local engine (compensated with new base files)"),
        ({"max_base_bytes": 10}, "Served by: spark (compensated with new base files; not "
                                 "served locally: new files of db1.sales are ")]:
        tier = ServingTier(service.catalog, ServingSettings(**settings),
                           layouts=service.guard.layout)
        try:
            got = compensated_line(served_lines(tier, result, {})[0])
        finally:
            tier.close()
        assert got.startswith(line), got
    assert got.endswith("bytes, over [serving] max_base_bytes (10))"), got


# ----------------------------------------------------------------- partitions, pure
def test_partition_values_are_typed_as_declared():
    assert partition_literal("007", "int", "p") == "CAST(7 AS INTEGER)"
    assert partition_literal("-128", "tinyint", "p") == "CAST(-128 AS TINYINT)"
    assert partition_literal("2024-02-29", "date", "p") == "DATE '2024-02-29'"
    assert partition_literal("__HIVE_DEFAULT_PARTITION__", "int", "p") == \
        "CAST(NULL AS INTEGER)"
    assert partition_literal("it's", "string", "p") == "CAST('it''s' AS VARCHAR)"
    for raw, typ in [("+5", "int"), ("1e3", "bigint"), ("128", "tinyint"), ("1.5", "int"),
                     ("2024-02-30", "date"), ("1.50", "decimal(10,2)"), ("TRUE", "boolean")]:
        with pytest.raises(NotServable, match="partition value"):
            partition_literal(raw, typ, "p")


SEG = "db.agg_table_segments"
STORED = {SEG: {"p": "int", "k": "string", "s": "bigint", "c": "bigint"}}
BASE = BaseTable("db.t", "parquet", (("k", "string"), ("v", "int"), ("p", "int")), ("p",))


def comp_sql(files, build_out="SUM(t.v) AS s", union="UNION ALL"):
    listed = ", ".join(f"'file:{f}'" for f in files)
    return ("SELECT m.p AS p, SUM(m.s) AS s, SUM(m.c) AS c FROM (SELECT p, k, s, c FROM "
            f"{SEG} WHERE dm_segment_id IN ('0') {union} SELECT t.p AS p, t.k AS k, {build_out}, "
            "COUNT(*) AS c FROM (SELECT * FROM `db`.`t` WHERE _metadata.file_path IN "
            f"({listed})) AS t GROUP BY t.p, t.k) AS m GROUP BY m.p")


def plan_of(sql, seg_files, base=BASE):
    return translate(sqlglot.parse_one(sql, read=DIALECT), STORED,
                     lambda _t, _ids: seg_files, "UTC",
                     lambda _t, uris: (base, [u[len("file:"):] for u in uris]))


def test_partitioned_new_files_in_process(tmp_path):
    con = duckdb.connect()
    seg = tmp_path / "seg.parquet"
    con.execute(f"COPY (SELECT 1 AS p, 'a' AS k, 10::BIGINT AS s, 2::BIGINT AS c) TO '{seg}'")
    files = []
    for p, v in [("1", 5), ("3", 7), ("__HIVE_DEFAULT_PARTITION__", 11)]:
        (tmp_path / "t" / f"p={p}").mkdir(parents=True)
        f = tmp_path / "t" / f"p={p}" / "part-0.parquet"
        con.execute(f"COPY (SELECT 'a' AS k, {v}::INTEGER AS v) TO '{f}'")
        files.append(str(f))
    plan = plan_of(comp_sql(files), [str(seg)])
    rows = sorted(con.execute(plan.sql).fetchall(), key=repr)
    assert rows == [(1, 15, 3), (3, 7, 1), (None, 11, 1)]
    assert plan.columns == (("p", "int"), ("s", "bigint"), ("c", "bigint"))


def test_compensations_not_served(tmp_path):
    f = tmp_path / "t" / "p=1" / "part-0.parquet"
    for sql, why in [
        (comp_sql([f], union="UNION"), "a UNION other than a datamap's compensation"),
        (comp_sql([f], build_out="SUM(t.v) + 0.5 AS s"), "compensation column s is"),
        (comp_sql([tmp_path / "t" / "part-0.parquet"]), "not in a p=value directory"),
    ]:
        with pytest.raises(NotServable, match=why):
            plan_of(sql, [])
    csv = BaseTable("db.t", "csv", BASE.columns, ("p",), problem="its files are csv, ...")
    with pytest.raises(NotServable, match="new files of db.t: its files are csv"):
        plan_of(comp_sql([f]), [], csv)


# ----------------------------------------------------------------- memory
def test_a_served_query_over_memory_limit_is_answered_by_spark(tmp_path):
    """DuckDB stops a query at [serving] memory_limit (Out of Memory Error): the tier
    returns no result and the statement goes to its fallback, Spark."""
    tier = ServingTier(None, ServingSettings(memory_limit="20MB", timeout=60.0))
    try:
        big = Plan("SELECT count(DISTINCT x) FROM (SELECT range::VARCHAR || 'abcdefghijklmnop' "
                   "AS x FROM range(3000000))", (("n", "bigint"),), ())
        result, how = asyncio.run(tier.answer(Served(big, (big.sql, ())), {}))
        assert result is None and how.startswith("spark (local engine: Out of Memory Error")
        small = Plan("SELECT 1", (("n", "int"),), ())
        result, how = asyncio.run(tier.answer(Served(small, (small.sql, ())), {}))
        assert result.rows == [(1,)]              # the engine goes on answering
    finally:
        tier.close()


# ----------------------------------------------------------------- CSV
CSV = BaseTable("db.t", "csv", (("k", "string"), ("v", "int"), ("x", "decimal(8,2)"),
                                ("f", "double"), ("ok", "boolean"), ("p", "int")), ("p",))


def csv_plan(tmp_path, text: str, base=CSV):
    (tmp_path / "t" / "p=1").mkdir(parents=True, exist_ok=True)
    f = tmp_path / "t" / "p=1" / "part-0.csv"
    f.write_text(text)
    sql = ("SELECT m.k AS k, SUM(m.s) AS s, SUM(m.sx) AS sx, MAX(m.mf) AS mf, SUM(m.c) AS c FROM "
           "(SELECT k, s, sx, mf, c FROM db.c_table_segments WHERE dm_segment_id IN () UNION ALL "
           "SELECT t.k AS k, SUM(t.v) AS s, SUM(t.x) AS sx, MAX(t.f) AS mf, COUNT(t.ok) AS c "
           "FROM (SELECT * FROM `db`.`t` WHERE _metadata.file_path IN "
           f"('file:{f}')) AS t GROUP BY t.k) AS m GROUP BY m.k")
    stored = {"db.c_table_segments": {"k": "string", "s": "bigint", "sx": "decimal(18,2)",
                                      "mf": "double", "c": "bigint"}}
    return translate(sqlglot.parse_one(sql, read=DIALECT), stored, lambda _t, _i: [], "UTC",
                     lambda _t, uris: (base, [u[len("file:"):] for u in uris]))


def test_csv_fields_read_as_spark_reads_them(tmp_path):
    plan = csv_plan(tmp_path, "a,1,1.50,0.5,true\n,,,,\n  b ,-7,-0.01,-1.0E-5,FALSE\n"
                              "a,2147483647,999999.99,1.0E300,\n")
    rows = sorted(duckdb.connect().execute(plan.sql).fetchall(), key=repr)
    # spaces kept, an empty field NULL, booleans in any case, Java's double spelling
    assert [(r[0], r[1], str(r[2]), r[3], r[4]) for r in rows] == [
        ("  b ", -7, "-0.01", -1e-05, 1), ("a", 2147483648, "1000001.49", 1e300, 1),
        (None, None, "None", None, 0)]


@pytest.mark.parametrize("text", ['"",1,1.50,0.5,true\n', '"x,y",1,1.50,0.5,true\n',
                                  'a,+1,1.50,0.5,true\n', 'a,1,1.505,0.5,true\n',
                                  'a,1,1.50,NaN,true\n', 'a,1,1.50,0.5,yes\n',
                                  'a,1,1.50,0.5\n', 'a,1,1.50,0.5,true,9\n', 'a\\b,1,1,1,true\n'])
def test_csv_fields_spark_may_read_otherwise_raise(tmp_path, text):
    """Quoted or escaped fields, numbers in spellings the two engines may read apart, rows
    of another width: the local run raises, so Spark answers."""
    plan = csv_plan(tmp_path, text)
    with pytest.raises(duckdb.Error):
        duckdb.connect().execute(plan.sql).fetchall()


def test_csv_tables_not_read_here():
    from proxy.serving.compensation import format_problem
    assert format_problem("csv", False, (("header", "true"), ("sep", ";"))) is None
    assert "quote" in format_problem("csv", False, (("quote", "'"),))
    assert "sep" in format_problem("csv", False, (("sep", '"'),))
