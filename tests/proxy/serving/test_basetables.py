"""A base table read whole in a served answer, without Spark: the freshness guard's listing
of its files (FreshnessGuard.table_files: what is read, and when nothing is), and the tier
keeping a plan only while the table has the same files. Spark's side of the same answers:
test_basetables_spark.py."""
from __future__ import annotations

import asyncio

import duckdb
import pytest
import sqlglot

from proxy.config import ServingSettings
from proxy.datamaps.freshness.guard import FreshnessGuard
from proxy.serving import ServingTier
from proxy.serving.tier import Served
from rewriter.api import RewriteResult
from rewriter.normalize import DIALECT
from tests.support.datamaps import add_datamap, decision_service
from tests.support.serving_tier import TIER_AGG as AGG, TIER_SCHEMAS as SCHEMAS, publish

DIM = [["country", "string"], ["name", "string"]]


def write(path, rows) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    con = duckdb.connect()
    con.execute("CREATE TABLE t (country VARCHAR, name VARCHAR)")
    if rows:
        con.executemany("INSERT INTO t VALUES (?, ?)", rows)
    con.execute(f"COPY t TO '{path}' (FORMAT parquet)")
    con.close()
    return str(path)


def layout(root, parts=(), partitions=()):
    return {"hive": False, "roots": [f"file:{root}", *(f"file:{p}" for p in parts)],
            "cached": False, "format": "parquet", "columns": DIM + [[p, "string"]
                                                                    for p in partitions],
            "partition_columns": list(partitions)}


def guard_of(layouts: dict) -> FreshnessGuard:
    guard = FreshnessGuard(lambda t: layouts[t], lambda _t: None)
    guard.load_layouts(list(layouts))
    return guard


# ----------------------------------------------------------------- the guard's listing

def test_the_files_of_an_unpartitioned_table(tmp_path):
    root = tmp_path / "dim"
    a = write(root / "a.parquet", [("de", "Germany")])
    (root / "_SUCCESS").write_text("")
    guard = guard_of({"db1.dim": layout(root)})
    got = guard.table_files("db1.dim")
    assert got[1] == frozenset({a}) and got[0].format == "parquet"
    write(root / "sub" / "b.parquet", [("fr", "France")])
    assert guard.table_files("db1.dim") == f"file {root}/sub/b.parquet is in a subdirectory " \
                                           "of the table"


def test_not_while_a_write_goes_on(tmp_path):
    root = tmp_path / "dim"
    write(root / "a.parquet", [("de", "Germany")])
    guard = guard_of({"db1.dim": layout(root)})
    token = guard.begin_write(["db1.dim"])
    assert guard.table_files("db1.dim") == "a write into it through the proxy is going on"
    guard.end_write(token)
    job = "part-00000-1b2c3d4e-0000-0000-0000-000000000001"
    write(root / f"{job}-c000.snappy.parquet", [("fr", "France")])
    write(root / "_temporary" / "0" / f"{job.replace('00000', '00001', 1)}-c000.parquet", [])
    assert guard.table_files("db1.dim") == "a write job is committing files into it"


def test_partitions_the_metastore_listed(tmp_path):
    root = tmp_path / "dim"
    p1 = root / "p=a"
    a = write(p1 / "a.parquet", [("de", "Germany")])
    guard = guard_of({"db1.dim": layout(root, [p1], ["p"])})
    assert guard.table_files("db1.dim")[1] == frozenset({a})
    write(root / "p=b" / "b.parquet", [("fr", "France")])     # not a listed partition
    assert "is outside the partition directories the metastore listed" in \
        guard.table_files("db1.dim")


def test_an_unknown_layout_is_loaded_in_the_background(tmp_path):
    root = tmp_path / "dim"
    write(root / "a.parquet", [("de", "Germany")])
    guard = FreshnessGuard(lambda _t: layout(root), lambda _t: None)
    assert guard.table_files("db1.dim") == "its layout is not known here yet"
    for _ in range(200):
        if not isinstance(guard.table_files("db1.dim"), str):
            break
        asyncio.run(asyncio.sleep(0.01))
    assert not isinstance(guard.table_files("db1.dim"), str)


# ----------------------------------------------------------------- the tier

@pytest.fixture
def world(tmp_path):
    """db1.agg (one segment) and db1.dim, a dimension table the guard lists."""
    gen = decision_service(tmp_path / "state", SCHEMAS)
    service = next(gen)
    add_datamap(service, SCHEMAS, "db1", "agg", AGG, build=False)
    sid = publish(service, tmp_path, [("de", 3, "1.50", 1, 1), ("fr", 4, "2.00", 1, 2)])
    root = tmp_path / "dim"
    write(root / "a.parquet", [("de", "Germany"), ("de", "Deutschland")])
    service.guard._load_layout = lambda _t: layout(root)
    service.guard.load_layouts(["db1.dim"])
    sql = ("SELECT d.name AS name, SUM(m.sum_qty) AS q FROM (SELECT country, sum_qty FROM "
           f"db1.agg_table_segments WHERE dm_segment_id IN ('{sid}')) AS m JOIN dim AS d "
           "ON m.country = d.country GROUP BY d.name")
    result = RewriteResult(sql, True, ["db1.agg"], tree=sqlglot.parse_one(sql, read=DIALECT))
    yield service, root, result
    next(gen, None)


def tier_of(service, **settings) -> ServingTier:
    return ServingTier(service.catalog, ServingSettings(**settings),
                       layouts=service.guard.layout, tables=service.guard.table_files)


def rows(tier, served) -> list:
    result, _how = asyncio.run(tier.answer(served, {"datamap.cache.enabled": "false"}))
    return sorted(result.rows)


def test_a_plan_is_kept_while_the_table_has_the_same_files(world):
    service, root, result = world
    tier = tier_of(service)
    try:
        first = tier.plan(result, {}, "db1")
        assert isinstance(first, Served), first
        assert rows(tier, first) == [("Deutschland", 3), ("Germany", 3)]
        assert tier.plan(result, {}, "db1") is first
        write(root / "b.parquet", [("fr", "France")])
        second = tier.plan(result, {}, "db1")
        assert isinstance(second, Served) and second is not first
        assert rows(tier, second) == [("Deutschland", 3), ("France", 4), ("Germany", 3)]
        token = service.guard.begin_write(["db1.dim"])
        assert tier.plan(result, {}, "db1") == ("not served locally: table db1.dim: a write "
                                                "into it through the proxy is going on")
        service.guard.end_write(token)                  # the refusal was not kept
        assert isinstance(tier.plan(result, {}, "db1"), Served)
        assert tier.plan(result, {}) == "not served locally: table dim named without its " \
                                        "database"
    finally:
        tier.close()


def test_the_budget_names_the_setting(world):
    service, _root, result = world
    tier = tier_of(service, max_base_bytes=10)
    try:
        why = tier.plan(result, {}, "db1")
        assert why.startswith("not served locally: the files of db1.dim are ") and \
            why.endswith("bytes, over [serving] max_base_bytes (10)"), why
    finally:
        tier.close()
