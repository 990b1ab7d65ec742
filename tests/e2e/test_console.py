"""The web console in a real headless Chromium (the system's, driven by Playwright) against
the e2e package's shared embedded serve: sign in, every page (screenshots under the test's
tmp dir), the datamap with its segments and base segments, DISABLE / ENABLE QUERY REWRITE
pressed in the browser and checked by EXPLAIN through PyHive, REBUILD pressed and its new
segment seen; then the same switch through SQL. Names are prefixed q17c_."""
from __future__ import annotations


import pytest
from playwright.sync_api import sync_playwright

from tests.support.e2e import Conn
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

QUERY = "SELECT k, sum(v) FROM q17c_sales GROUP BY k"
HIT = "Hit mv DataMap: q17c_agg"


@pytest.fixture(scope="module")
def sql(shared_serve):
    conn = Conn(shared_serve.port)
    try:
        conn.run("CREATE TABLE q17c_sales (k STRING, v INT) USING parquet")
        conn.run("INSERT INTO q17c_sales VALUES ('a', 1), ('b', 2), ('a', 3)")
        conn.run("CREATE DATAMAP q17c_agg USING 'mv' AS SELECT k, sum(v) FROM q17c_sales GROUP BY k")
        conn.run("CREATE DATAMAP q17c_lazy USING 'mv' WITH DEFERRED REBUILD AS "
                 "SELECT k, count(*) FROM q17c_sales GROUP BY k")
        conn.rows(QUERY)                      # one answered query for the query log,
        conn.cur.close()                      # logged once its operation is closed
        yield conn
    finally:
        conn.close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        try:
            yield b
        finally:
            b.close()


def _plan(conn: Conn) -> str:
    return conn.run("EXPLAIN " + QUERY).rows[0][0]


def _press(page, label: str) -> None:
    """A datamap page's action button, then its confirmation page's Run button."""
    page.get_by_role("button", name=label, exact=True).click()
    page.wait_for_url("**/confirm?action=*")
    assert page.locator("pre").inner_text().startswith(("ALTER DATAMAP", "REBUILD DATAMAP"))
    page.get_by_role("button", name=f"Run {label}").click()
    page.wait_for_url("**/datamaps/default.*?done=*")


def _logged_hit(page, base: str) -> str:
    """The /queries row of QUERY answered from q17c_agg, once the log's writer has it."""
    def row():
        page.goto(base + "/queries?datamap=default.q17c_agg")
        rows = page.locator("tr", has_text="sum(v) FROM q17c_sales")
        return rows.first.inner_text() if rows.count() else None
    return wait_until(row, timeout=30, interval=0.5, what="the query log's row",
                      detail=lambda: page.locator("main").inner_text())


def test_console_in_chromium(shared_serve, sql, browser, tmp_path):
    base = f"http://127.0.0.1:{shared_serve.console_port}"
    page = browser.new_page()
    page.set_default_timeout(30_000)
    shot = iter(range(1, 100))

    def snap(name: str) -> None:
        page.screenshot(path=str(tmp_path / f"{next(shot):02d}_{name}.png"), full_page=True)

    page.goto(base + "/datamaps")
    assert page.url.endswith("/login")                       # sign-in first
    snap("login")
    page.fill("input[name=user]", "q17c_operator")
    page.fill("input[name=password]", "any")                   # auth = none: any password
    page.click("button[type=submit]")
    page.wait_for_url("**/datamaps")
    snap("datamaps")
    row = page.locator("tr", has_text="default.q17c_agg")
    assert "ENABLED" in row.inner_text() and "on" in row.inner_text()
    assert "Time saved (estimate)" in page.locator("thead").first.inner_text()
    assert "not built" in page.locator("tr", has_text="default.q17c_lazy").inner_text()

    row = _logged_hit(page, base)
    snap("queries")
    assert "default.q17c_agg" in row and ("\trewritten\t" in row or "\tserved\t" in row), row

    page.goto(base + "/datamaps")
    page.click("text=default.q17c_agg")
    page.wait_for_url("**/datamaps/default.q17c_agg")
    snap("datamap")
    segments = page.locator("h2:has-text('Segments') + table").inner_text()
    assert "default.q17c_sales: 0" in segments and "Success" in segments
    assert "SELECT k, sum(v) FROM q17c_sales GROUP BY k" in page.locator("pre").first.inner_text()
    # hits, and the estimated time saved: its chart, or (as here, unless the online audit
    # sampled the query: its shape never ran on the base tables) "not measured yet", never
    # a chart of zeros
    charts, main = page.locator("svg.chart").count(), page.locator("main").inner_text()
    assert charts == 2 or (charts == 1 and "time saved per hour: not measured yet" in main)
    assert "(time saved not measured yet)" in main or ", estimated)" in main, main
    answered = page.locator("h2:has-text('Recent queries it answered') + table").inner_text()
    assert "sum(v) FROM q17c_sales" in answered, answered

    page.goto(base + "/suggestions")
    snap("suggestions")
    assert page.locator("h1").inner_text() == "Suggestions"

    assert HIT in _plan(sql).splitlines()
    page.goto(base + "/datamaps/default.q17c_agg")
    _press(page, "DISABLE QUERY REWRITE")
    snap("rewrite_disabled")
    assert "DISABLE QUERY REWRITE done" in page.locator(".note").first.inner_text()
    plan = _plan(sql)
    assert "No datamap hit" in plan.splitlines() and "query rewrite disabled" in plan, plan
    assert sql.rows(QUERY) == [("a", 4), ("b", 2)]            # answered from the base table
    _press(page, "ENABLE QUERY REWRITE")
    assert HIT in _plan(sql).splitlines()
    history = page.locator("h2:has-text('History') + table").inner_text()
    assert "rewrite_enabled" in history and "by q17c_operator" in history

    page.goto(base + "/datamaps/default.q17c_lazy")
    _press(page, "REBUILD")
    snap("rebuild_started")
    def rebuilt():
        page.reload()
        assert "failed" not in page.locator("main").inner_text()
        return "done" in page.locator("h2:has-text('Console actions') + table").inner_text()
    wait_until(rebuilt, timeout=120, interval=1, what="the console's REBUILD to be done")
    snap("rebuilt")
    segments = page.locator("h2:has-text('Segments') + table").inner_text()
    assert "default.q17c_sales: 0" in segments and "Success" in segments
    assert [r[0] for r in sql.run("SHOW SEGMENTS FOR TABLE q17c_lazy_table").rows] == ["0"]
    page.close()


def test_rewrite_switch_through_sql(sql):
    sql.run("ALTER DATAMAP q17c_agg DISABLE QUERY REWRITE")
    shown = {r[0]: r for r in sql.run("SHOW DATAMAP").rows}
    assert shown["q17c_agg"][8] == "false" and shown["q17c_agg"][4] == "ENABLED"
    assert "No datamap hit" in _plan(sql).splitlines()
    # maintenance goes on: a load refreshes it while rewrite is off
    sql.run("INSERT INTO q17c_sales VALUES ('c', 5)")
    sql.run("ALTER DATAMAP default.q17c_agg ENABLE QUERY REWRITE")
    assert HIT in _plan(sql).splitlines()
    assert sql.rows(QUERY) == [("a", 4), ("b", 2), ("c", 5)]
    err = sql.error("ALTER DATAMAP q17c_nothing ENABLE QUERY REWRITE")
    assert "42S02" in str(err) or getattr(err, "sqlstate", "") == "42S02"
