"""How many rows a FetchResults reply carries, read from its bytes. No I/O.

A pass-through reply is relayed as Spark's bytes and never decoded (codec.py); the query
log still wants the rows a client got. This walks the reply only as far as the row set's
first list header: the `rows` list (row-based protocols) or the first column's `values`
list (columnar, protocol V6+). The status struct before it is skipped without building
objects; no row data is read. A few microseconds per reply, whatever its size.
"""
from __future__ import annotations

import struct

from thrift.Thrift import TType

from proxy.thrift.codec import _skip

_i32 = struct.Struct("!i").unpack_from
_field = struct.Struct("!bh").unpack_from
_list = struct.Struct("!bi").unpack_from
_NO_LIMIT = 1 << 62


def fetched_rows(reply: bytes | bytearray | memoryview) -> int | None:
    """Rows in a FetchResults reply; None when it is not one or carries no row set."""
    try:
        pos = _body(reply)
        pos = _field_of(reply, pos, 0, TType.STRUCT)          # FetchResults_result.success
        if pos is None:
            return None
        pos = _field_of(reply, pos, 3, TType.STRUCT)          # TFetchResultsResp.results
        if pos is None:
            return None
        rows = None       # an empty `rows` list with no columns after it: an empty page
        while True:                                           # TRowSet
            ftype = reply[pos]
            if ftype == TType.STOP:
                return rows
            _, fid = _field(reply, pos)
            pos += 3
            if fid == 2 and ftype == TType.LIST:              # rows: list<TRow>
                _, count = _list(reply, pos)
                if count:
                    return count
                rows = 0
            elif fid == 3 and ftype == TType.LIST:            # columns: list<TColumn>
                _, count = _list(reply, pos)
                if count == 0:
                    return 0
                pos += 5
                # TColumn is a union: one field, a T*Column struct whose field 1 is `values`
                if reply[pos] != TType.STRUCT:
                    return None
                values = _field_of(reply, pos + 3, 1, TType.LIST)
                return None if values is None else _list(reply, values)[1]
            pos = _skip(reply, pos, ftype, 0, _NO_LIMIT)
    except Exception:  # noqa: BLE001 - a malformed reply is the client's to see; not counted
        return None


def rowset_rows(rowset) -> int:
    """Rows in a TRowSet the proxy built itself (a local or served result)."""
    if rowset.columns:
        column = rowset.columns[0]
        for value in (column.boolVal, column.byteVal, column.i16Val, column.i32Val,
                      column.i64Val, column.doubleVal, column.stringVal, column.binaryVal):
            if value is not None:
                return len(value.values or ())
        return 0
    return len(rowset.rows or ())


def _body(data) -> int:
    (word,) = _i32(data, 0)
    if word < 0:                                  # strict: version, name, seqid
        (nlen,) = _i32(data, 4)
        return 8 + nlen + 4
    return 4 + word + 1 + 4                       # non-strict: name, type byte, seqid


def _field_of(data, pos: int, want: int, ttype: int) -> int | None:
    """Position of field `want`'s value in the struct starting at `pos`, None if absent."""
    while True:
        ftype = data[pos]
        if ftype == TType.STOP:
            return None
        _, fid = _field(data, pos)
        pos += 3
        if fid == want and ftype == ttype:
            return pos
        pos = _skip(data, pos, ftype, 0, _NO_LIMIT)
