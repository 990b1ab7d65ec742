"""A serving engine that cannot start, end to end: one embedded `serve` whose Python cannot
import numpy (tests/support/engine_down.py), so DuckDB 2.x refuses LocalEngine's Python
UDF as in a fresh venv without numpy. Datamap answers are right (Spark computes them),
and EXPLAIN, the statement log, AUDIT DATAMAP, the log's ERROR line and the metric all
say the engine is unavailable and why. Names are prefixed ed_. (The same without Spark,
plus doctor and the console: tests/proxy/serving/test_serving_engine_down.py.)"""
from __future__ import annotations

import re
import urllib.request

import pytest

from tests.support.e2e import Pair, ServeProc
from tests.support.engine_down import no_numpy_env

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]

NUMPY = "'numpy' is required for this operation, but it wasn't installed"
QUERY = "SELECT k, sum(v) FROM ed_sales GROUP BY k"


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    work = tmp_path_factory.mktemp("engine_down")
    srv = ServeProc(work, work / "state", env={"TZ": "UTC", **no_numpy_env(work)},
                    metrics=True)
    try:
        yield srv
    finally:
        srv.kill()


def test_answers_from_spark_and_everything_says_why(srv):
    p = Pair(srv.port)
    try:
        p.dm.run("CREATE TABLE ed_sales (k STRING, v DECIMAL(10,2)) USING parquet")
        p.dm.run("INSERT INTO ed_sales VALUES ('a', 1.50), ('b', 2.25), ('a', 3.00)")
        p.dm.run("CREATE DATAMAP ed_agg USING 'mv' AS " + QUERY)
        # the datamap answers, through Spark, the same rows as the base tables
        assert [(k, str(v)) for k, v in p.hit(QUERY, "ed_agg")] == [("a", "4.50"),
                                                                    ("b", "2.25")]
        lines = p.explain(QUERY).splitlines()
        assert f"Served by: spark (local engine unavailable: {NUMPY})" in lines, lines
        assert "Result cache: bypassed (not served locally)" in lines, lines
        audit = p.dm.run("AUDIT DATAMAP ed_agg")
    finally:
        p.close()
    # the audit compared the datamap's answer; the in-process one was not checked, which
    # is the engine's problem, not a failed audit of the datamap
    assert [r[3] for r in audit.rows] == ["PASSED"], audit.rows
    _, _, compared, _, rows, detail = audit.rows[0]
    assert compared == "original query on the base tables vs rewritten SQL on Spark"
    assert rows == 2 and detail == (f"2 rows equal; in-process answer not checked: the local "
                                    f"engine is unavailable ({NUMPY})"), detail

    log = srv.log_path.read_text(errors="replace")
    assert re.search(r"served=spark \(local engine unavailable: " + re.escape(NUMPY), log), \
        srv.tail()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "the serving engine (DuckDB 2." in errors[0], errors
    assert f"could not start: {NUMPY}; fix: install numpy" in errors[0]
    assert "Traceback" not in log
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.metrics_port}/metrics",
                                timeout=30) as r:
        metrics = r.read().decode()
    assert re.search(r"^datamap_proxy_serving_engine_up 0\.0$", metrics, re.M)
