"""docs/bi-tools.md's example runs as written through the shared embedded `serve`
(tests/e2e/conftest.py): Superset's month grain, as its Hive engine spec writes it and as
its `date_trunc` grains do, hits the month datamap and returns Spark's rows; a week grain
over it is forwarded. The Superset facts of docs/clients.md hold on the same server: the
table list it reads, the week grain Spark refuses, the `date_trunc` grains it documents."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.support.e2e import Pair, doc_blocks

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

DOCS = Path(__file__).resolve().parents[2] / "docs"
DOC = DOCS / "bi-tools.md"

# Superset 6.1.0, superset/db_engine_specs/hive.py, TimeGrain.WEEK: what every hive://
# database sends for the Week grain (docs/clients.md)
HIVE_WEEK = ("date_format(date_sub({col}, CAST(7-from_unixtime(unix_timestamp({col}),'u') "
             "as int)), 'yyyy-MM-dd 00:00:00')")


def _documented_grains() -> dict[str, str]:
    """The TIME_GRAIN_ADDON_EXPRESSIONS["hive"] that docs/clients.md tells Superset to use."""
    text = (DOCS / "clients.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S)
                 if "TIME_GRAIN_ADDON_EXPRESSIONS" in b)
    return ast.literal_eval(block.split("=", 1)[1].strip())["hive"]


def test_the_documented_example_runs_as_written(shared_serve):
    c = Pair(shared_serve.port)
    try:
        explained = []
        for stmt, comment in doc_blocks(DOC)[0]:
            comment = comment.strip()
            if not stmt.startswith("EXPLAIN "):
                c.dm.run(stmt)
                continue
            query = stmt[len("EXPLAIN "):]
            if "Hit mv DataMap:" in comment:
                c.hit(query, comment.split("Hit mv DataMap:")[1].split()[0])
            else:
                assert comment.startswith("No datamap hit"), comment
                c.miss(query)
            explained.append(query)
        assert len(explained) == 3
        # the page says both hits are computed in-process (the shared serve runs in UTC)
        for query in explained[:2]:
            served = [l for l in c.explain(query).splitlines() if l.startswith("Served by:")]
            assert served and served[0].startswith("Served by: local engine"), served

        # the table list every tool reads: the view and its storage next to the table
        shown = c.dm.run("SHOW TABLES")
        assert shown.columns == ["namespace", "tableName", "isTemporary"]
        names = {r[1] for r in shown.rows}
        assert {"shipments", "ship_month_table", "ship_month_table_segments"} <= names
        assert "ship_month_table" in {r[1] for r in c.dm.run("SHOW VIEWS").rows}
    finally:
        c.close()


def test_superset_grains_as_docs_clients_says(shared_serve):
    c = Pair(shared_serve.port)
    try:
        c.dm.run("CREATE TABLE superset_grains (d DATE, ts TIMESTAMP, q INT) USING parquet")
        c.dm.run("INSERT INTO superset_grains VALUES (DATE '1995-01-31', "
                 "TIMESTAMP '1995-01-31 10:11:12', 3), (DATE '1995-02-05', "
                 "TIMESTAMP '1995-02-05 23:59:59', 4), (NULL, NULL, 5)")
        # the Hive spec's week grain: refused by Spark whether or not the proxy rewrites
        week = HIVE_WEEK.format(col="d")
        err = c.dm.error(f"SELECT {week} AS w, sum(q) FROM superset_grains GROUP BY {week}")
        assert err.sqlstate == "42K0B", err
        # every documented date_trunc grain runs, on a DATE and on a TIMESTAMP column
        grains = _documented_grains()
        assert len(grains) == 10
        for expr in grains.values():
            for col in ("d", "ts"):
                g = expr.format(col=col)
                c.same(f"SELECT {g} AS t, sum(q) AS q FROM superset_grains GROUP BY {g}")
        c.dm.run("CREATE DATAMAP superset_grains_day AS SELECT timeseries(ts, 'day') AS b, "
                 "sum(q) AS q FROM superset_grains GROUP BY timeseries(ts, 'day')")
        for key in ("P1D", "P1W", "P1M", "P3M", "P1Y"):
            g = grains[key].format(col="ts")
            c.hit(f"SELECT {g} AS t, sum(q) AS q FROM superset_grains GROUP BY {g}",
                  "superset_grains_day")
    finally:
        c.close()
