"""Local result sets: router.LocalResult -> TTableSchema and TRowSet batches. No I/O.

Columnar TRowSet (one TColumn per column, NULL bitmap LSB-first) for protocol >= V6,
row-based TRow lists below. Spark type names map to TTypeIds valid for the session's
protocol version; anything exotic (intervals, complex types, timestamp_ntz) goes as STRING,
which is what Spark itself does for the value column.

A served answer held column by column (proxy/thrift/columns.py: its values are the members'
already) is sent as slices of its columns (`slice_rowset`); rows of Python values are
formatted value by value (`build_rowset`), to the same bytes.
"""
from __future__ import annotations

import datetime as _dt
import decimal
import re
from typing import Any, Sequence

from proxy.errors import ClientError, InternalError
from proxy.thrift.columns import ColumnarRows
from proxy.thrift.gen.TCLIService import ttypes as T

_T = T.TTypeId
# spark type name -> (TTypeId, TColumn member, default value for NULL slots)
_SIMPLE = {
    "boolean": (_T.BOOLEAN_TYPE, "boolVal", False),
    "tinyint": (_T.TINYINT_TYPE, "byteVal", 0), "byte": (_T.TINYINT_TYPE, "byteVal", 0),
    "smallint": (_T.SMALLINT_TYPE, "i16Val", 0), "short": (_T.SMALLINT_TYPE, "i16Val", 0),
    "int": (_T.INT_TYPE, "i32Val", 0), "integer": (_T.INT_TYPE, "i32Val", 0),
    "bigint": (_T.BIGINT_TYPE, "i64Val", 0), "long": (_T.BIGINT_TYPE, "i64Val", 0),
    "float": (_T.FLOAT_TYPE, "doubleVal", 0.0), "double": (_T.DOUBLE_TYPE, "doubleVal", 0.0),
    "binary": (_T.BINARY_TYPE, "binaryVal", b""),
    "string": (_T.STRING_TYPE, "stringVal", ""),
    "date": (_T.DATE_TYPE, "stringVal", ""),
    "timestamp": (_T.TIMESTAMP_TYPE, "stringVal", ""),
    "void": (_T.NULL_TYPE, "stringVal", ""), "null": (_T.NULL_TYPE, "stringVal", ""),
}
_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
_COLUMN_CLASSES = {
    "boolVal": T.TBoolColumn, "byteVal": T.TByteColumn, "i16Val": T.TI16Column,
    "i32Val": T.TI32Column, "i64Val": T.TI64Column, "doubleVal": T.TDoubleColumn,
    "stringVal": T.TStringColumn, "binaryVal": T.TBinaryColumn,
}
_VALUE_CLASSES = {
    "boolVal": T.TBoolValue, "byteVal": T.TByteValue, "i16Val": T.TI16Value,
    "i32Val": T.TI32Value, "i64Val": T.TI64Value, "doubleVal": T.TDoubleValue,
    "stringVal": T.TStringValue,
}


class ColumnType:
    __slots__ = ("name", "type_id", "member", "default", "qualifiers")

    def __init__(self, name: str, type_id: int, member: str, default: Any, qualifiers=None):
        self.name, self.type_id, self.member, self.default = name, type_id, member, default
        self.qualifiers = qualifiers


def column_type(spark_type: str, protocol: int) -> ColumnType:
    t = spark_type.strip().lower()
    if t in _SIMPLE:
        type_id, member, default = _SIMPLE[t]
        if member == "binaryVal" and protocol < 5:
            member = "stringVal"    # no binary member before V6
        return ColumnType(t, type_id, member, default)
    m = _DECIMAL.match(t)
    if m or t == "decimal":
        if protocol < 3:            # precision/scale qualifiers arrived with V4
            return ColumnType(t, _T.STRING_TYPE, "stringVal", "")
        p, s = (int(m.group(1)), int(m.group(2))) if m else (10, 0)
        q = T.TTypeQualifiers(qualifiers={
            "precision": T.TTypeQualifierValue(i32Value=p),
            "scale": T.TTypeQualifierValue(i32Value=s)})
        return ColumnType(t, _T.DECIMAL_TYPE, "stringVal", "", q)
    return ColumnType(t, _T.STRING_TYPE, "stringVal", "")


