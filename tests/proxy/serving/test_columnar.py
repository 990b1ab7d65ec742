"""The served answer column by column (proxy/serving/columnar.py) sends a client exactly the
bytes the value-by-value path sends for the same rows (proxy/thrift/rowsets.py), for edge
values of every type, NULLs, batches that start inside a NULL-bitmap byte and the
row-based protocols; values only the value-by-value path prints (years outside 1..9999,
infinite timestamps, integers wider than 64 bits) and unproven types are answered by it."""
from __future__ import annotations

import random
import sys

import duckdb
import pytest

from proxy.serving.cache import result_size
from proxy.serving.engine import SMALL, LocalEngine
from proxy.serving.translate import Plan
from proxy.thrift.columns import Column, ColumnarRows
from proxy.thrift.rowsets import nulls_bitmap
from tests.support.replies import assert_same_replies


@pytest.fixture(scope="module")
def engine():
    e = LocalEngine(threads=2, workers=1)
    try:
        yield e
    finally:
        e.close()


def _values(duck: str, literals) -> str:
    rows = ", ".join(f"(({'NULL' if v is None else v})::{duck})" for v in literals)
    return f"SELECT x FROM (VALUES {rows}) t(x)"


def _served(engine, spark: str, sql: str):
    plan = Plan(sql, (("x", spark),), ())
    rows = engine.run_blocking(plan)
    served = engine.answer_blocking(plan)
    assert_same_replies(plan.columns, rows, served, ordered=True)
    return served


TS = ["TIMESTAMP '0001-01-01 00:00:00'", "TIMESTAMP '9999-12-31 23:59:59.999999'",
      "TIMESTAMP '1970-01-01 00:00:00'", "TIMESTAMP '1969-12-31 23:59:59.999999'",
      "TIMESTAMP '0999-03-04 05:06:07.5'", "TIMESTAMP '1582-10-10 00:00:00.000001'",
      "TIMESTAMP '2024-02-29 12:00:00.12'", "TIMESTAMP '2024-12-31 23:59:59.100000'", None]
DATES = ["DATE '0001-01-01'", "DATE '9999-12-31'", "DATE '0099-03-04'", "DATE '2024-02-29'",
         "DATE '1969-12-31'", None]


def _decimals(p: int, s: int) -> list:
    top = "9" * p
    def lit(digits: str, neg: bool) -> str:
        text = digits.rjust(s + 1, "0")
        return ("-" if neg else "") + (text[:len(text) - s] + "." + text[len(text) - s:]
                                       if s else text)
    out = [lit("0", False), lit("1", False), lit("1", True), lit(top, False), lit(top, True),
           lit("5" + "0" * (p - 1), False), lit("1" + "0" * (p - 1), True), None]
    return [f"'{v}'" if v is not None else None for v in out]


def _narrowed(p: int, s: int) -> list:
    """A decimal wider than 18 digits printed as an 18-digit one where it fits: the values
    either side of that edge, and the smallest."""
    def lit(digits: str, neg: bool) -> str:
        text = digits.rjust(s + 1, "0")
        return "'" + ("-" if neg else "") + (text[:len(text) - s] + "." + text[len(text) - s:]
                                             if s else text) + "'"
    inside, outside = "9" * 18, "1" + "0" * 18
    return [lit(d, neg) for d in (inside, outside, "1") for neg in (False, True)] + [None]


CASES = [
    ("timestamp", "TIMESTAMP", TS),
    ("string", "TIMESTAMP", TS),
    ("date", "DATE", DATES),
    ("string", "DATE", DATES),
    *[(f"decimal({p},{s})", f"DECIMAL({p},{s})", _decimals(p, s))
      for p, s in ((38, 38), (38, 0), (38, 10), (20, 2), (10, 2), (1, 1), (1, 0), (3, 3),
                   (18, 18), (19, 19), (9, 4))],
    ("string", "DECIMAL(5,5)", _decimals(5, 5)),
    *[(f"decimal({p},{s})", f"DECIMAL({p},{s})", _narrowed(p, s))
      for p, s in ((20, 2), (19, 0), (38, 10), (38, 17), (19, 18))],
    ("bigint", "BIGINT", ["9223372036854775807", "-9223372036854775808", "0", "-1", None]),
    ("bigint", "HUGEINT", ["9223372036854775807", "-9223372036854775808", "7", None]),
    ("bigint", "UBIGINT", ["0", "9223372036854775807", None]),
    ("int", "INTEGER", ["2147483647", "-2147483648", "0", None]),
    ("int", "BIGINT", ["2147483647", "-2147483648", "0", None]),
    ("smallint", "SMALLINT", ["32767", "-32768", None]),
    ("tinyint", "TINYINT", ["127", "-128", "0", None]),
    ("string", "BIGINT", ["9223372036854775807", "-9223372036854775808", "0", None]),
    ("string", "HUGEINT", ["170141183460469231731687303715884105727", "-1", None]),
    ("double", "DOUBLE", ["'-0.0'", "'NaN'", "'Infinity'", "'-Infinity'", "1e308", "5e-324",
                          "0.1", "1e16", "123456789.125", "-2.5e-10", None]),
    ("float", "FLOAT", ["'-0.0'", "'NaN'", "'Infinity'", "3.4e38", "1.4e-45", "0.1", None]),
    ("double", "FLOAT", ["0.1", "'-0.0'", None]),
    ("boolean", "BOOLEAN", ["true", "false", None]),
    ("string", "BOOLEAN", ["true", "false", None]),
    ("string", "VARCHAR", ["''", "'a'", "'ü ß é'", "'日本語'", "'😀 emoji'", "' padded '",
                           "'tab\tnew\nline'", "'quote '' and \\ backslash'", "'NULL'",
                           "repeat('x', 5000)", "chr(0)", None]),
]


