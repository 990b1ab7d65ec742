"""A long datamap build tells its client what it is doing, as Spark's Thrift Server does
for queries: CREATE DATAMAP, REBUILD and COMPACT relay their stages (opening the pipeline
session, building a segment from the base segments, publishing it) and Spark's job and
task progress through the operation log, which beeline prints and PyHive's fetch_logs
returns (proxy/datamaps/upkeep/job_progress.py). On the shared embedded `serve`."""
from __future__ import annotations

import re

import pytest

from tests.support.clients import jdbc_url, pyhive_connect, run_beeline
from tests.support.e2e import Conn

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]


@pytest.fixture(scope="module")
def env(shared_serve):
    conn = Conn(shared_serve.port)
    try:
        conn.run("CREATE TABLE bp_sales (region STRING, amount INT) USING parquet")
        conn.run("INSERT INTO bp_sales VALUES ('n', 1), ('s', 2), ('n', 3)")
        yield shared_serve
    finally:
        conn.close()


def _logs(port: int, statement: str) -> list[str]:
    conn = pyhive_connect("127.0.0.1", port)
    try:
        cur = conn.cursor()
        cur.execute(statement)
        return cur.fetch_logs()
    finally:
        conn.close()


def test_create_rebuild_and_compact_report_stages_and_spark_progress(env):
    logs = _logs(env.port, "CREATE DATAMAP bp_agg USING 'mv' AS "
                           "SELECT region, sum(amount) FROM bp_sales GROUP BY region")
    text = "\n".join(logs)
    assert re.search(r"^stage: building datamap default\.bp_agg: segment 0 reads base "
                     r"segment 0 of default\.bp_sales and writes its files$", text, re.M), logs
    assert re.search(r"^Spark job \d+: SUCCEEDED, (\d+)/\1 tasks done", text, re.M), logs
    assert re.search(r"^stage: publishing segment 0 of default\.bp_agg \(2 rows, \d+ files\)$",
                     text, re.M), logs
    assert logs[-1] == "stage: segment 0 of default.bp_agg published", logs

    logs = _logs(env.port, "REBUILD DATAMAP bp_agg")
    assert logs == ["stage: datamap default.bp_agg is in sync with its base tables: "
                    "nothing to build"], logs
    conn = Conn(env.port)
    try:
        conn.run("INSERT INTO bp_sales VALUES ('e', 4)")
    finally:
        conn.close()
    logs = _logs(env.port, "ALTER DATAMAP bp_agg COMPACT 'MAJOR'")
    assert any(line.startswith("stage: compacting datamap default.bp_agg: segment ")
               for line in logs), logs
    assert any(line.startswith("Spark job ") for line in logs), logs


def test_beeline_prints_the_stages_of_a_build(env, tmp_path):
    run = run_beeline(jdbc_url("127.0.0.1", env.port), [
        "CREATE DATAMAP bp_count USING 'mv' AS SELECT region, count(*) FROM bp_sales "
        "GROUP BY region"], workdir=tmp_path, silent=False)
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    assert "stage: building datamap default.bp_count: segment 0 reads " in out, out[-3000:]
    assert "stage: segment 0 of default.bp_count published" in out, out[-3000:]
