"""Page rendering as pure functions over values: hostile names and statements escaped,
secrets masked, readers that are off, the chart, and the action statements."""
from __future__ import annotations

from proxy.advisor.core import Suggestion
from proxy.console import chart, pages, pages_log
from proxy.console.actions import ActionRecord, statement
from proxy.console.views import Detail, Summary, usage_buckets
from proxy.datamaps.catalog.records import DatamapRecord, DatamapSegment, Event
from proxy.observability.querylog.log import QueryLog
from tests.support.console_fakes import logged

EVIL = '<img src=x onerror="alert(1)">'


def _summary(**kw):
    base = dict(db="db1", name="agg", status="ENABLED", status_reason="", rewrite=True,
                segments=1, rows=5, size=2048, as_of=1000.0, pending=0, reason=None, hits=3,
                saved_s=1.5)
    return Summary(**{**base, **kw})


def _record(sql="SELECT 1"):
    return DatamapRecord("db1", "agg", "mv", sql, sql, ("db1.sales",), False,
                         {"sort_columns": EVIL}, None, "ENABLED", "", 0.0)


def test_datamap_list_escapes_and_formats():
    html = pages.datamaps([_summary(status="DISABLED", status_reason=EVIL, reason=EVIL),
                           _summary(name="fresh", pending=2, rewrite=False)],
                          user=EVIL, csrf="tok", log_on=False, now=1060.0)
    assert EVIL not in html and "&lt;img src=x" in html
    assert "query log is off" in html and "2.0 KiB" in html
    assert "2 base segment(s) pending" in html and ">off<" in html
    assert 'name="csrf" value="tok"' in html           # the sign-out form


def test_datamap_page_sections():
    seg = DatamapSegment("db1", "agg", "0", ("file:/w/a.parquet",), 5, {"db1.sales": ("0", "1")},
                         True, "SUCCESS", False, 1000.0, 1.25, "built")
    usage = [(0.0, 0, 0.0), (3600.0, 4, 2.5)]
    q = logged(1, 1000.0, "bob", "Superset", f"SELECT '{EVIL}' -- password=hunter2", "served",
               ("db1.agg",))
    act = ActionRecord(7, 1000.0, "ann", "db1.agg", "rebuild", "REBUILD DATAMAP db1.agg",
                       state="failed", sqlstate="HY000", message=EVIL, ended=1001.0)
    d = Detail(_summary(), _record(f"SELECT {EVIL}"), [seg], [Event(1, 999.0, "built", 5, 1.2, EVIL)],
               usage, [q], {"0": 100})
    html = pages.datamap(d, [act], user="ann", csrf="tok", flash=act, now=1100.0)
    assert EVIL not in html and "hunter2" not in html
    assert "db1.sales: 0, 1" in html and "Success" in html and "100 B" in html
    assert html.count("<svg") == 2 and "Superset" in html
    assert "failed: SQLSTATE <code>HY000</code>" in html
    for label in ("REBUILD", "COMPACT MINOR", "COMPACT MAJOR", "DISABLE QUERY REWRITE"):
        assert f">{label}</button>" in html
    off = pages.datamap(Detail(_summary(rewrite=False), _record(), [], [], None, None, {}), [],
                        user="ann", csrf="tok")
    assert ">ENABLE QUERY REWRITE</button>" in off and "query log is off" in off


def test_confirm_page_posts_the_token():
    html = pages.confirm("db1.agg", "compact_major", "ALTER DATAMAP db1.agg COMPACT 'MAJOR'",
                         user="ann", csrf="tok")
    assert 'method="post"' in html and 'value="tok"' in html and "may take minutes" in html


def test_queries_and_suggestions_pages():
    q = logged(1, 1.0, EVIL, EVIL, "SELECT 1 -- password=hunter2", "forwarded",
               why_not=(("db1.agg", EVIL),), reason_class="grouping", sqlstate="42000",
               outcome="ERROR")
    html = pages_log.queries([q], user="ann", csrf="t", filters={"user": EVIL, "decision": "forwarded"})
    assert EVIL not in html and "hunter2" not in html and "grouping" in html
    assert '<option value="forwarded" selected>' in html and "<code>42000</code>" in html
    assert "query log is off" in pages_log.queries(None, user="a", csrf="t", filters={})
    s = Suggestion("drop", EVIL, "DROP DATAMAP x", 0, 0.0, 0.0, None, 9.0, "costs more")
    html = pages_log.suggestions([s], user="ann", csrf="t")
    assert EVIL not in html and "DROP DATAMAP x" in html and "costs more" in html
    assert "advisor is off" in pages_log.suggestions(None, user="a", csrf="t")
    assert "The advisor failed: boom" in pages_log.suggestions([], user="a", csrf="t",
                                                               error="The advisor failed: boom")


def test_login_pages():
    assert 'type="password"' in pages.login()
    assert "&lt;b&gt;" in pages.login("<b>")
    assert "SPNEGO" in pages.login(kerberos=True) and "password" not in pages.login(kerberos=True)


