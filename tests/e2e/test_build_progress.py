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


def test_add_segment_reports_its_own_spark_step_and_its_datamaps(env):
    """ADD SEGMENT of an external table: mapping the files, indexing them for the table's
    index datamap (a Spark job of its own, with its progress), publishing, then the
    refresh of the mv datamap over it."""
    data = env.root / "bp_ext"
    data.mkdir()
    (data / "a.csv").write_text("".join(f"{i},r{i % 3}\n" for i in range(30)))
    conn = Conn(env.port)
    try:
        conn.run("CREATE TABLE bp_ext (id int, region string) "
                 "TBLPROPERTIES ('format'='csv', 'csv.header'='id,region')")
        conn.run("CREATE DATAMAP bp_ext_mm ON TABLE bp_ext USING 'minmax'")
        conn.run("CREATE DATAMAP bp_ext_agg USING 'mv' AS "
                 "SELECT region, count(*) FROM bp_ext GROUP BY region")
    finally:
        conn.close()
    logs = _logs(env.port, f"ALTER TABLE bp_ext ADD SEGMENT LOCATION '{data}'")
    text = "\n".join(logs)
    assert logs[0] == "stage: adding segment 0 to default.bp_ext: mapping 1 file(s) in place", logs
    assert re.search(r"^stage: indexing segment 0 of default\.bp_ext: reading its 1 file\(s\) "
                     r"for default\.bp_ext_mm\n(.*\n)*Spark job \d+: SUCCEEDED, (\d+)/\2 tasks "
                     r"done.*\n(.*\n)*stage: publishing segment 0 of default\.bp_ext "
                     r"\(30 rows, 1 file\(s\)\)\nstage: segment 0 of default\.bp_ext published$",
                     text, re.M), logs
    assert re.search(r"^stage: segment \d+ of default\.bp_ext_agg published$", text, re.M), logs


def test_show_datamap_in_a_second_session_sees_a_create_from_its_start(env):
    """While a CREATE DATAMAP runs, another session's SHOW DATAMAP shows it and since when,
    before its own catalog row exists as after; once the CREATE is done, as any datamap."""
    import threading
    failed: list[BaseException] = []

    def create():
        c = Conn(env.port)
        try:
            c.run("CREATE DATAMAP bp_seen USING 'mv' AS "
                  "SELECT region, max(amount) FROM bp_sales GROUP BY region")
        except BaseException as e:  # noqa: BLE001 - reported by the test
            failed.append(e)
        finally:
            c.close()
    worker = threading.Thread(target=create, name="bp-create")
    watcher = Conn(env.port)
    try:
        worker.start()
        seen = []
        while worker.is_alive():
            seen += [r for r in watcher.run("SHOW DATAMAP ON TABLE bp_sales").rows
                     if r[0] == "bp_seen"]
        worker.join()
        assert not failed, failed
        # the last polls may come after its commit, while the client is still closing
        running = [r for r in seen if r[4] == "DISABLED"]
        assert running, f"SHOW DATAMAP never showed the running CREATE: {seen}"
        assert all(re.match(r"being created since \d{4}-\d\d-\d\d [\d:.]+ \(\d+ s\)", r[9])
                   for r in running), running
        assert running[0][1:3] == ("mv", "default.bp_seen_table"), running
        # before its catalog row exists, then with it (not built yet, its segment written)
        assert {r[6] for r in running} <= {"CREATE DATAMAP has not finished", "not built yet"}
        done, = [r for r in watcher.run("SHOW DATAMAP").rows if r[0] == "bp_seen"]
        assert done[4] == "ENABLED" and done[9] == "", done
    finally:
        watcher.close()
