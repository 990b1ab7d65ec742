"""A served answer fetched column by column, as HiveServer2 sends it.

Fetching rows as Python objects (a datetime, a Decimal per value) and formatting each into
its TColumn member costs microseconds a value: most of a dashboard's time when a chart has
thousands of rows. Instead the plan's SQL is wrapped in a projection that has DuckDB print
the values HiveServer2 sends as text (timestamps, dates, decimals), and fetchnumpy hands
over each column at once; numpy turns it into the member's list and its NULL flags
(proxy/thrift/columns.py). No float ever stands in for a decimal.

Only pairs of (TColumn member, DuckDB type) whose text or value is proven equal to the
value-by-value path (proxy/thrift/rowsets.py `_convert`, tests/proxy/serving/
test_columnar.py) are taken; a plan with any other column is answered by that path. A value
the value-by-value path prints otherwise (a year outside 1..9999, an infinite timestamp, an
integer wider than 64 bits) raises FALLBACK inside DuckDB, and the engine answers the plan
the other way. Each wrapped column checks its type (`typeof`), so a projection kept for a
plan never formats a column whose type has changed under it.

Planning the projection costs DuckDB about half a millisecond more than the plan alone,
which converting a few dozen rows does not: a plan whose last answer was under SMALL rows
(engine.py) is fetched as rows.
"""
from __future__ import annotations

from typing import Any, Sequence

from proxy.thrift.columns import Column, ColumnarRows
from proxy.thrift.rowsets import column_type

# raised by the projection (DuckDB's error()) for a value only the other path prints, or
# a column whose type is not the one the projection was written for
FALLBACK = "datamap-proxy columnar path: "
RETYPED = FALLBACK + "the type of a column changed"
_RAISE = f"error('{FALLBACK}a value it does not print')"
_RETYPED = f"error('{RETYPED}')"
_LATEST = 9       # members as protocol V6+ carries them (binary, never taken, aside)
_NARROW = 18      # digits of DuckDB's widest 64-bit decimal

_INTS = frozenset({"TINYINT", "SMALLINT", "INTEGER", "BIGINT",
                   "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT"})
_WIDE = frozenset({"HUGEINT", "UHUGEINT"})
_INT_MEMBERS = frozenset({"byteVal", "i16Val", "i32Val", "i64Val"})
# the range Python's datetime and date print as `_as_string` does (the year in four digits)
_TS_RANGE = "TIMESTAMP '0001-01-01 00:00:00' AND TIMESTAMP '9999-12-31 23:59:59.999999'"
_DATE_RANGE = "DATE '0001-01-01' AND DATE '9999-12-31'"


def _guarded(col: str, within: str, then: str) -> str:
    """`then` where `col` is NULL or within the range, FALLBACK raised elsewhere."""
    return f"CASE WHEN {col} IS NULL OR {col} BETWEEN {within} THEN {then} ELSE {_RAISE} END"


def _text(col: str, duck: Any) -> str | None:
    """The DuckDB expression printing `col` as `_as_string` does, or None."""
    kind = duck.id.upper()
    if kind == "VARCHAR":
        return col
    if kind == "TIMESTAMP":     # fraction trimmed of trailing zeros, as Spark prints it
        return _guarded(col, _TS_RANGE, f"CAST({col} AS VARCHAR)")
    if kind == "DATE":
        return _guarded(col, _DATE_RANGE, f"CAST({col} AS VARCHAR)")
    if kind == "DECIMAL":       # plain digits, the type's scale; no negative zero exists
        p, s = (v for _, v in duck.children)
        if p == s:              # DuckDB prints .5 where the plain form is 0.5
            return (f"CASE WHEN {col} < 0 THEN '-0' || substr(CAST({col} AS VARCHAR), 2) "
                    f"ELSE '0' || CAST({col} AS VARCHAR) END")
        if p > _NARROW > s:
            # a 128-bit decimal prints at about half the speed of a 64-bit one (a sum of a
            # decimal(10,2) is a decimal(20,2)): a value that fits 18 digits is printed as
            # one, the same text at the same scale
            top = "9" * (_NARROW - s) + ("." + "9" * s if s else "")
            narrow = f"DECIMAL({_NARROW},{s})"
            return (f"CASE WHEN {col} BETWEEN CAST('-{top}' AS {narrow}) AND "
                    f"CAST('{top}' AS {narrow}) THEN CAST(CAST({col} AS {narrow}) AS VARCHAR) "
                    f"ELSE CAST({col} AS VARCHAR) END")
        return f"CAST({col} AS VARCHAR)"
    if kind in _INTS or kind in _WIDE or kind == "BOOLEAN":    # digits; true / false
        return f"CAST({col} AS VARCHAR)"
    return None


def _expression(member: str, col: str, duck: Any) -> str | None:
    """The DuckDB expression giving `col`'s value as `member` holds it, or None."""
    kind = duck.id.upper()
    if member == "stringVal":
        return _text(col, duck)
    if member in _INT_MEMBERS and kind in _INTS:
        return col
    if member in _INT_MEMBERS and kind in _WIDE:    # numpy would make it a float
        return _guarded(col, "-9223372036854775808 AND 9223372036854775807",
                        f"CAST({col} AS BIGINT)")
    if member == "doubleVal" and kind in ("DOUBLE", "FLOAT"):
        return col
    if member == "boolVal" and kind == "BOOLEAN":
        return col
    return None


def projection(sql: str, spark_types: Sequence[str], duck_types: Sequence[Any]) -> str | None:
    """`sql` wrapped so that each column comes out as its member holds it; None when a
    column is not proven (the value-by-value path answers)."""
    if len(spark_types) != len(duck_types) or not duck_types:
        return None
    names = [f"c{i}" for i in range(len(duck_types))]
    out = []
    for name, spark, duck in zip(names, spark_types, duck_types):
        expr = _expression(column_type(spark, _LATEST).member, name, duck)
        if expr is None:
            return None
        # the type the expression was written for, checked at every run
        wanted = str(duck).replace("'", "''")
        out.append(f"CASE WHEN typeof({name}) = '{wanted}' THEN {expr} ELSE {_RETYPED} END")
    return f"SELECT {', '.join(out)} FROM ({sql}) AS q({', '.join(names)})"


def columns_of(arrays: dict, spark_types: Sequence[str]) -> ColumnarRows:
    """fetchnumpy's arrays of a projection -> the members' lists and NULL flags."""
    import numpy as np

    cols = []
    for arr, spark in zip(arrays.values(), spark_types):
        default = column_type(spark, _LATEST).default
        nulls = None
        if isinstance(arr, np.ma.MaskedArray):
            mask = np.ma.getmaskarray(arr)
            if mask.any():
                nulls = mask.view(np.uint8).tobytes()
                arr = arr.filled(default)
            else:
                arr = arr.data
        cols.append(Column(arr.tolist(), nulls))
    return ColumnarRows(cols)
