"""Real Apache Superset's SQL through the proxy: the statements its chart-data API writes for
a set of charts (time-series lines at every grain, big numbers, a table, a pie, a bar with a
series limit, a distinct count, a virtual dataset), with its Apache Hive engine spec (what
every `hive://` database gets) and its Apache Spark SQL spec (`date_trunc` grains).

tests/fixtures/superset/statements.json holds them. The first test rebuilds them with the
real Superset (pinned in tests/fixtures/superset/requirements.txt, in a virtual environment
of its own, cached outside the checkout) pointed at the shared `serve`, and requires them
equal: a Superset upgrade shows up as a diff of that file. The second runs each statement
through the proxy, over a datamap of `ss_orders`, and through Spark directly: the same
column names, types and rows, or the same SQLSTATE. Whether a hit is served in-process is
recorded and printed, not required (the serving tier still widens); a wrong row fails."""
from __future__ import annotations

import json
import time

import pytest

from tests.support import superset
from tests.support.clients import ClientError, RawHS2
from tests.support.e2e import sort_rows
from tests.support.spark_tier import rows_equal

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

DATAMAP = ("CREATE DATAMAP ss_orders_dm USING 'mv' AS SELECT ts, d, country, category, "
           "customer_id, qty, sum(amount), count(*), avg(price) FROM ss_orders "
           "GROUP BY ts, d, country, category, customer_id, qty")


def _rows() -> list[str]:
    """Edge values for the grains (a year boundary, a leap day, the week's first day, a
    quarter's last second, fractions of a second, 1970, NULLs) and distinct country
    totals, so the series limit's top two are one answer."""
    stamps = ["1970-01-01 00:00:00", "2023-12-31 23:59:59.999999", "2024-01-01 00:00:00",
              "2024-01-01 10:00:00.5", "2024-01-01 10:00:59", "2024-01-07 23:59:59",
              "2024-01-08 00:00:00", "2024-02-29 12:34:56", "2024-03-31 23:59:59",
              "2024-04-01 00:00:00", "2024-06-30 12:00:00", "2024-12-31 23:59:59"]
    countries = ["'de'", "'fr'", "'us'", "'ümlaut'", "NULL"]
    categories = ["'a'", "'b'", "'c'", "NULL"]
    prices = ["1.5", "0.1", "-4.5", "NULL", "2.25", "-0.0"]
    out = []
    for i in range(48):
        ts = stamps[i % len(stamps)]
        t = "NULL" if i == 47 else f"TIMESTAMP'{ts}'"
        d = "NULL" if i == 46 else f"DATE'{ts[:10]}'"
        qty = "NULL" if i % 11 == 5 else str((i * 7) % 9 - 2)
        amount = "NULL" if i % 13 == 4 else f"{(i * 37) % 101 + i / 100:.2f}"
        out.append(f"({t}, {d}, {countries[i % 5]}, {categories[i % 4]}, {i % 6}, {qty}, "
                   f"{amount}, {prices[i % 6]})")
    return out


@pytest.fixture(scope="module")
def env(shared_serve):
    proxy = RawHS2("127.0.0.1", shared_serve.port)
    try:
        proxy.execute(superset.fixture()["table"])
        proxy.execute("INSERT INTO ss_orders VALUES " + ", ".join(_rows()[:30]))
        proxy.execute(DATAMAP)
        proxy.execute("INSERT INTO ss_orders VALUES " + ", ".join(_rows()[30:]))
        yield {"serve": shared_serve, "proxy": proxy}
    finally:
        proxy.close()


def test_superset_writes_the_committed_statements(env, tmp_path):
    try:
        venv, took = superset.venv()
    except superset.IndexUnreachable as e:
        pytest.skip(f"Superset's environment cannot be built: {e}")
    print(f"\nSuperset environment {venv}: "
          + ("cached" if took is None else f"built in {took:.0f} s"))
    started = time.monotonic()
    got = superset.generate(venv, tmp_path / "statements.json",
                            f"hive://hive@127.0.0.1:{env['serve'].port}/default")
    print(f"Superset wrote {len(got['statements'])} statements in "
          f"{time.monotonic() - started:.0f} s")
    want = superset.fixture()
    assert got == want, (
        "Superset's SQL differs from tests/fixtures/superset/statements.json; if Superset "
        "was upgraded, review the diff and commit the new file:\n"
        + json.dumps(got, indent=1))


def _answer(run, sql):
    try:
        return run(sql), None
    except ClientError as e:
        return None, e


def test_superset_statements_give_sparks_answer(env):
    proxy = env["proxy"]
    # Spark's own answer: one session opened after the loads (a Spark session caches a
    # table's file listing, so one opened before an INSERT would not see it)
    spark = RawHS2("127.0.0.1", env["serve"].srv.engine_port)
    try:
        _compare(proxy, spark)
    finally:
        spark.close()


def _compare(proxy: RawHS2, spark: RawHS2) -> None:
    report: dict[str, list[tuple[str, bool, bool, str]]] = {"hive": [], "spark": []}
    for st in superset.fixture()["statements"]:
        sql, name = st["sql"], f"{st['spec']}/{st['chart']}"
        plan = proxy.execute("EXPLAIN " + sql).rows[0][0]
        lines = plan.splitlines()
        hit = any(l.startswith("Hit mv DataMap: ss_orders_dm") for l in lines)
        served_by = next((l for l in lines if l.startswith("Served by: ")), "")
        served = served_by.startswith("Served by: local engine")
        got, got_err = _answer(proxy.execute, sql)
        want, want_err = _answer(spark.execute, sql)
        if want_err is not None:
            assert got_err is not None and got_err.sqlstate == want_err.sqlstate, \
                (name, want_err, got_err or got.rows)
            report[st["spec"]].append((st["chart"], hit, served, "error " +
                                       want_err.sqlstate))
            continue
        assert got_err is None, (name, got_err, plan[:1500])
        assert got.columns == want.columns, (name, got.columns, want.columns)
        assert got.types == want.types, (name, got.types, want.types)
        g, w = sort_rows(got.rows), sort_rows(want.rows)
        assert len(g) == len(w) and all(rows_equal(a, b) for a, b in zip(g, w)), \
            f"{name}: wrong rows\n{sql}\n{plan[:1500]}\nproxy: {g}\nspark: {w}"
        report[st["spec"]].append((st["chart"], hit, served,
                                   served_by[len("Served by: "):] if hit else "no hit"))
    print()
    for spec, rows in report.items():
        hits = [r for r in rows if r[1] and not r[3].startswith("error")]
        failed = [r for r in rows if r[3].startswith("error")]
        print(f"Superset {spec} spec: {len(rows)} statements, {len(hits)} hit and answered "
              f"({len(failed)} refused by Spark too), {sum(r[2] for r in hits)} of those "
              f"hits served in-process")
        for chart, _, _, how in rows:
            print(f"  {chart:24} {how}")
