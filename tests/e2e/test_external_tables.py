"""External-format tables (docs/external.md) through the shared embedded `serve`
(tests/e2e/conftest.py, no Spark of its own) with PyHive: create, three ADD SEGMENTs
(plain CSV directory, gzip files, one bzip2 file) whose answers equal Spark's over a plain
`USING csv` table of the same files, SHOW SEGMENTS, segment selection, DELETE SEGMENT by
id and by date, COMPACT, every blocked statement, RENAME, DROP COLUMNS, CHANGE type, DESC
and DROP TABLE, the original files untouched throughout."""
from __future__ import annotations

import bz2
import gzip
import hashlib
from pathlib import Path

import pytest

from tests.support.e2e import Conn, sort_rows

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

HEADER = "day|id|extra|name|amount"
CREATE = ("CREATE TABLE ext_sales (id bigint, name string, amount double, day date) "
          "STORED AS carbondata TBLPROPERTIES ('format'='csv', 'csv.delimiter'='|', "
          "'csv.header'='day,id,extra,name,amount', 'csv.skip_header'='true')")
FIELDS = "id, name, amount, day"


def _lines(start: int, n: int) -> str:
    rows = [HEADER] + [f"2024-01-{1 + i % 28:02d}|{i}|x{i}|n{i % 7}|{i * 1.5}"
                       for i in range(start, start + n)]
    return "\n".join(rows) + "\n"


@pytest.fixture(scope="module")
def data(shared_serve):
    root = shared_serve.root / "ext_data"
    plain, gz, bz = root / "plain", root / "gz", root / "bz"
    for d in (plain / "sub", gz, bz):
        d.mkdir(parents=True)
    (plain / "a.csv").write_text(_lines(0, 40))
    (plain / "sub" / "b.csv").write_text(_lines(40, 40))
    (plain / "_hidden.csv").write_text("not|data\n")
    for i in range(2):
        with gzip.open(gz / f"g{i}.csv.gz", "wt") as f:
            f.write(_lines(100 + 30 * i, 30))
    with bz2.open(bz / "c.csv.bz2", "wt") as f:
        f.write(_lines(200, 25))
    later = root.parent / "ext_later"       # outside the plain table's directory
    later.mkdir()
    (later / "d.csv").write_text(_lines(300, 10))
    return root


