"""Local result sets: schema, columnar and row-based rowsets, NULL bitmaps, fetch semantics."""
import datetime
import decimal

from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.thrift.rowsets import (CELLS_ON_LOOP, LocalRowSource, empty_log_rowset, nulls_bitmap,
                           table_schema)

COLS = [("k", "string"), ("n", "int"), ("b", "bigint"), ("d", "double"), ("f", "boolean"),
        ("dec", "decimal(10,2)"), ("ts", "timestamp"), ("iv", "interval day to second")]
ROWS = [("a", 1, 10, 1.5, True, decimal.Decimal("1.25"), datetime.datetime(2024, 1, 2, 3, 4, 5), "1 day"),
        (None, None, None, None, None, None, None, None),
        ("c", 3, 30, -2.0, False, decimal.Decimal("-3.00"), None, None)]


def test_nulls_bitmap_lsb_first():
    assert nulls_bitmap([False, True]) == b"\x02"
    assert nulls_bitmap([True] + [False] * 8) == b"\x01\x00"
    assert nulls_bitmap([]) == b""


def test_schema_types():
    sch = table_schema(COLS, protocol=9)
    ids = [c.typeDesc.types[0].primitiveEntry.type for c in sch.columns]
    assert ids == [T.TTypeId.STRING_TYPE, T.TTypeId.INT_TYPE, T.TTypeId.BIGINT_TYPE,
                   T.TTypeId.DOUBLE_TYPE, T.TTypeId.BOOLEAN_TYPE, T.TTypeId.DECIMAL_TYPE,
                   T.TTypeId.TIMESTAMP_TYPE, T.TTypeId.STRING_TYPE]
    q = sch.columns[5].typeDesc.types[0].primitiveEntry.typeQualifiers.qualifiers
    assert q["precision"].i32Value == 10 and q["scale"].i32Value == 2
    # Before V4 there are no decimal qualifiers: DECIMAL goes as STRING.
    old = table_schema(COLS, protocol=2)
    assert old.columns[5].typeDesc.types[0].primitiveEntry.type == T.TTypeId.STRING_TYPE


def test_columnar_rowset():
    src = LocalRowSource(COLS, ROWS, protocol=5)
    rs, more = src.fetch(1000, T.TFetchOrientation.FETCH_NEXT)
    assert not more and rs.rows == [] and len(rs.columns) == 8
    assert rs.columns[0].stringVal.values == ["a", "", "c"]
    assert rs.columns[0].stringVal.nulls == b"\x02"
    assert rs.columns[1].i32Val.values == [1, 0, 3]
    assert rs.columns[4].boolVal.values == [True, False, False]
    assert rs.columns[5].stringVal.values == ["1.25", "", "-3.00"]
    assert rs.columns[6].stringVal.values[0] == "2024-01-02 03:04:05"
    assert rs.columns[6].stringVal.nulls == b"\x06"
    # encodes on the wire
    data = codec.encode_reply("FetchResults", 0, T.TFetchResultsResp(
        status=T.TStatus(statusCode=0), hasMoreRows=more, results=rs))
    assert codec.message_length(data) == len(data)
    rs2, more2 = src.fetch(1000, T.TFetchOrientation.FETCH_NEXT)
    assert not more2 and rs2.columns[0].stringVal.values == []


def test_row_based_rowset():
    src = LocalRowSource(COLS, ROWS, protocol=4)
    rs, _ = src.fetch(10, T.TFetchOrientation.FETCH_NEXT)
    assert rs.columns is None and len(rs.rows) == 3
    assert rs.rows[0].colVals[0].stringVal.value == "a"
    assert rs.rows[0].colVals[1].i32Val.value == 1
    assert rs.rows[1].colVals[1].i32Val.value is None
    assert rs.rows[0].colVals[4].boolVal.value is True


def test_batches_first_and_more_rows():
    rows = [(str(i), i) for i in range(5)]
    src = LocalRowSource([("s", "string"), ("i", "int")], rows, protocol=9)
    rs, more = src.fetch(2, T.TFetchOrientation.FETCH_NEXT)
    assert rs.columns[1].i32Val.values == [0, 1] and more and rs.startRowOffset == 0
    rs, more = src.fetch(2, T.TFetchOrientation.FETCH_NEXT)
    rs, more = src.fetch(2, T.TFetchOrientation.FETCH_NEXT)
    assert rs.columns[1].i32Val.values == [4] and not more
    rs, more = src.fetch(2, T.TFetchOrientation.FETCH_NEXT)
    assert rs.columns[1].i32Val.values == [] and not more   # never more=true on empty
    rs, more = src.fetch(3, T.TFetchOrientation.FETCH_FIRST)
    assert rs.columns[1].i32Val.values == [0, 1, 2] and more


def test_log_rowset():
    assert empty_log_rowset(True).columns[0].stringVal.values == []
    assert empty_log_rowset(False).rows == []


def test_a_batch_of_many_values_is_costly_enough_to_convert_off_the_loop():
    small = LocalRowSource([("a", "int"), ("b", "string")], [(1, "x")] * 100, 9)
    assert not small.costly(1000)
    big = LocalRowSource([("a", "int"), ("b", "string")], [(1, "x")] * CELLS_ON_LOOP, 9)
    assert big.costly(CELLS_ON_LOOP) and not big.costly(0) and not big.costly(100)


def test_timestamps_print_as_spark_prints_them():
    """A year under 1000 keeps four digits ('0999-...', as Spark); a fraction loses its
    trailing zeros."""
    from proxy.thrift.rowsets import _as_string
    assert _as_string(datetime.datetime(999, 3, 4, 0, 5, 6, 789000)) == "0999-03-04 00:05:06.789"
    assert _as_string(datetime.datetime(2024, 2, 29)) == "2024-02-29 00:00:00"
