"""Every Spark type, with NULLs, created, inserted and read back through each real client:
the result (names, types, values) through the proxy must equal Spark's directly."""
from __future__ import annotations

import datetime as dt
from decimal import Decimal

from tests.support.client_matrix import TYPES_COLUMNS, types_select, types_statements
from tests.support.clients import (impyla_connect, impyla_execute, pyhive_connect,
                                   pyhive_execute, run_beeline)

PYHIVE_TYPES = ["TINYINT_TYPE", "SMALLINT_TYPE", "INT_TYPE", "BIGINT_TYPE", "FLOAT_TYPE",
                "DOUBLE_TYPE", "DECIMAL_TYPE", "STRING_TYPE", "BOOLEAN_TYPE", "DATE_TYPE",
                "TIMESTAMP_TYPE", "BINARY_TYPE", "ARRAY_TYPE", "MAP_TYPE", "STRUCT_TYPE"]


def _table(client: str, target) -> str:
    return f"itest.types_{client}_{target.name}"


def test_all_types_pyhive(target, observe, itest_db):
    def run(t):
        conn = pyhive_connect(t.host, t.port, auth=t.pyhive_auth)
        try:
            cur = conn.cursor()
            for stmt in types_statements(_table("pyhive", t)):
                pyhive_execute(cur, stmt)
            res = pyhive_execute(cur, types_select(_table("pyhive", t)))
            cur.close()
            return res
        finally:
            conn.close()

    res = observe("select", run)
    assert res.columns == TYPES_COLUMNS
    assert res.types == PYHIVE_TYPES
    assert len(res.rows) == 3
    first, second, nulls = res.rows
    assert first[:4] == (127, 32767, 2147483647, 9223372036854775807)
    assert first[6] == Decimal("1234567890123456789012345678.0123456789")
    assert first[7] == 'héllo, "world"'
    assert first[10] == dt.datetime(2024, 2, 29, 23, 59, 59, 123456)
    assert first[11] == b"\x00\xff\x10"
    assert second[:4] == (-128, -32768, -2147483648, -9223372036854775808)
    assert second[7] == "" and second[11] == b""
    assert nulls == (None,) * 15


def test_all_types_impyla(target, observe, itest_db):
    def run(t):
        conn = impyla_connect(t.host, t.port, auth=t.impyla_auth)
        try:
            cur = conn.cursor()
            for stmt in types_statements(_table("impyla", t)):
                impyla_execute(cur, stmt, fetch=False)
            res = impyla_execute(cur, types_select(_table("impyla", t)))
            cur.close()
            return res
        finally:
            conn.close()

    res = observe("select", run)
    assert res.columns == TYPES_COLUMNS
    assert len(res.rows) == 3
    assert res.rows[2] == (None,) * 15
    assert res.rows[0][2] == 2147483647
    assert res.types == [t.removesuffix("_TYPE") for t in PYHIVE_TYPES]


def test_all_types_beeline(target, observe, itest_db, itest_dir):
    def run(t):
        table = _table("beeline", t)
        stmts = types_statements(table) + [types_select(table)]
        r = run_beeline(t.jdbc(), stmts, workdir=itest_dir / "beeline")
        assert r.errors == [], r.stderr[-3000:]
        return r.results[-1]

    res = observe("select", run)
    assert res.columns == TYPES_COLUMNS
    assert len(res.rows) == 3
    assert res.rows[2] == ("NULL",) * 15
    assert res.rows[0][7] == 'héllo, "world"'