@pytest.mark.parametrize("spark, duck, literals", CASES,
                         ids=[f"{c[0]}<-{c[1]}" for c in CASES])
def test_edge_values_are_sent_as_the_rows_send_them(engine, spark, duck, literals):
    served = _served(engine, spark, _values(duck, literals))
    assert isinstance(served, ColumnarRows), "taken column by column"


@pytest.mark.parametrize("spark, sql", [
    ("timestamp", "SELECT TIMESTAMP '10000-01-01 00:00:00' AS x"),
    ("timestamp", "SELECT x FROM (VALUES (TIMESTAMP '2024-01-01'), ('infinity'::TIMESTAMP)) t(x)"),
    ("timestamp", "SELECT '-infinity'::TIMESTAMP AS x"),
    ("timestamp", "SELECT TIMESTAMP '0000-06-01 00:00:00' AS x"),
    ("date", "SELECT x FROM (VALUES (DATE '2024-01-01'), (DATE '10000-01-01')) t(x)"),
    ("date", "SELECT 'infinity'::DATE AS x"),
    ("bigint", "SELECT 9223372036854775808::HUGEINT AS x"),
    ("bigint", "SELECT (-9223372036854775808)::HUGEINT - 1 AS x"),
])
def test_values_only_the_rows_print_are_answered_as_rows(engine, spark, sql):
    plan = Plan(sql, (("x", spark),), ())
    served = engine.answer_blocking(plan)
    assert isinstance(served, list) and served == engine.run_blocking(plan)


@pytest.mark.parametrize("spark, sql", [
    ("binary", "SELECT 'ab\\xFF'::BLOB AS x"),
    ("string", "SELECT 1.5::DOUBLE AS x"),                     # Python's repr, not DuckDB's
    ("double", "SELECT 1.5::DECIMAL(3,1) AS x"),
    ("double", "SELECT 3::BIGINT AS x"),
    ("timestamp", "SELECT TIMESTAMPTZ '2024-01-01 10:00:00+00' AS x"),
    ("string", "SELECT INTERVAL 1 DAY AS x"),
    ("string", "SELECT [1, 2] AS x"),
    ("void", "SELECT NULL AS x"),
    ("boolean", "SELECT 1 AS x"),
])
def test_unproven_types_are_answered_as_rows(engine, spark, sql):
    assert isinstance(_served(engine, spark, sql), list)


def test_many_rows_keep_their_order_and_nulls_across_chunks(engine):
    """Past DuckDB's 2,048-row vectors, on two threads, NULLs only in a later chunk; the
    ORDER BY of the plan is the order sent."""
    sql = ("SELECT TIMESTAMP '2019-01-01' + INTERVAL (i * 3607) SECOND AS ts, "
           "CASE WHEN i > 5000 AND i % 97 = 0 THEN NULL ELSE CAST(i * 1234.56 / 7 AS "
           "DECIMAL(20,2)) END AS amount, CASE WHEN i % 89 = 0 THEN NULL ELSE i END AS n, "
           "CASE WHEN i > 9000 THEN NULL ELSE 'c' || (i % 25) END AS country, "
           "CASE WHEN i % 79 = 0 THEN NULL ELSE i / 7.0 END AS price "
           "FROM range(12000) r(i) ORDER BY (i * 7919) % 12007 DESC")
    plan = Plan(sql, (("ts", "timestamp"), ("amount", "decimal(20,2)"), ("n", "bigint"),
                      ("country", "string"), ("price", "double")), ())
    rows = engine.run_blocking(plan)
    served = engine.answer_blocking(plan)
    assert isinstance(served, ColumnarRows) and served == rows[:0] + [
        tuple(None if v is None else v for v in r) for r in served]
    assert_same_replies(plan.columns, rows, served, ordered=True)