def table_schema(columns: Sequence[tuple[str, str]], protocol: int) -> T.TTableSchema:
    descs = []
    for pos, (name, spark_type) in enumerate(columns):
        ct = column_type(spark_type, protocol)
        entry = T.TTypeEntry(primitiveEntry=T.TPrimitiveTypeEntry(
            type=ct.type_id, typeQualifiers=ct.qualifiers))
        descs.append(T.TColumnDesc(columnName=name, typeDesc=T.TTypeDesc(types=[entry]),
                                   position=pos, comment=""))
    return T.TTableSchema(columns=descs)


def _as_string(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, _dt.datetime):
        # Spark's HiveServer2 text: whole seconds bare, a fraction without trailing zeros
        # (the year padded to four digits: strftime's %Y prints year 999 as '999')
        text = f"{v.year:04d}-" + v.strftime("%m-%d %H:%M:%S")
        return text + (f".{v.microsecond:06d}".rstrip("0") if v.microsecond else "")
    if isinstance(v, decimal.Decimal):
        # Spark's toPlainString: 0.0000001, never 1E-7; and no negative zero
        return format(v.copy_abs() if v.is_zero() else v, "f")
    if isinstance(v, (_dt.date, int, float)):
        return str(v)
    if isinstance(v, (bytes, bytearray)):
        return bytes(v).decode("utf-8", "replace")
    return str(v)


def _convert(member: str, v: Any) -> Any:
    if member == "stringVal":
        return _as_string(v)
    if member == "boolVal":
        return bool(v)
    if member in ("byteVal", "i16Val", "i32Val", "i64Val"):
        return int(v)
    if member == "doubleVal":
        return float(v)
    if member == "binaryVal":
        return v if isinstance(v, bytes) else _as_string(v).encode()
    raise InternalError(f"unknown column member {member}")


