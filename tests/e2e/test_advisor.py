"""The datamap advisor end to end on the shared embedded serve: a small star-schema
workload runs through the proxy (recorded in the advisor's workload: the statements this
serve saw; part A's query log takes its place when merged), SHOW DATAMAP SUGGESTIONS and
`datamap-proxy advise` propose one datamap for it (and none for a query grouping by a
unique column), EXPLAIN WHATIF predicts how many of the logged statements it answers, and
after CREATE the same statements are answered from it (EXPLAIN says Hit, the rows equal
Spark's) exactly as often as predicted."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.e2e import Pair, doc_blocks

pytestmark = [pytest.mark.spark, pytest.mark.timeout(400)]

ROOT = Path(__file__).resolve().parents[2]
JOIN = "FROM q17d_sales f JOIN q17d_stores s ON f.store = s.store"
WORKLOAD = [
    f"SELECT s.region, sum(f.amount) AS total {JOIN} WHERE s.city = 'c1' GROUP BY s.region",
    f"SELECT s.region, sum(f.amount) AS total {JOIN} WHERE s.city = 'c4' GROUP BY s.region",
    f"SELECT s.region, sum(f.amount) AS total {JOIN} WHERE s.city = 'c7' GROUP BY s.region",
    f"SELECT s.region, count(*) AS n, avg(f.qty) AS q {JOIN} GROUP BY s.region",
    f"SELECT s.region, count(*) AS n, avg(f.qty) AS q {JOIN} GROUP BY s.region",
]
# every row has its own amount: a datamap by amount would be as big as the table
UNIQUE = "SELECT f.amount, count(*) AS n FROM q17d_sales f GROUP BY f.amount"


@pytest.fixture(scope="module")
def c(shared_serve):
    pair = Pair(shared_serve.port)
    try:
        pair.dm.run("CREATE TABLE q17d_sales (store INT, day DATE, amount DOUBLE, qty INT) "
                    "USING parquet")
        pair.dm.run("INSERT INTO q17d_sales SELECT CAST(id % 10 AS INT), "
                    "date_add(DATE'2024-01-01', CAST(id % 30 AS INT)), id * 1.5, "
                    "CAST(id % 7 AS INT) FROM range(3000)")
        pair.dm.run("CREATE TABLE q17d_stores (store INT, region STRING, city STRING) "
                    "USING parquet")
        pair.dm.run("INSERT INTO q17d_stores SELECT CAST(id AS INT), concat('r', id % 3), "
                    "concat('c', id) FROM range(10)")
        for q in WORKLOAD + [UNIQUE, UNIQUE]:
            pair.dm.run(q)
        yield pair
    finally:
        pair.close()


def ours(rows):
    return [r for r in rows if "q17d_" in r[2]]


def cli(port: int, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "proxy", "advise", "--port", str(port),
                           "--user", "q17d", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env)


def test_suggest_whatif_create_replay(c, shared_serve, tmp_path):
    res = c.dm.run("SHOW DATAMAP SUGGESTIONS")
    assert res.columns == [
        "Kind", "DataMap", "Statement", "Queries", "Base Seconds", "Estimated Saving Seconds",
        "Estimated Rows", "Reason"]
    mine = ours(res.rows)
    assert len(mine) == 1, res.rows           # one datamap answers the whole star workload
    kind, name, create, queries, base_s, saving, est_rows, reason = mine[0]
    assert kind == "create" and queries == len(WORKLOAD), mine
    assert "f.amount" not in create.split(" FROM ")[0].replace("SUM(f.amount)", ""), create
    # sampled statistics (pipeline/stats.py): the tables are under [advisor] sample_rows,
    # so the count is exact: 10 (region, city) pairs
    assert est_rows == 10 and saving > 0 and base_s > 0, mine
    assert f"{queries} queries" in reason

    # the command line shows the same suggestion, and replays a file of CREATEs
    out = cli(shared_serve.port)
    assert out.returncode == 0, out.stderr
    assert create in out.stdout
    whatif_file = tmp_path / "candidates.sql"
    whatif_file.write_text(f"-- the advisor's proposal\n{create};\n")
    out = cli(shared_serve.port, "--what-if", str(whatif_file))
    assert out.returncode == 0, out.stderr
    assert f"WhatIf DataMap: {name}" in out.stdout and f"Hits: {len(WORKLOAD)} " in out.stdout

    plan = c.dm.run(f"EXPLAIN WHATIF {create}").rows[0][0]
    lines = plan.splitlines()
    assert lines[0] == f"WhatIf DataMap: {name}", plan
    hits = int(re.search(r"^Hits: (\d+) ", plan, re.M).group(1))
    gained = int(re.search(r"^Gained: (\d+) ", plan, re.M).group(1))
    assert hits == gained == len(WORKLOAD), plan
    assert any(l.startswith("Example: 2 x ") for l in lines), plan

    c.dm.run(create)
    actual = 0
    for q in WORKLOAD:
        c.hit(q, name)            # EXPLAIN says Hit, and the rows equal Spark's
        actual += 1
    c.miss(UNIQUE)
    assert actual == hits

    # answered now: no longer suggested
    assert ours(c.dm.run("SHOW DATAMAP SUGGESTIONS").rows) == []


def test_bad_input_names_the_cause(c):
    e = c.dm.error("EXPLAIN WHATIF CREATE DATAMAP q17d_bad AS SELECT nope FROM q17d_sales")
    assert e.sqlstate in ("42S02", "42000", "0A000") and "q17d_bad" in e.message, e
    e = c.dm.error("EXPLAIN WHATIF SELECT 1")
    assert e.sqlstate == "42000" and "CREATE DATAMAP" in e.message, e
    e = c.dm.error("EXPLAIN WHATIF CREATE DATAMAP q17d_bad AS SELECT k, count(*) AS n "
                   "FROM q17d_nowhere GROUP BY k")
    assert e.sqlstate == "42S02" and "q17d_nowhere" in e.message, e
    e = c.dm.error("EXPLAIN WHATIF CREATE DATAMAP q17d_bad AS SELECT * FROM q17d_sales")
    assert e.sqlstate == "0A000" and e.message.count("q17d_bad") == 1, e


def test_doc_examples_run(c):
    """docs/advisor.md's sql blocks run as written; a comment names what the answer holds."""
    for block in doc_blocks(ROOT / "docs" / "advisor.md"):
        for stmt, comment in block:
            res = c.dm.run(stmt)
            if stmt.startswith("EXPLAIN WHATIF"):
                assert res.rows[0][0].startswith(comment), (stmt, res.rows)
            elif stmt.startswith("SHOW DATAMAP SUGGESTIONS"):
                assert ", ".join(res.columns) == comment, res.columns
