"""proxy/external/grammar.py and alter.py: the SQL of external-format tables, and the
errors that name the cause (no Spark)."""
from __future__ import annotations

from datetime import datetime

import pytest

from proxy.external import alter, grammar
from proxy.routing.sqlscan import StatementError

CREATE = ("CREATE TABLE {ine}db1.t (id BIGINT, name string COMMENT 'who', amt decimal(10, 2)) "
          "{stored} TBLPROPERTIES ('format'='csv', 'csv.delimiter'='|', "
          "'csv.header'='x,id,name,amt', 'csv.skip_header'='true')")


@pytest.mark.parametrize("stored", ["", "STORED AS carbondata", "STORED BY 'carbondata'"])
def test_create_parses_fields_header_and_spark_options(stored):
    c = grammar.parse_create(CREATE.format(ine="", stored=stored), "default")
    assert c.table == "db1.t" and not c.if_not_exists
    assert c.fields == (("id", "bigint"), ("name", "string"), ("amt", "decimal(10,2)"))
    assert c.header == ("x", "id", "name", "amt")
    assert c.options() == {"sep": "|", "header": "true", "recursiveFileLookup": "true"}


def test_hives_external_word_is_accepted():
    c = grammar.parse_create("CREATE EXTERNAL TABLE t (id int) TBLPROPERTIES ('format'='csv')")
    assert c.table == "default.t" and c.header == ("id",)


def test_if_not_exists_and_current_db():
    c = grammar.parse_create(CREATE.format(ine="IF NOT EXISTS ", stored="").replace("db1.", ""),
                             "sales")
    assert c.if_not_exists and c.table == "sales.t"


@pytest.mark.parametrize("sql", [
    "CREATE TABLE t (id int) USING parquet",
    "CREATE TABLE t (id int) TBLPROPERTIES ('owner'='me')",
    "SELECT 'format' FROM t",
])
def test_without_format_it_is_sparks(sql):
    assert grammar.parse_create(sql) is None


@pytest.mark.parametrize("props,state,words", [
    ("'format'='csv', 'sort_columns'='id'", "42000", "'sort_columns' is not allowed"),
    ("'format'='csv', 'csv.bogus'='1'", "42000", "unknown property 'csv.bogus'"),
    ("'format'='parquet'", "0A000", "only 'csv'"),
    ("'format'='csv', 'csv.header'='id'", "42000", "field(s) v"),
    ("'format'='csv', 'csv.header'='id,v,id'", "42000", "names id twice"),
    ("'format'='csv', 'csv.quote'='ab'", "42000", "one character"),
    ("'format'='csv', 'csv.skip_header'='yes'", "42000", "true or false"),
])
def test_bad_properties_name_the_key(props, state, words):
    with pytest.raises(StatementError) as e:
        grammar.parse_create(f"CREATE TABLE t (id int, v string) TBLPROPERTIES ({props})")
    assert e.value.sqlstate == state and words in e.value.message and "default.t" in e.value.message


@pytest.mark.parametrize("tail,words", [
    ("PARTITIONED BY (v) TBLPROPERTIES ('format'='csv')", "PARTITIONED"),
    ("CLUSTERED BY (v) INTO 4 BUCKETS TBLPROPERTIES ('format'='csv')", "CLUSTERED"),
    ("TBLPROPERTIES ('format'='csv') AS SELECT 1", "CTAS"),
    ("LOCATION '/x' TBLPROPERTIES ('format'='csv')", "LOCATION"),
])
def test_unsupported_clauses(tail, words):
    with pytest.raises(StatementError) as e:
        grammar.parse_create(f"CREATE TABLE t (id int, v string) {tail}")
    assert e.value.sqlstate == "0A000" and words in e.value.message


def test_complex_types_and_other_storage_are_refused():
    with pytest.raises(StatementError) as e:
        grammar.parse_create("CREATE TABLE t (a array<int>) TBLPROPERTIES ('format'='csv')")
    assert e.value.sqlstate == "0A000" and "field a" in e.value.message
    with pytest.raises(StatementError) as e:
        grammar.parse_create("CREATE TABLE t (a int) STORED AS parquet "
                             "TBLPROPERTIES ('format'='csv')")
    assert e.value.sqlstate == "42000" and "STORED parquet" in e.value.message


