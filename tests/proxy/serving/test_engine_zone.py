"""The local engine computes on instants as UTC times whatever zone the machine is in: a
proxy started with TZ=America/Los_Angeles must print a Los Angeles datamap bucket as Spark
does. Each worker runs on a cursor of its own (a DuckDB connection), which a session-scoped
SET would have left in the machine's zone."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from tests.support.proxy_proc import REPO_ROOT

SCRIPT = textwrap.dedent("""
    import datetime, sqlglot
    from proxy.serving.engine import LocalEngine
    from proxy.serving.translate import translate
    import duckdb
    path = {path!r}
    duckdb.sql("COPY (SELECT TIMESTAMP '2025-12-31 08:00:00' AS d) TO '" + path + "'")
    plan = translate(sqlglot.parse_one(
        "SELECT m.d AS d FROM (SELECT d FROM db.dm_table WHERE dm_segment_id IN ('0')) AS m",
        read="spark"), {{"db.dm_table": {{"d": "timestamp"}}}}, lambda t, ids: [path],
        "America/Los_Angeles")
    engine = LocalEngine(2, "256MB", 2)
    try:
        print(repr(engine.run_blocking(plan)))
    finally:
        engine.close()
""")


def test_served_timestamps_do_not_depend_on_the_machines_zone(tmp_path):
    script = SCRIPT.format(path=str(tmp_path / "d.parquet"))
    env = {**os.environ, "TZ": "America/Los_Angeles", "PYTHONPATH": str(REPO_ROOT)}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    # the instant 08:00 UTC is midnight in Los Angeles, as Spark prints it there
    assert out.stdout.strip() == "[(datetime.datetime(2025, 12, 31, 0, 0),)]", out.stdout
