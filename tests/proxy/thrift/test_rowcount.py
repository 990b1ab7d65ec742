"""proxy/thrift/rowcount.py: rows of a FetchResults reply, read from its bytes."""
from __future__ import annotations

import pytest

from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.thrift.rowcount import fetched_rows, rowset_rows

OK = T.TStatus(statusCode=T.TStatusCode.SUCCESS_STATUS, infoMessages=["a", "b"])


def reply(rowset: T.TRowSet | None, status=OK) -> bytes:
    return codec.encode_reply("FetchResults", 7, T.TFetchResultsResp(
        status=status, hasMoreRows=False, results=rowset))


COLUMNS = [T.TColumn(stringVal=T.TStringColumn(values=["x"] * 1234, nulls=b"")),
           T.TColumn(i64Val=T.TI64Column(values=list(range(1234)), nulls=b""))]
CASES = [
    ("columnar", T.TRowSet(startRowOffset=0, rows=[], columns=COLUMNS), 1234),
    ("columnar, a bool first", T.TRowSet(startRowOffset=0, rows=[], columns=[
        T.TColumn(boolVal=T.TBoolColumn(values=[True] * 3, nulls=b""))]), 3),
    ("row-based", T.TRowSet(startRowOffset=0, rows=[T.TRow(colVals=[
        T.TColumnValue(i32Val=T.TI32Value(value=1))])] * 5), 5),
    ("empty columnar", T.TRowSet(startRowOffset=0, rows=[], columns=[
        T.TColumn(i32Val=T.TI32Column(values=[], nulls=b""))]), 0),
    ("no columns", T.TRowSet(startRowOffset=0, rows=[], columns=[]), 0),
    # the last, empty page of a row-based result (protocols before V6): no columns field
    ("empty row-based", T.TRowSet(startRowOffset=0, rows=[]), 0),
]


@pytest.mark.parametrize("title,rowset,n", CASES, ids=[c[0] for c in CASES])
def test_rows_counted(title, rowset, n):
    assert fetched_rows(reply(rowset)) == n
    assert rowset_rows(rowset) == n


def test_not_a_rowset():
    assert fetched_rows(reply(None)) is None
    assert fetched_rows(reply(None, T.TStatus(statusCode=3, errorMessage="boom"))) is None
    assert fetched_rows(codec.application_exception("FetchResults", 1, "x")) is None
    assert fetched_rows(b"junk") is None
    assert fetched_rows(reply(CASES[0][1])[:40]) is None     # cut short: never raises
