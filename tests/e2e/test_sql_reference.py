"""docs/sql.md and the README's SQL run as written through the shared embedded `serve`
(tests/e2e/conftest.py), one session each, statement by statement: every statement
succeeds, and each entry's own statements return exactly the output columns (names and
types) of the entry's table. On the way, what a user saw: the proxy's DDL answers look
like Spark's (one `Result` column, no rows; beeline prints Spark's box), and SHOW SEGMENTS
of a base table shows each load's rows and time."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support.clients import BEELINE_JVM_OPTS, beeline
from tests.support.e2e import Conn
from tests.support.sqldoc import ROOT, SQL_DOC, walk
from tests.support.sts import spark_env

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

DOC_CSV_DIR = "/tmp/ref_cdr"        # where docs/sql.md's CSV example expects its files
# PyHive's type names for the Spark types the entries' tables use
_TYPES = {"string": "STRING_TYPE", "bigint": "BIGINT_TYPE", "int": "INT_TYPE", "double": "DOUBLE_TYPE"}


def _csv_files(root: Path) -> Path:
    for day, ids in (("day1", (1, 2)), ("day2", (3,))):
        (root / day).mkdir(parents=True)
        rows = "".join(f"2024-05-0{day[-1]}|{i}|{60 * i}\n" for i in ids)
        (root / day / "calls.csv").write_text("day|id|seconds\n" + rows)
    return root


def _base_segments(rows) -> dict[str, tuple]:
    return {r[0]: (r[3], r[4]) for r in rows}


def test_every_example_of_the_sql_reference_runs_and_returns_its_columns(shared_serve,
                                                                         tmp_path):
    text = SQL_DOC.read_text().replace(DOC_CSV_DIR, str(_csv_files(tmp_path / "cdr")))
    conn = Conn(shared_serve.port)
    checked = 0
    try:
        for entry, statements in walk(text):
            for stmt, comment in statements:
                try:
                    got = conn.run(stmt)
                except Exception as e:
                    raise AssertionError(f"docs/sql.md: {stmt!r} failed: {e}") from None
                if entry is None or not entry.owns(stmt):
                    continue
                want = [(name, _TYPES[t]) for name, t in entry.columns]
                assert list(zip(got.columns, got.types)) == want, (entry.heading, stmt)
                checked += 1
                if stmt == "SHOW SEGMENTS FOR TABLE ref_sales":
                    # segment 0: the two rows found at CREATE DATAMAP (no load time);
                    # segment 1: the INSERT of one row through the proxy, timed
                    segs = _base_segments(got.rows)
                    assert segs["0"] == ("NA", 2), got.rows
                    taken, rows = segs["1"]
                    assert rows == 1 and re.fullmatch(r"\d+\.\d{3}s", taken), got.rows
                    assert taken != "0.000s", got.rows
                if entry.columns == [("Result", "string")]:
                    assert got.rows == [], stmt
    finally:
        conn.close()
    assert checked >= 30


def test_the_readme_sql_runs_as_written(shared_serve):
    """Its tables renamed (`sales` -> `e17r_sales`, ...) so that other modules' tables on
    the shared server are untouched; otherwise as written."""
    readme = (ROOT / "README.md").read_text()
    statements = [s for e, block in walk(readme) for s in block]
    assert statements, "README.md has no ```sql block"
    conn = Conn(shared_serve.port)
    try:
        for stmt, _ in statements:
            sql = re.sub(r"\b(agg_sales|sales)\b", r"e17r_\1", stmt)
            try:
                conn.run(sql)
            except Exception as e:
                raise AssertionError(f"README.md: {stmt!r} failed: {e}") from None
    finally:
        conn.close()


def test_beeline_prints_the_proxys_ddl_answer_as_it_prints_sparks(shared_serve, tmp_path):
    """Spark's Thrift Server answers CREATE/DROP TABLE with a `Result` column and no rows,
    which beeline prints as a one-column box and `No rows selected`; with zero columns it
    drew an empty box (`++`)."""
    url = f"jdbc:hive2://127.0.0.1:{shared_serve.port}/default"
    env = spark_env()
    env["JAVA_TOOL_OPTIONS"] = BEELINE_JVM_OPTS
    proc = subprocess.run(
        [str(beeline()), "-u", url, "-n", "me", "-p", "x", "-e",
         "CREATE TABLE e17_bl (a INT) USING parquet; "
         "CREATE DATAMAP e17_bl_dm AS SELECT a, count(*) AS n FROM e17_bl GROUP BY a; "
         "DROP DATAMAP e17_bl_dm; DROP TABLE e17_bl;"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180,
        stdin=subprocess.DEVNULL)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    boxes = re.findall(r"^\+-+\+\n\| +Result +\|\n\+-+\+\n\+-+\+$", proc.stdout, re.M)
    assert len(boxes) == 4, out[-3000:]        # Spark's two and the proxy's two alike
    assert out.count("No rows selected") == 4, out[-3000:]
    assert "++" not in proc.stdout.replace("+-", ""), out[-3000:]
