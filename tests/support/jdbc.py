"""Hive JDBC (the driver beeline and DBeaver use) from Python through JayDeBeApi + JPype,
run in a child process: a JVM can start only once per process and keeps its classpath,
so the test process stays free of one.

    run_jdbc([(url, user, password, sql), ...]) -> [{"rows": [...]} | {"error": "..."}]
"""
from __future__ import annotations

import json
import subprocess
import sys

from tests.support.sts import spark_home

_CHILD = r"""
import glob, json, sys
import jaydebeapi
jars = sorted(glob.glob(sys.argv[1] + "/jars/*.jar"))
out = []
for url, user, password, sql in json.loads(sys.stdin.read()):
    try:
        conn = jaydebeapi.connect("org.apache.hive.jdbc.HiveDriver", url, [user, password], jars)
        try:
            cur = conn.cursor()
            cur.execute(sql)
            out.append({"rows": [[None if v is None else str(v) for v in r] for r in cur.fetchall()]})
            cur.close()
        finally:
            conn.close()
    except Exception as e:
        out.append({"error": f"{type(e).__name__}: {e}"})
print("JDBC-RESULT " + json.dumps(out))
"""


def run_jdbc(calls: list[tuple[str, str, str, str]], timeout: float = 180.0) -> list[dict]:
    """Each (url, user, password, sql) on a connection of its own, in one JVM."""
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(spark_home())],
                          input=json.dumps(calls), capture_output=True, text=True,
                          timeout=timeout)
    for line in proc.stdout.splitlines():
        if line.startswith("JDBC-RESULT "):
            return json.loads(line[len("JDBC-RESULT "):])
    raise RuntimeError(f"the JDBC child failed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