def test_a_column_whose_type_changed_is_read_again(engine, tmp_path):
    """The projection kept for a plan checks each column's type: a file rewritten with
    another type under the same SQL is answered as rows, then its types are read again."""
    path = tmp_path / "t.parquet"
    con = duckdb.connect()
    plan = Plan(f"SELECT x FROM read_parquet('{path}')", (("x", "string"),), ())

    def write(value: str) -> None:
        con.execute(f"COPY (SELECT {value} AS x FROM range(100)) TO '{path}' (FORMAT parquet)")
    write("7::BIGINT")
    assert engine.answer_blocking(plan) == [("7",)] * 100
    write("1.5::DOUBLE")
    served = engine.answer_blocking(plan)
    assert isinstance(served, list) and served == [(1.5,)] * 100
    assert_same_replies(plan.columns, engine.run_blocking(plan), served)
    write("2.50::DECIMAL(3,2)")
    served = engine.answer_blocking(plan)
    assert isinstance(served, ColumnarRows) and served == [("2.50",)] * 100
    con.close()


def test_small_answers_go_as_rows_after_the_first(engine):
    """Under SMALL rows, planning the projection costs more than converting the rows: the
    plan's next answers are fetched as rows, until one is large again."""
    con = engine._db        # the database the engine's cursors share
    con.execute("CREATE TABLE sizes AS SELECT 3 AS n")
    plan = Plan("SELECT CAST(i AS DECIMAL(10,2)) AS m FROM sizes, range(sizes.n) r(i)",
                (("m", "decimal(10,2)"),), ())
    assert isinstance(engine.answer_blocking(plan), ColumnarRows)
    assert len(engine.answer_blocking(plan)) == 3 and isinstance(engine.answer_blocking(plan), list)
    con.execute(f"UPDATE sizes SET n = {SMALL + 1}")
    rows = engine.answer_blocking(plan)
    assert isinstance(rows, list) and len(rows) == SMALL + 1
    served = engine.answer_blocking(plan)
    assert isinstance(served, ColumnarRows)
    assert_same_replies(plan.columns, rows, served, ordered=True)


def test_an_empty_answer(engine):
    plan = Plan("SELECT 1::BIGINT AS n, 'a' AS s WHERE false", (("n", "bigint"),
                                                                 ("s", "string")), ())
    served = engine.answer_blocking(plan)
    assert isinstance(served, ColumnarRows) and len(served) == 0
    assert_same_replies(plan.columns, [], served)


def test_bitmaps_of_any_slice_are_the_rows_bitmaps():
    rng = random.Random(7)
    for n in (0, 1, 7, 8, 9, 64, 1001):
        flags = [rng.random() < 0.3 for _ in range(n)]
        col = Column([0] * n, bytes(flags))
        for start in {0, 1, 3, 8, n // 2, n}:
            for count in {0, 1, 5, 8, 13, n - start}:
                count = max(0, min(count, n - start))
                assert col.bitmap(start, count) == nulls_bitmap(flags[start:start + count])
    assert Column([1, 2]).bitmap(0, 2) == b"\x00"


def _deep_size(rows: ColumnarRows) -> int:
    seen: set[int] = set()
    total = 0
    for c in rows.columns:
        total += sys.getsizeof(c.values) + (sys.getsizeof(c.nulls) if c.nulls else 0)
        for v in c.values:
            if id(v) not in seen:
                seen.add(id(v))
                total += sys.getsizeof(v)
    return total


def test_the_cache_counts_what_a_columnar_answer_holds(engine):
    plan = Plan("SELECT 'country-' || (i % 25) AS s, i AS n, i / 3 AS d, i % 2 = 0 AS b, "
                "CASE WHEN i % 3 = 0 THEN NULL ELSE CAST(i AS DECIMAL(12,2)) END AS m "
                "FROM range(5000) r(i)", (("s", "string"), ("n", "bigint"), ("d", "double"),
                                           ("b", "boolean"), ("m", "decimal(12,2)")), ())
    served = engine.answer_blocking(plan)
    assert isinstance(served, ColumnarRows)
    held, counted = _deep_size(served), result_size(plan.columns, served)
    assert 0.8 * held <= counted <= 1.5 * held, (held, counted)