def test_add_segment_location_and_options():
    a = grammar.parse_alter("ALTER TABLE t ADD SEGMENT LOCATION '/a, file:///b'", "d")
    assert a == grammar.AddSegment("d.t", ("/a", "file:///b"))
    a = grammar.parse_alter("alter table x.t add segment options ('path'='/a', 'format'='csv')")
    assert a == grammar.AddSegment("x.t", ("/a",))
    assert grammar.parse_alter("ALTER TABLE t ADD COLUMNS (x int)") is None
    with pytest.raises(StatementError) as e:
        grammar.parse_alter("ALTER TABLE t ADD SEGMENT LOCATION '/a,,/b'")
    assert "empty path" in e.value.message
    assert grammar.parse_alter("ALTER TABLE t COMPACT 'major'") == grammar.Compact("default.t",
                                                                                 "major")
    assert grammar.parse_alter("ALTER TABLE t COMPACT 'CUSTOM' WHERE SEGMENT.ID IN (3, 1, 3)") \
        == grammar.Compact("default.t", "custom", (3, 1))
    assert grammar.parse_alter("ALTER TABLE t COMPACT 'SEGMENT_INDEX'") is None   # not ours
    with pytest.raises(StatementError) as e:
        grammar.parse_alter("ALTER TABLE t COMPACT 'custom'")
    assert "WHERE SEGMENT.ID IN" in e.value.message and e.value.sqlstate == "42000"


def test_delete_segments_by_id_and_by_time():
    d = grammar.parse_delete_segments("DELETE FROM TABLE t WHERE SEGMENT.ID IN (0, 2, 2)")
    assert d == grammar.DeleteSegments("default.t", (0, 2))
    d = grammar.parse_delete_segments(
        "delete from table db.t where segment.starttime before '2024-03-01 10:00:00'")
    assert d.table == "db.t" and d.before == datetime(2024, 3, 1, 10)
    assert grammar.parse_delete_segments("DELETE FROM t WHERE id = 1") is None
    with pytest.raises(StatementError) as e:
        grammar.parse_delete_segments("DELETE FROM TABLE t WHERE SEGMENT.STARTTIME BEFORE 'x'")
    assert "yyyy-MM-dd HH:mm:ss" in e.value.message


def test_segment_selection_keys():
    assert grammar.segment_selection("carbon.input.segments.db.t", "1, 3", "x") == \
        ("db.t", (1, 3))
    assert grammar.segment_selection("carbon.input.segments.t", "*", "x") == ("x.t", None)
    with pytest.raises(StatementError):
        grammar.segment_selection("carbon.input.segments.db.t", "a,b", "x")


@pytest.mark.parametrize("clause,want", [
    ("DROP COLUMNS (a, b)", alter.DropColumns(("a", "b"))),
    ("DROP COLUMN a", alter.DropColumns(("a",))),
    ("CHANGE COLUMN a a bigint", alter.ChangeColumn("a", "a", "bigint")),
    ("CHANGE a b decimal(5,1)", alter.ChangeColumn("a", "b", "decimal(5,1)")),
    ("ALTER COLUMN a TYPE double", alter.ChangeColumn("a", "a", "double")),
    ("SET TBLPROPERTIES ('csv.delimiter'=';')", alter.SetProperties({"csv.delimiter": ";"})),
    ("UNSET TBLPROPERTIES ('csv.quote')", alter.SetProperties({"csv.quote": ""}, unset=True)),
    ("ADD COLUMNS (z int)", alter.Blocked("ADD COLUMNS")),
    ("ADD PARTITION (p=1)", alter.Blocked("ADD PARTITION")),
    ("DROP PARTITION (p=1)", alter.Blocked("DROP PARTITION")),
    ("SET LOCATION '/x'", alter.Blocked("SET LOCATION")),
    ("REPLACE COLUMNS (a int)", alter.Blocked("REPLACE")),
])
def test_alter_clauses(clause, want):
    assert alter.parse(f"ALTER TABLE t {clause}", "default.t", "default") == want
