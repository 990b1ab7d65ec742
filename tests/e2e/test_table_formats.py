"""Datamaps over base tables that are not plain unpartitioned `USING parquet` tables, end to
end through one embedded `python -m proxy serve`: Hive-serde tables (STORED AS PARQUET /
ORC / TEXTFILE) and partitioned tables (data-source and Hive), loaded with every kind of
statement (INSERT VALUES, static and dynamic partition inserts, LOAD DATA, INSERT
OVERWRITE of the table and of one partition, ALTER TABLE DROP PARTITION).

After every step the dashboard queries are answered from the datamaps (EXPLAIN says Hit)
with exactly the rows Spark returns from the base tables, and the newest datamap segment
says what it was made from: the step's base segment, appended (incremental) or as the
only segment (a rebuild, after files were removed or overwritten). Partition values with a space, `%` and `+` exercise the two path spellings
(encoded in `_metadata`/`inputFiles()`, decoded in `input_file_name()` of Hive scans).

The tests run in order on one proxy (shared with other modules: tests/e2e/conftest.py)
and share its state."""
from __future__ import annotations

import json

import pytest

from tests.support.e2e import Pair

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def c(shared_serve, tmp_path_factory):
    pair = Pair(shared_serve.port)
    try:
        pair.root = tmp_path_factory.mktemp("e2e_formats")
        # Hive tables refuse all-dynamic partition inserts in the default strict mode.
        pair.dm.run("SET hive.exec.dynamic.partition.mode=nonstrict")
        yield pair
    finally:
        pair.close()


def agg_dm(table: str) -> tuple[str, str]:
    """A datamap not mentioning any partition column, and a query it answers."""
    return (f"CREATE DATAMAP {table}_k USING 'mv' AS "
            f"SELECT k, sum(v), count(*), max(v) FROM {table} GROUP BY k",
            f"SELECT k, sum(v), count(*) FROM {table} GROUP BY k")


def by_p_dm(table: str) -> tuple[str, str]:
    """A datamap grouping by the partition column p, and a query it answers (rollup)."""
    return (f"CREATE DATAMAP {table}_p USING 'mv' AS "
            f"SELECT p, k, sum(v), count(*) FROM {table} GROUP BY p, k",
            f"SELECT p, sum(v), count(*) FROM {table} GROUP BY p")


def check(c: Pair, table: str, datamaps: list[str], queries: list[str], kind: str,
          base_id: int) -> None:
    """Answers equal Spark's, from the datamaps, and the newest datamap segment was made
    from base segment `base_id` (every step here cuts exactly one; a step that removed
    files leaves that one as the only live segment). `kind`: "incremental" appended a
    segment, "rebuild" replaced them all."""
    for dm, q in zip(datamaps, queries):
        plan = c.explain(q)
        assert f"Hit mv DataMap: {dm}" in plan.splitlines(), plan[:2000]
        got = c.dm.rows(q)
        # Spark's own answer, in the same session: every load here ran in it, so its file
        # listings are current (cheaper than a fresh session per check)
        c.dm.run("SET datamap.rewrite.enabled=false")
        try:
            want = c.dm.rows(q)
        finally:
            c.dm.run("SET datamap.rewrite.enabled=true")
        assert got == want, f"{dm} after a {kind} step: {q}\ndatamap: {got}\nbase:    {want}"
        segs = [s for s in c.segments(f"{dm}_table") if s[1] == "Success"]
        assert json.loads(segs[0][6]) == {f"default.{table}": [str(base_id)]}, (kind, segs)
        if kind == "rebuild":
            assert len(segs) == 1, segs
        else:
            assert len(segs) > 1, segs


def test_hive_orc_table(c):
    """(Hive Parquet: see h_part below. Spark reads both through its own readers.)"""
    table = "h_orc"
    c.dm.run(f"CREATE TABLE {table} (k STRING, v INT) STORED AS ORC")
    c.dm.run(f"INSERT INTO {table} VALUES ('a', 1), ('b', 2), ('a', 3), (NULL, 4)")
    create, q = agg_dm(table)
    c.dm.run(create)
    check(c, table, [f"{table}_k"], [q], "rebuild", 0)
    c.dm.run(f"INSERT INTO {table} SELECT k, v * 2 FROM {table} WHERE k = 'b' "
             "UNION ALL SELECT 'c', -5")
    check(c, table, [f"{table}_k"], [q], "incremental", 1)


