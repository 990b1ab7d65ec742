"""rewriter/prune/files.py on fixtures: tests/fixtures/prune/prune.yaml (files each reference
skips) and prune__nomatch.yaml (nothing skipped). The Spark tier
(tests/rewriter/test_prune_spark.py) checks that pruned SQL returns Spark's rows."""
from __future__ import annotations

import dataclasses
import datetime as dt
import pathlib
from decimal import Decimal

import pytest

from rewriter.normalize import parse
from rewriter.prune.files import IndexedTable, IndexSpec, prune_files, prune_sql
from rewriter.prune.filestats import ColumnStats, FileStats
from tests.support import yamlfile as yaml
from tests.support.prune import ExactSet

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "prune"
COLUMNS = {"id": "bigint", "id2": "int", "s": "string", "v": "double", "d": "date",
           "ts": "timestamp", "n": "decimal(10,2)", "k": "int", "w": "int",
           "f": "float"}
LETTERS = [("a", "c"), ("d", "f"), ("g", "i"), ("j", "l"), ("m", "z")]


def path(i: int) -> str:
    return f"file:/data/t/seg_0/f{i}.csv"


def file_stats(i: int) -> FileStats:
    day = dt.date(2024, i + 1, 1)
    cols = {
        "id": ColumnStats(10 * i, 10 * i + 9, 2 if i == 4 else 0),
        "id2": ColumnStats(7, 7, 0) if i == 1 else ColumnStats(0, 9, 0),
        "s": ColumnStats(*LETTERS[i], 0),
        "v": ColumnStats(1.5 * i, 1.5 * i + 1, 0),
        "d": ColumnStats(day, day.replace(day=28), 0),
        "ts": ColumnStats(dt.datetime(2024, i + 1, 1, 12), dt.datetime(2024, i + 1, 28, 12), 0),
        "n": ColumnStats(Decimal(100 * i), Decimal(100 * i) + Decimal("99.99"), 0),
        "f": ColumnStats(0.0, 1.0, 0),
        "k": ColumnStats(nulls=10) if i == 3 else ColumnStats(
            nulls=0, bloom=ExactSet(range(1000 * i, 1000 * i + 10))),
    }
    return FileStats(path(i), rows=10, columns=cols)


TABLE = IndexedTable(
    "db.t", COLUMNS, {path(i): file_stats(i) for i in range(5)},
    (IndexSpec("t_minmax", "minmax", ("id", "id2", "s", "v", "d", "ts", "n")),
     IndexSpec("t_bloom", "bloomfilter", ("k",))))


def cases(name):
    doc = yaml.safe_load((FIXTURES / name).read_text())
    return [pytest.param(c, id=c["title"]) for c in doc["cases"]]


@pytest.mark.parametrize("case", cases("prune.yaml"))
def test_prunes(case):
    done = prune_files(parse(case["sql"]), TABLE, "db")
    assert done is not None, case["title"]
    got = [sorted(p.rsplit("/", 1)[1][:-4] for p in skipped) for skipped in done.pruned]
    assert got == [sorted(s) for s in case["skip"]]


@pytest.mark.parametrize("case", cases("prune__nomatch.yaml"))
def test_keeps_every_file(case):
    assert prune_files(parse(case["sql"]), TABLE, "db") is None


def test_rewritten_sql_reads_the_source_table_without_the_pruned_files():
    external = IndexedTable("db.t", {"id": "bigint", "s": "string"}, TABLE.files,
                            TABLE.indexes, read_from="db.t_src")
    sql, counts = prune_sql(parse("SELECT s FROM t x WHERE x.id = 13"), [external], "db")
    skipped = ", ".join(f"'{path(i)}'" for i in (0, 2, 3, 4))
    assert sql == ("SELECT s FROM (SELECT `id`, `s` FROM `db`.`t_src` WHERE NOT "
                   f"_metadata.file_path IN ({skipped})) AS x WHERE x.id = 13")
    assert counts == {"db.t_minmax": (1, 5)}


def test_counts_say_which_index_pruned():
    _, counts = prune_sql(parse("SELECT * FROM t WHERE k = 2005 AND id >= 20"), [TABLE], "db")
    assert counts == {"db.t_minmax": (3, 5), "db.t_bloom": (2, 5)}   # together: 1 file read


def test_two_tables_in_turn_and_the_original_tree_untouched():
    other = IndexedTable("db.u", {"k": "int"}, {"file:/u/0.parquet": FileStats(
        "file:/u/0.parquet", 3, {"k": ColumnStats(100, 200, 0)})},
        (IndexSpec("u_mm", "minmax", ("k",)),))
    tree = parse("SELECT * FROM t JOIN u ON t.id = u.k WHERE t.id = 1 AND u.k = 5")
    before = tree.sql("spark")
    sql, counts = prune_sql(tree, [TABLE, other], "db")
    assert tree.sql("spark") == before
    assert sql.count("_metadata.file_path") == 2 and set(counts) == {"db.t_minmax", "db.u_mm"}


def test_a_file_without_statistics_is_read():
    partial = IndexedTable("db.t", COLUMNS, {path(0): file_stats(0)}, TABLE.indexes)
    done = prune_files(parse("SELECT * FROM t WHERE id = 13"), partial, "db")
    assert done.pruned == [frozenset({path(0)})]   # f1..f4 unknown: never named, so read


@pytest.mark.parametrize("low,high", [(float("nan"), 2.0), (0.0, float("nan"))])
def test_nan_bounds_never_prune(low, high):
    nan = IndexedTable("db.t", {"v": "double"}, {path(0): FileStats(
        path(0), 4, {"v": ColumnStats(low, high, 0)})})
    assert prune_files(parse("SELECT * FROM t WHERE v = 5"), nan, "db") is None


def test_a_temporary_view_of_the_same_name_is_not_the_table():
    """Spark resolves an unqualified `t` to the session's temporary view `t`: reading the
    table instead would answer from other rows. A qualified `db.t` is still the table."""
    shadowed = dataclasses.replace(TABLE, shadowed=True)
    assert prune_files(parse("SELECT * FROM t WHERE id = 13"), shadowed, "db") is None
    assert prune_files(parse("SELECT * FROM (SELECT * FROM t) x WHERE x.id = 13"),
                       shadowed, "db") is None
    done = prune_files(parse("SELECT * FROM db.t JOIN t AS v ON v.id = t.id WHERE "
                             "t.id = 13 AND v.id = 13"), shadowed, "db")
    assert len(done.pruned) == 1 and "AS `v`" not in done.tree.sql("spark") \
        and "JOIN t AS v" in done.tree.sql("spark")