def nulls_bitmap(flags: Sequence[bool]) -> bytes:
    """Bit (i mod 8) of byte i//8, LSB first; set = NULL."""
    out = bytearray((len(flags) + 7) // 8)
    for i, is_null in enumerate(flags):
        if is_null:
            out[i >> 3] |= 1 << (i & 7)
    return bytes(out)


def build_rowset(types: Sequence[ColumnType], rows: Sequence[Sequence[Any]], start: int,
                 columnar: bool) -> T.TRowSet:
    try:
        if columnar:
            cols = []
            for i, ct in enumerate(types):
                values, nulls = [], []
                for row in rows:
                    v = row[i]
                    if v is None:
                        values.append(ct.default)
                        nulls.append(True)
                    else:
                        values.append(_convert(ct.member, v))
                        nulls.append(False)
                col = _COLUMN_CLASSES[ct.member](values=values, nulls=nulls_bitmap(nulls))
                cols.append(T.TColumn(**{ct.member: col}))
            return T.TRowSet(startRowOffset=start, rows=[], columns=cols)
        trows = []
        for row in rows:
            vals = []
            for i, ct in enumerate(types):
                member = ct.member if ct.member in _VALUE_CLASSES else "stringVal"
                v = row[i]
                holder = _VALUE_CLASSES[member](value=None if v is None else _convert(member, v))
                vals.append(T.TColumnValue(**{member: holder}))
            trows.append(T.TRow(colVals=vals))
        return T.TRowSet(startRowOffset=start, rows=trows)
    except (TypeError, ValueError, IndexError) as e:
        raise InternalError(f"local result does not match its declared columns: {e}") from e


def slice_rowset(types: Sequence[ColumnType], data: ColumnarRows, start: int, count: int,
                 columnar: bool) -> T.TRowSet:
    """Rows [start, start + count) of a result held column by column: its values are the
    members' already (proxy/thrift/columns.py), so a batch is a slice of each column."""
    end = start + count
    if columnar:
        cols = [T.TColumn(**{ct.member: _COLUMN_CLASSES[ct.member](
                    values=c.values[start:end], nulls=c.bitmap(start, count))})
                for ct, c in zip(types, data.columns)]
        return T.TRowSet(startRowOffset=start, rows=[], columns=cols)
    cells = []
    for ct, c in zip(types, data.columns):
        member = ct.member if ct.member in _VALUE_CLASSES else "stringVal"
        holder = _VALUE_CLASSES[member]
        cells.append([T.TColumnValue(**{member: holder(value=None if c.is_null(i)
                                                        else c.values[i])})
                      for i in range(start, end)])
    return T.TRowSet(startRowOffset=start, rows=[T.TRow(colVals=list(vals))
                                                 for vals in zip(*cells)])


def log_rowset(lines, columnar: bool) -> T.TRowSet:
    """fetchType=1 (operation log) answer holding the proxy's own lines."""
    lines = [str(x) for x in lines]
    if columnar:
        return T.TRowSet(startRowOffset=0, rows=[], columns=[T.TColumn(
            stringVal=T.TStringColumn(values=lines, nulls=nulls_bitmap([False] * len(lines))))])
    return T.TRowSet(startRowOffset=0, rows=[
        T.TRow(colVals=[T.TColumnValue(stringVal=T.TStringValue(value=x))]) for x in lines])


def empty_log_rowset(columnar: bool) -> T.TRowSet:
    """fetchType=1 (operation log) answer for local operations: one STRING column, no rows."""
    if columnar:
        return T.TRowSet(startRowOffset=0, rows=[], columns=[
            T.TColumn(stringVal=T.TStringColumn(values=[], nulls=b""))])
    return T.TRowSet(startRowOffset=0, rows=[])


# Converting a value to its Thrift holder costs about a microsecond: a batch with more
# values than this is converted off the event loop (service.py), not in its ~20 ms slice.
CELLS_ON_LOOP = 20_000


class LocalRowSource:
    """A LocalResult being fetched: position, FETCH_NEXT / FETCH_FIRST / FETCH_PRIOR."""

    def __init__(self, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]],
                 protocol: int):
        self.columns = list(columns)
        if isinstance(rows, ColumnarRows):      # a served answer: batches are slices
            if len(rows.columns) != len(self.columns):
                raise InternalError(f"local result has {len(rows.columns)} columns of values "
                                    f"for {len(self.columns)} columns")
            self.rows: Sequence[Sequence[Any]] = rows
        else:
            self.rows = list(rows)
            for r in self.rows:
                if len(r) != len(self.columns):
                    raise InternalError(
                        f"local result row has {len(r)} values for {len(self.columns)} columns")
        self.protocol = protocol
        self.types = [column_type(t, protocol) for _, t in self.columns]
        self.pos = 0
        self._last_batch = 0

    def schema(self) -> T.TTableSchema:
        return table_schema(self.columns, self.protocol)

    def costly(self, max_rows: int) -> bool:
        """Would fetch(max_rows, ...) convert more than CELLS_ON_LOOP values?"""
        if isinstance(self.rows, ColumnarRows) and self.protocol >= 5:
            return False            # slices of the columns: nothing is converted
        n = max_rows if max_rows and max_rows > 0 else 1000
        return min(n, len(self.rows)) * max(1, len(self.columns)) > CELLS_ON_LOOP

    def fetch(self, max_rows: int, orientation: int) -> tuple[T.TRowSet, bool]:
        """(rowset, hasMoreRows). hasMoreRows is never true for an empty batch."""
        if orientation == T.TFetchOrientation.FETCH_FIRST:
            self.pos = 0
        elif orientation == T.TFetchOrientation.FETCH_PRIOR:
            self.pos = max(0, self.pos - self._last_batch - max(max_rows, 0))
        elif orientation != T.TFetchOrientation.FETCH_NEXT:
            raise ClientError(
                f"fetch orientation {T.TFetchOrientation._VALUES_TO_NAMES.get(orientation, orientation)}"
                " is not supported (FETCH_NEXT, FETCH_FIRST, FETCH_PRIOR are)", "HY106")
        n = max_rows if max_rows and max_rows > 0 else 1000
        start = self.pos
        count = max(0, min(n, len(self.rows) - start))
        self.pos = start + count
        self._last_batch = count
        if isinstance(self.rows, ColumnarRows):
            rowset = slice_rowset(self.types, self.rows, start, count, self.protocol >= 5)
        else:
            rowset = build_rowset(self.types, self.rows[start:start + count], start,
                                  self.protocol >= 5)
        return rowset, count > 0 and self.pos < len(self.rows)


