"""What a user saw of the proxy's answers, checked without Spark: the shape of the proxy's
DDL answers and what SHOW SEGMENTS shows of a base table's load. Their Spark side is
tests/e2e/test_sql_reference.py."""
from __future__ import annotations

from proxy.datamaps.catalog.records import BaseSegment
from proxy.datamaps.ddl.commands import EMPTY
from proxy.datamaps.ddl.show import base_segment_row
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.thrift.rowsets import table_schema


def test_ddl_answers_have_sparks_single_result_column():
    """Spark's Thrift Server answers CREATE/DROP TABLE with one STRING column `Result` and
    no rows (checked against Spark 4's server with PyHive and beeline); zero columns made
    beeline draw an empty box."""
    schema = table_schema(EMPTY.columns, T.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10)
    assert [c.columnName for c in schema.columns] == ["Result"]
    assert schema.columns[0].typeDesc.types[0].primitiveEntry.type == T.TTypeId.STRING_TYPE
    assert list(EMPTY.rows) == []


def _seg(source: str, rows, seconds: float) -> BaseSegment:
    return BaseSegment("db.t", "3", ("f1", "f2"), rows, 1_700_000_000.0, seconds, source,
                       "SUCCESS")


def test_base_segment_row_shows_rows_and_load_time():
    row = base_segment_row(_seg("proxy-load", 42, 1.25))
    assert row[3:6] == ("1.250s", 42, 2)


def test_base_segment_row_says_na_for_an_unknown_load_time():
    """Files found by a listing were not loaded through the proxy: no time, not 0.000s."""
    assert base_segment_row(_seg("discovered", 7, 0.0))[3] == "NA"
    assert base_segment_row(_seg("proxy-load", None, 0.0))[3:5] == ("NA", None)


def test_a_segments_rows_come_from_its_parquet_footers(tmp_path):
    import duckdb
    from proxy.datamaps.upkeep.segment_rows import parquet_rows
    con = duckdb.connect()
    for name, n in (("a b.parquet", 3), ("c.parquet", 5)):
        con.execute(f"COPY (SELECT range AS v FROM range({n})) TO '{tmp_path / name}' "
                    "(FORMAT parquet)")
    (tmp_path / "t.csv").write_text("v\n1\n")
    uri = (tmp_path / "a b.parquet").as_uri().replace("file://", "file:")   # catalog spelling
    assert parquet_rows([uri, str(tmp_path / "c.parquet")]) == 8
    assert parquet_rows([str(tmp_path / "t.csv")]) is None            # not Parquet: NULL
    assert parquet_rows(["hdfs://nn/w/t/part-0.parquet"]) is None      # not local
    assert parquet_rows([str(tmp_path / "p=[x]" / "f.parquet")]) is None   # a glob to DuckDB
    assert parquet_rows([]) is None