def _digest(root: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def conn(shared_serve, data):
    c = Conn(shared_serve.port)
    yield c
    c.close()


def _spark_rows(port: int, sql: str):
    c = Conn(port, rewrite=False)        # a new session: no cached file list
    try:
        return c.rows(sql)
    finally:
        c.close()


def test_create_add_segments_and_query_like_plain_csv(shared_serve, conn, data):
    before = _digest(data)
    conn.run(CREATE)
    conn.run(CREATE.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
    assert conn.rows(f"SELECT {FIELDS} FROM ext_sales") == []
    seg = conn.run(f"ALTER TABLE ext_sales ADD SEGMENT LOCATION '{data / 'plain'}'").rows
    assert seg == [("0",)]
    conn.run(f"ALTER TABLE ext_sales ADD SEGMENT LOCATION "
             f"'file://{data / 'gz' / 'g0.csv.gz'},{data / 'gz' / 'g1.csv.gz'}'")
    conn.run(f"ALTER TABLE ext_sales ADD SEGMENT OPTIONS ('path'='{data / 'bz'}')")
    conn.run(f"CREATE TABLE ext_plain (day date, id bigint, extra string, name string, "
             f"amount double) USING csv OPTIONS (sep '|', header 'true', "
             f"recursiveFileLookup 'true', pathGlobFilter '*.csv*') LOCATION '{data}'")
    for sql in ("SELECT {} FROM {}", "SELECT name, count(*), sum(amount) FROM {1} GROUP BY name",
                "SELECT {0} FROM {1} WHERE id BETWEEN 30 AND 110"):
        got = conn.rows(sql.format(FIELDS, "ext_sales"))
        assert got == _spark_rows(shared_serve.port, sql.format(FIELDS, "ext_plain")), sql
    assert len(conn.rows("SELECT * FROM ext_sales")) == 80 + 60 + 25
    # a fresh session sees all of it too (Spark directly, not through the proxy's rewrite)
    assert len(_spark_rows(shared_serve.port, "SELECT id FROM ext_sales")) == 165
    assert _digest(data) == before


def test_show_segments_and_refused_paths(conn, data):
    rows = conn.run("SHOW SEGMENTS FOR TABLE ext_sales").rows
    assert [r[0] for r in rows] == ["2", "1", "0"]
    assert [r[1] for r in rows] == ["Success"] * 3
    assert [(r[7], r[9]) for r in rows] == [("csv", 1), ("csv", 2), ("csv", 2)]
    assert rows[2][8] == str(data / "plain") and rows[2][10] > 0
    for paths, words in [(f"{data / 'plain' / 'a.csv'}", "already mapped by segment 0"),
                         (f"{data / 'gz'},{data / 'gz'}", "given twice"),
                         (f"{data / 'bz'},{data}", "overlap"),
                         (f"{data / 'nowhere'}", "does not exist"),
                         ("relative/path", "not absolute")]:
        e = conn.error(f"ALTER TABLE ext_sales ADD SEGMENT LOCATION '{paths}'")
        assert e.sqlstate == "42000" and words in e.message, e.message
    empty = data / "empty"
    empty.mkdir()
    (empty / ".x").write_text("hidden\n")
    e = conn.error(f"ALTER TABLE ext_sales ADD SEGMENT LOCATION '{empty}'")
    assert "holds no data file" in e.message and str(empty) in e.message


def test_segment_selection(conn):
    conn.run("SET carbon.input.segments.default.ext_sales = 0,2")
    assert len(conn.rows("SELECT s.id FROM ext_sales s WHERE s.amount >= 0")) == 80 + 25
    conn.run("SET carbon.input.segments.default.ext_sales = 1")
    assert conn.rows("SELECT min(id), max(id) FROM ext_sales") == [(100, 159)]
    e = conn.error("SET carbon.input.segments.default.ext_sales = 7")
    assert e.sqlstate == "42000" and "7" in e.message
    conn.run("SET carbon.input.segments.default.ext_sales = *")
    assert len(conn.rows("SELECT id FROM ext_sales")) == 165


AGG = "SELECT name, sum(amount) AS total, count(*) AS n FROM ext_sales GROUP BY name"


def test_a_datamap_follows_segments_but_never_answers_a_selection(shared_serve, conn, data):
    conn.run(f"CREATE DATAMAP ext_agg USING 'mv' AS {AGG}")
    plan = conn.run(f"EXPLAIN {AGG}").rows[0][0]
    assert "Hit mv DataMap: ext_agg" in plan, plan[:1500]
    assert conn.rows(AGG) == _spark_rows(shared_serve.port, AGG.replace("ext_sales", "ext_plain"))
    conn.run("SET carbon.input.segments.default.ext_sales = 0")
    assert sum(r[2] for r in conn.rows(AGG)) == 80
    plan = conn.run(f"EXPLAIN {AGG}").rows[0][0]
    assert "No datamap hit" in plan and "Segment selection: default.ext_sales segments 0" \
        in plan and "_metadata.file_path IN" in plan, plan[:1500]
    conn.run("SET carbon.input.segments.default.ext_sales = *")
    assert sum(r[2] for r in conn.rows(AGG)) == 165
    other = Conn(shared_serve.port, rewrite=False)     # listed the table before the ADD
    assert len(other.rows("SELECT id FROM ext_sales")) == 165
    segments = len(conn.run("SHOW SEGMENTS FOR TABLE ext_agg_table").rows)
    conn.run(f"ALTER TABLE ext_sales ADD SEGMENT LOCATION '{data.parent / 'ext_later'}'")
    assert len(other.rows("SELECT id FROM ext_sales")) == 175
    other.close()
    # refreshed from the new files: one more datamap segment, none rebuilt
    mv = conn.run("SHOW SEGMENTS FOR TABLE ext_agg_table").rows
    assert len(mv) == segments + 1 and [r[1] for r in mv].count("Success") == segments + 1, mv
    plan = conn.run(f"EXPLAIN {AGG}").rows[0][0]
    assert "Hit mv DataMap: ext_agg" in plan, plan[:1500]
    assert sum(r[2] for r in conn.rows(AGG)) == 165 + 10
    conn.run("DELETE FROM TABLE ext_sales WHERE SEGMENT.ID IN (3)")
    assert sum(r[2] for r in conn.rows(AGG)) == 165
    conn.run("DROP DATAMAP ext_agg")


@pytest.mark.parametrize("sql,what", [
    ("INSERT INTO ext_sales VALUES (1, 'a', 1.0, DATE'2024-01-01')", "INSERT"),
    ("INSERT OVERWRITE TABLE ext_sales SELECT * FROM ext_sales", "INSERT"),
    ("LOAD DATA LOCAL INPATH '/tmp/x.csv' INTO TABLE ext_sales", "LOAD DATA"),
    ("CREATE OR REPLACE TABLE ext_sales AS SELECT 1 AS id", "CTAS"),
    ("CREATE TABLE ext_ctas TBLPROPERTIES ('format'='csv') AS SELECT 1 AS id", "CTAS"),
    ("UPDATE ext_sales SET amount = 0", "UPDATE"),
    ("DELETE FROM ext_sales WHERE id = 1", "DELETE"),
    ("MERGE INTO ext_sales USING ext_plain ON ext_sales.id = ext_plain.id "
     "WHEN MATCHED THEN DELETE", "MERGE"),
    ("TRUNCATE TABLE ext_sales", "TRUNCATE"),
    ("ALTER TABLE ext_sales ADD COLUMNS (z int)", "ADD COLUMNS"),
    ("ALTER TABLE ext_sales ADD PARTITION (day='2024-01-01')", "ADD PARTITION"),
    ("ALTER TABLE ext_sales DROP PARTITION (day='2024-01-01')", "DROP PARTITION"),
    ("ALTER TABLE ext_sales SET TBLPROPERTIES ('owner'='me')", "owner"),
    ("ALTER TABLE ext_sales UNSET TBLPROPERTIES ('format')", "format"),
    ("CREATE TABLE ext_bad (id int) PARTITIONED BY (id) TBLPROPERTIES ('format'='csv')",
     "PARTITIONED"),
])
def test_blocked_statements(conn, sql, what):
    e = conn.error(sql)
    assert e.sqlstate == "0A000" and what in e.message, e.message
    assert "ext_" in e.message


def test_bad_create_statements(conn):
    e = conn.error("CREATE TABLE ext_bad (id int) TBLPROPERTIES ('format'='csv', 'sort'='x')")
    assert e.sqlstate == "42000" and "'sort'" in e.message
    e = conn.error("CREATE TABLE ext_bad (id int, v int) TBLPROPERTIES ('format'='csv', "
                   "'csv.header'='id,w')")
    assert e.sqlstate == "42000" and "field(s) v" in e.message


def test_delete_segments_by_id_and_date_keep_files(shared_serve, conn, data):
    before = _digest(data)
    conn.run("DELETE FROM TABLE ext_sales WHERE SEGMENT.ID IN (1)")
    assert len(conn.rows("SELECT id FROM ext_sales")) == 80 + 25
    assert len(_spark_rows(shared_serve.port, "SELECT id FROM ext_sales")) == 105
    status = {r[0]: r[1] for r in conn.run("SHOW SEGMENTS FOR TABLE ext_sales").rows}
    assert status == {"0": "Success", "1": "Marked for Delete", "2": "Success",
                      "3": "Marked for Delete"}
    e = conn.error("DELETE FROM TABLE ext_sales WHERE SEGMENT.ID IN (1)")
    assert e.sqlstate == "42000" and "1 (Marked for Delete)" in e.message
    # the file of a deleted segment may be mapped again
    conn.run(f"ALTER TABLE ext_sales ADD SEGMENT LOCATION '{data / 'gz'}'")
    conn.run("ALTER TABLE ext_sales COMPACT 'MAJOR'")
    rows = conn.run("SHOW SEGMENTS FOR TABLE ext_sales").rows
    assert rows[0][0] == "5" and rows[0][9] == 2 + 1 + 2
    assert {r[0]: r[11] for r in rows if r[1] == "Compacted"} == {"0": "5", "2": "5", "4": "5"}
    assert len(conn.rows("SELECT id FROM ext_sales")) == 165
    conn.run("DELETE FROM TABLE ext_sales WHERE SEGMENT.STARTTIME BEFORE '2999-01-01 00:00:00'")
    assert conn.rows("SELECT id FROM ext_sales") == []
    assert _digest(data) == before


def test_rename_drop_columns_change_type_desc_and_drop(shared_serve, conn, data):
    before = _digest(data)
    conn.run(f"ALTER TABLE ext_sales ADD SEGMENT LOCATION '{data / 'plain'}'")
    conn.run("ALTER TABLE ext_sales RENAME TO ext_sales2")
    assert len(conn.rows("SELECT id FROM ext_sales2")) == 80
    assert conn.run("SHOW SEGMENTS FOR TABLE ext_sales2").rows[0][0] == "6"
    conn.run("ALTER TABLE ext_sales2 DROP COLUMNS (name)")
    assert [c.rpartition(".")[2] for c in conn.run("SELECT * FROM ext_sales2 LIMIT 1").columns] \
        == ["id", "amount", "day"]
    conn.run("ALTER TABLE ext_sales2 CHANGE COLUMN amount amount string")
    assert sort_rows(conn.rows("SELECT amount FROM ext_sales2 WHERE id = 3")) == [("4.5",)]
    desc = {r[0]: r[1] for r in conn.run("DESC FORMATTED ext_sales2").rows}
    assert desc["amount"] == "string" and desc["Format"] == "csv"
    assert desc["csv.delimiter"] == "|" and desc["Files"] == "2"
    conn.run("DROP TABLE ext_sales2")
    e = conn.error("SELECT * FROM ext_sales2")
    assert "ext_sales2" in e.message
    assert not list((shared_serve.state / "external" / "default").glob("ext_sales*"))
    assert _digest(data) == before