# ---------------------------------------------------------------- upstream rowsets -> rows

_TYPE_NAMES = {
    _T.BOOLEAN_TYPE: "boolean", _T.TINYINT_TYPE: "tinyint", _T.SMALLINT_TYPE: "smallint",
    _T.INT_TYPE: "int", _T.BIGINT_TYPE: "bigint", _T.FLOAT_TYPE: "float",
    _T.DOUBLE_TYPE: "double", _T.STRING_TYPE: "string", _T.TIMESTAMP_TYPE: "timestamp",
    _T.BINARY_TYPE: "binary", _T.ARRAY_TYPE: "array", _T.MAP_TYPE: "map",
    _T.STRUCT_TYPE: "struct", _T.UNION_TYPE: "uniontype", _T.DECIMAL_TYPE: "decimal",
    _T.NULL_TYPE: "void", _T.DATE_TYPE: "date", _T.VARCHAR_TYPE: "string",
    _T.CHAR_TYPE: "string", _T.INTERVAL_YEAR_MONTH_TYPE: "interval year to month",
    _T.INTERVAL_DAY_TIME_TYPE: "interval day to second",
    _T.TIMESTAMPLOCALTZ_TYPE: "timestamp",
}


def schema_columns(schema: T.TTableSchema | None) -> list[tuple[str, str]]:
    """TTableSchema -> [(name, spark type name)] (decimal keeps precision and scale)."""
    out = []
    for c in (schema.columns if schema and schema.columns else []):
        entry = c.typeDesc.types[0] if c.typeDesc and c.typeDesc.types else None
        prim = entry.primitiveEntry if entry is not None else None
        if prim is None:
            out.append((c.columnName, "string"))
            continue
        name = _TYPE_NAMES.get(prim.type, "string")
        if prim.type == _T.DECIMAL_TYPE and prim.typeQualifiers:
            q = prim.typeQualifiers.qualifiers or {}
            p, s = q.get("precision"), q.get("scale")
            if p is not None and s is not None:
                name = f"decimal({p.i32Value},{s.i32Value})"
        out.append((c.columnName, name))
    return out


def _is_null(nulls: bytes, i: int) -> bool:
    b = i >> 3
    return b < len(nulls) and bool(nulls[b] & (1 << (i & 7)))


def decode_rowset(rowset: T.TRowSet | None, ncols: int) -> list[tuple]:
    """Columnar or row-based TRowSet -> list of row tuples (None for NULL)."""
    if rowset is None:
        return []
    if rowset.columns:
        cols = []
        for col in rowset.columns:
            inner = next(v for v in (col.boolVal, col.byteVal, col.i16Val, col.i32Val, col.i64Val,
                                     col.doubleVal, col.stringVal, col.binaryVal) if v is not None)
            nulls = inner.nulls or b""
            cols.append([None if _is_null(nulls, i) else v for i, v in enumerate(inner.values)])
        return list(zip(*cols)) if cols else []
    rows = []
    for r in rowset.rows or []:
        vals = []
        for cv in r.colVals:
            holder = next((v for v in (cv.boolVal, cv.byteVal, cv.i16Val, cv.i32Val, cv.i64Val,
                                       cv.doubleVal, cv.stringVal) if v is not None), None)
            vals.append(None if holder is None else holder.value)
        rows.append(tuple(vals))
    return rows