def test_usage_buckets_fill_the_window(tmp_path):
    now = 10 * 3600.0 + 5
    log = QueryLog(str(tmp_path / "catalog.db"))
    log.write_many([logged(1, now - 10, "u", "", "", "rewritten", ("db1.agg",), saved_s=2.0),
                    logged(2, now - 3700, "u", "", "", "served", ("db1.agg",), saved_s=1.0),
                    logged(3, now - 20, "u", "", "", "served", ("db1.other",)),
                    logged(4, now - 30, "u", "", "", "served", ("db1.agg",), outcome="ERROR")])
    got = usage_buckets(log, "db1.agg", now, window_s=4 * 3600.0)
    log.close()
    assert [g[0] for g in got] == [7 * 3600.0, 8 * 3600.0, 9 * 3600.0, 10 * 3600.0]
    assert [(h, s) for _, h, s in got] == [(0, 0.0), (1, 1.0), (1, 2.0), (0, 0.0)]


def test_unmeasured_hits_are_not_a_zero_in_the_usage_buckets(tmp_path):
    now = 10 * 3600.0 + 5
    log = QueryLog(str(tmp_path / "catalog.db"))
    log.write_many([logged(1, now - 2, "u", "", "", "served", ("db1.agg",)),
                    logged(2, now - 3000, "u", "", "", "served", ("db1.agg",)),
                    logged(3, now - 3010, "u", "", "", "served", ("db1.agg",), saved_s=0.5)])
    got = usage_buckets(log, "db1.agg", now, window_s=2 * 3600.0)
    log.close()
    assert [(h, s) for _, h, s in got] == [(2, 0.5), (1, None)]


def test_chart_and_statements():
    svg = chart.bars([(0.0, 0), (3600.0, 3)], title="<hits>")
    assert svg.startswith("<svg") and "&lt;hits&gt;" in svg and svg.count("<rect") == 2
    assert chart.bars([], title="empty").endswith("</svg>")
    assert statement("rebuild", "db1.agg") == "REBUILD DATAMAP db1.agg"
    assert statement("enable_rewrite", "db1.agg") == "ALTER DATAMAP db1.agg ENABLE QUERY REWRITE"
    for bad in [("drop", "db1.agg"), ("rebuild", "agg"), ("rebuild", "db1.a;DROP TABLE t"),
                ("rebuild", "db1.`x`")]:
        assert statement(*bad) is None


def test_time_saved_not_measured_yet_is_said_never_zero():
    """A fresh datamap whose hits' shapes never ran on the base tables has no measured
    saving: the list and the page say so rather than 0 ms."""
    html = pages.datamaps([_summary(hits=12, saved_s=None), _summary(name="off", hits=None,
                                                                     saved_s=None)],
                          user="ann", csrf="tok", log_on=True, now=1060.0)
    assert "not measured yet" in html and ">0 ms<" not in html
    d = Detail(_summary(hits=12, saved_s=None), _record(), [], [], None, None, {})
    assert "12 (time saved not measured yet)" in pages.datamap(d, [], user="ann", csrf="tok")
    # hits in the window, none measured: a note, not a chart of zeros
    d = Detail(_summary(hits=12, saved_s=None), _record(), [], [],
               [(0.0, 0, 0.0), (3600.0, 12, None)], [], {})
    html = pages.datamap(d, [], user="ann", csrf="tok")
    assert html.count("<svg") == 1 and "time saved per hour: not measured yet" in html


def test_time_saved_is_labelled_an_estimate_wherever_it_shows():
    """The saving is the base-table time of the hits' shapes, scaled by rows: the list's
    column, its cells, the page and the chart say it is an estimate."""
    html = pages.datamaps([_summary(hits=12, saved_s=3.25)], user="ann", csrf="tok",
                          log_on=True, now=1060.0)
    assert "Time saved (estimate)" in html and "≈ 3.25 s" in html
    assert pages.saved(_summary(saved_s=0.25)) == "≈ 250 ms"
    d = Detail(_summary(hits=12, saved_s=3.25), _record(), [], [],
               [(0.0, 0, 0.0), (3600.0, 12, 3.25)], [], {})
    html = pages.datamap(d, [], user="ann", csrf="tok")
    assert "12 (time saved ≈ 3.25 s, estimated)" in html
    assert "<title>estimated seconds saved per hour</title>" in html
    assert "Hits and estimated time saved, last 24 hours" in html
    # hits whose shape had not run on the base tables count for nothing, and it is said
    assert pages.saved(_summary(hits=12, saved_s=3.25, measured=2)) == (
        "≈ 3.25 s (2 of 12 hits measured)")


def test_the_segment_mirror_per_datamap():
    from proxy.console.views import Mirror, Serving
    m = Mirror("auto", 3072, 4 << 30, [("db1.agg", 2, 3072, []),
                                       ("db1.big", 0, 0, [("7", EVIL), ("8", "evicted")])])
    html = pages.datamaps([_summary()], user="u", csrf="t", log_on=True,
                          serving=Serving("up", "DuckDB 1", mirror=m))
    assert "Segment mirror (auto): 3.0 KiB of 4.0 GiB" in html
    assert "db1.agg: 2 of 2 segments mirrored (3.0 KiB)" in html
    assert "db1.big: 0 of 2 segments mirrored" in html and "segment 8: evicted" in html
    assert EVIL not in html
    none = pages.datamaps([], user="u", csrf="t", log_on=True,
                          serving=Serving("up", mirror=Mirror("auto", 0, 10, [])))
    assert "no segment needs it" in none