def test_text_table_insert_and_load_data(c):
    """TEXTFILE is a Hive scan: `inputFiles()` names the directory, `input_file_name()` the
    files. LOAD DATA keeps the loaded file's name, so OVERWRITE with a file of the same name
    leaves the listing unchanged: only the statement says the contents changed."""
    table = "h_text"
    c.dm.run(f"CREATE TABLE {table} (k STRING, v INT) ROW FORMAT DELIMITED FIELDS "
             "TERMINATED BY ',' STORED AS TEXTFILE")
    c.dm.run(f"INSERT INTO {table} VALUES ('a', 1), ('b', 2), (NULL, 4)")
    create, q = agg_dm(table)
    c.dm.run(create)
    check(c, table, [f"{table}_k"], [q], "rebuild", 0)
    src = c.root / "load" / "part.csv"
    src.parent.mkdir()
    src.write_text("a,100\nd,7\n,1\n")
    c.dm.run(f"LOAD DATA LOCAL INPATH '{src}' INTO TABLE {table}")
    check(c, table, [f"{table}_k"], [q], "incremental", 1)
    c.dm.run(f"LOAD DATA LOCAL INPATH '{src}' OVERWRITE INTO TABLE {table}")
    src.write_text("z,5\n")
    c.dm.run(f"LOAD DATA LOCAL INPATH '{src}' OVERWRITE INTO TABLE {table}")
    check(c, table, [f"{table}_k"], [q], "rebuild", 3)
    assert c.dm.rows(q) == [("z", 5, 1)]


PARTITIONED = {
    "d_part": "CREATE TABLE d_part (k STRING, v INT, p STRING) USING parquet PARTITIONED BY (p)",
    "h_part": "CREATE TABLE h_part (k STRING, v INT) PARTITIONED BY (p STRING) STORED AS PARQUET",
    "t_part": "CREATE TABLE t_part (k STRING, v INT) PARTITIONED BY (p STRING) "
              "ROW FORMAT DELIMITED FIELDS TERMINATED BY ',' STORED AS TEXTFILE",
}
STEPS = {
    "values": ("INSERT INTO {t} VALUES ('a', 5, 'a b'), ('c', 6, 'e+f')", "incremental"),
    "static": ("INSERT INTO {t} PARTITION (p='x') VALUES ('b', 7)", "incremental"),
    "dynamic": ("INSERT INTO {t} PARTITION (p) SELECT k, v + 100, concat(p, '%') FROM {t} "
                "WHERE p IN ('x', 'a b')", "incremental"),
    "overwrite_partition": ("INSERT OVERWRITE TABLE {t} PARTITION (p='x') VALUES ('z', 9)",
                            "rebuild"),
    "drop_partition": ("ALTER TABLE {t} DROP PARTITION (p='a b')", "rebuild"),
    "overwrite": ("INSERT OVERWRITE TABLE {t} VALUES ('m', 8, 'x'), ('n', 9, 'y y')",
                  "rebuild"),
}
PLANS = {   # each load kind on one table at least (suite time)
    "d_part": [s for s in STEPS if s != "static"],
    "h_part": ["static", "overwrite_partition", "drop_partition"],
    "t_part": ["dynamic", "drop_partition"],
}


@pytest.mark.parametrize("table", list(PARTITIONED))
def test_partitioned_tables(c, table):
    c.dm.run(PARTITIONED[table])
    c.dm.run(f"INSERT INTO {table} VALUES ('a', 1, 'x'), ('b', 2, 'a b'), ('a', 3, 'c%d')")
    both = table != "t_part"       # t_part: the one grouping by p is enough (suite time)
    dms = [f"{table}_k", f"{table}_p"] if both else [f"{table}_p"]
    pairs = [agg_dm(table), by_p_dm(table)] if both else [by_p_dm(table)]
    creates, queries = [c for c, _ in pairs], [q for _, q in pairs]
    for create in creates:
        c.dm.run(create)
    check(c, table, dms, list(queries), "rebuild", 0)
    for n, step in enumerate(PLANS[table], start=1):
        sql, kind = STEPS[step]
        c.dm.run(sql.format(t=table))
        check(c, table, dms, list(queries), kind, n)
    if "drop_partition" in PLANS[table]:
        assert c.base.rows(f"SELECT count(*) FROM {table} WHERE p = 'a b'") == [(0,)]
