"""The freshness guard's parts without Spark: the cached listing of a table's
files on local disk, and the verdicts over what a datamap covers. The layouts Spark would
report are given as plain dicts; the files are real files in a temp directory."""
from __future__ import annotations

import os
import time

import pytest

from proxy.datamaps.freshness import CHANGED, FRESH, NEW, UNVERIFIED, Covered, FreshnessGuard
from proxy.datamaps.listing import Listing, hidden, local_path


def touch(path, text="x"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return str(path)


def settle(*dirs, seconds=10):
    """Age directory mtimes so the racy-read rule trusts them."""
    past = time.time() - seconds
    for d in dirs:
        os.utime(d, (past, past))


def test_local_paths_from_the_catalog_spelling():
    assert local_path("file:/w/p=a%20b/f.parquet") == "/w/p=a b/f.parquet"
    assert local_path("file:///w/x") == "/w/x"
    assert local_path("file://localhost/w/x") == "/w/x"
    assert local_path("/w/x") == "/w/x"
    assert local_path("hdfs://nn:8020/w/x") is None
    assert local_path("s3a://bucket/x") is None


@pytest.mark.parametrize("name, skipped", [
    ("part-0.parquet", False), ("_SUCCESS", True), (".part-0.crc", True),
    ("_temporary", True), ("_c=1", False), ("f.csv._COPYING_", True), ("p=2", False)])
def test_hidden_names_are_those_spark_skips(name, skipped):
    assert hidden(name) is skipped


def test_a_listing_reads_a_directory_again_only_when_it_changed(tmp_path):
    a = touch(tmp_path / "t" / "a.parquet")
    touch(tmp_path / "t" / "_SUCCESS")
    touch(tmp_path / "t" / "p=1" / "b.parquet")
    settle(tmp_path / "t", tmp_path / "t" / "p=1")
    lst = Listing((str(tmp_path / "t"),))
    first = lst.files()
    assert first == {a, str(tmp_path / "t" / "p=1" / "b.parquet")}
    reads = lst.reads
    assert lst.files() is first and lst.reads == reads        # stats only
    c = touch(tmp_path / "t" / "p=1" / "c.parquet")
    assert c in lst.files()
    os.remove(a)
    assert a not in lst.files()


def test_a_recently_changed_directory_is_read_at_every_look(tmp_path):
    """A file added in the same clock tick as the last read leaves the mtime unchanged."""
    d = tmp_path / "t"
    touch(d / "a")
    lst = Listing((str(d),))
    lst.files()
    reads = lst.reads
    lst.files()
    assert lst.reads == reads + 1          # mtime too recent to trust
    settle(d)
    lst.files()
    reads = lst.reads
    lst.files()
    assert lst.reads == reads              # settled: one stat


def test_a_missing_root_lists_nothing(tmp_path):
    assert Listing((str(tmp_path / "gone"),)).files() == frozenset()


class Spark:
    """What pipeline.table_layout would say, per table."""

    def __init__(self, layouts):
        self.layouts = layouts
        self.requested: list[str] = []

    def layout(self, table):
        return self.layouts[table]


def guard_for(tmp_path, hive=False, roots=None):
    spark = Spark({"db.t": {"hive": hive, "roots": roots or [f"file:{tmp_path}/t"],
                            "cached": False}})
    g = FreshnessGuard(spark.layout, spark.requested.append)
    g.load_layouts(["db.t"])
    return g, spark


def covered(files, as_of=0.0, definition=None):
    return Covered({"db.t": frozenset(files)}, as_of, definition)


def test_verdicts(tmp_path):
    a = touch(tmp_path / "t" / "a.parquet")
    g, spark = guard_for(tmp_path)
    cov = covered([a])
    assert g.check("db.dm", cov).kind == FRESH
    b = touch(tmp_path / "t" / "b.parquet")
    v = g.check("db.dm", cov)
    assert (v.kind, dict(v.new), v.tables) == (NEW, {"db.t": (b,)}, ("db.t",))
    assert v.files_line() == "1 new file compensated from db.t"
    assert spark.requested == ["db.t"]
    assert g.relation("db.t", v.new["db.t"]) == (
        f"(SELECT * FROM `db`.`t` WHERE _metadata.file_path IN ('file:{b}'))")
    os.remove(a)
    v = g.check("db.dm", cov)
    assert v.kind == CHANGED and "1 file of db.t removed or replaced" in v.reason


def test_new_files_an_incremental_refresh_could_not_append_are_not_compensated(tmp_path):
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    touch(tmp_path / "t" / "b.parquet")
    v = g.check("db.dm", covered([a]), compensable=lambda t: "outer join")
    assert v.kind == CHANGED and "not compensable: outer join" in v.reason
    touch(tmp_path / "t" / "name with space.parquet")
    v = g.check("db.dm", covered([a]))
    assert v.kind == CHANGED and "cannot spell" in v.reason


def test_new_files_of_an_external_table_are_never_compensated(tmp_path):
    """Its view has no _metadata to filter on; ADD SEGMENT refreshes its datamaps itself."""
    a = touch(tmp_path / "t" / "a.csv")
    spark = Spark({"db.t": {"hive": False, "roots": [f"file:{tmp_path}/t"], "cached": False,
                            "external": "db.t__csv_1"}})
    g = FreshnessGuard(spark.layout, spark.requested.append)
    g.load_layouts(["db.t"])
    touch(tmp_path / "t" / "b.csv")
    v = g.check("db.dm", covered([a]))
    assert v.kind == CHANGED and "external-format table" in v.reason


def test_hive_scans_filter_on_input_file_name(tmp_path):
    g, _ = guard_for(tmp_path, hive=True)
    assert "regexp_replace(input_file_name(), '^file://(localhost)?/', 'file:/') IN " \
        "('file:/w/x')" in g.relation("db.t", ["/w/x"])


def test_tables_off_the_local_file_system_are_not_checked(tmp_path):
    g, _ = guard_for(tmp_path, roots=["hdfs://nn/w/t"])
    assert g.check("db.dm", Covered({"db.t": None}, 0.0, None)).kind == UNVERIFIED


def test_a_table_whose_layout_is_unknown_is_not_checked_and_is_loaded(tmp_path):
    spark = Spark({})
    g = FreshnessGuard(spark.layout, spark.requested.append)
    v = g.check("db.dm", covered([]))
    assert v.kind == UNVERIFIED and "not known yet" in v.reason


def test_max_staleness_skips_the_listing(tmp_path):
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    touch(tmp_path / "t" / "b.parquet")
    assert g.check("db.dm", covered([a], as_of=time.time()), budget_s=300).kind == FRESH
    assert g.check("db.dm", covered([a], as_of=time.time() - 600), budget_s=300).kind == NEW


def test_files_spark_does_not_list_are_no_news(tmp_path):
    """An unregistered partition's directory: on disk, but not in Spark's listing."""
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    orphan = touch(tmp_path / "t" / "p=9" / "x.parquet")
    before = g.files_now("db.t")
    g.listed("db.t", before, [f"file:{a}"])
    assert orphan in before
    assert g.check("db.dm", covered([a])).kind == FRESH


def test_sessions_that_listed_a_table_before_a_change_refresh_it_once(tmp_path):
    g, _ = guard_for(tmp_path)
    opened = time.monotonic()
    assert g.stale_listings("SELECT * FROM t", opened, {}) == ((), ())
    g.note_change("db.t")
    tables, remember = g.stale_listings("SELECT * FROM T WHERE x = 1", opened, {})
    assert tables == ("db.t",)
    assert g.stale_listings("SELECT * FROM t", opened, dict(remember)) == ((), ())
    assert g.stale_listings("SELECT * FROM tt", opened, {}) == ((), ())   # a word match
    assert g.stale_listings("SELECT 1", time.monotonic(), {}) == ((), ())  # opened after


def test_the_guard_notes_a_change_once_for_the_sessions(tmp_path):
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    opened = time.monotonic()
    assert g.check("db.dm", covered([a])).kind == FRESH
    assert g.stale_listings("SELECT * FROM t", opened, {}) == ((), ())
    touch(tmp_path / "t" / "b.parquet")
    assert g.check("db.dm", covered([a])).kind == NEW
    tables, remember = g.stale_listings("SELECT * FROM t", opened, {})
    assert tables == ("db.t",)
    g.check("db.dm", covered([a]))                 # the same news: not noted again
    assert g.stale_listings("SELECT * FROM t", opened, dict(remember)) == ((), ())


def test_a_symbolic_link_loop_is_listed_once(tmp_path):
    a = touch(tmp_path / "t" / "a.parquet")
    os.symlink(tmp_path / "t", tmp_path / "t" / "loop")
    assert Listing((str(tmp_path / "t"),)).files() == {a}


def test_refresh_goes_before_what_spark_runs_and_the_session_remembers_it():
    from proxy.datamaps.fresh_answer import refresh_statements, with_refresh
    from proxy.router import PassThrough, Rewrite, Serve
    refresh = refresh_statements(["db.t", "db.t"])
    assert refresh == ("REFRESH TABLE `db`.`t`",)
    remember = (("datamap.listed:db.t", "1.0"),)
    d = with_refresh(None, refresh, remember)
    assert isinstance(d, PassThrough) and d.before == refresh and d.settings == remember
    d = with_refresh(Rewrite("SELECT 1", before=refresh), refresh, remember)
    assert d.before == refresh and d.settings == remember
    served = Serve(lambda: None, Rewrite("SELECT 2"))
    d = with_refresh(served, refresh, remember)
    assert d.fallback.before == refresh and d.settings == ()   # not refreshed when served


def test_a_write_through_the_proxy_holds_its_tables_until_it_ends(tmp_path):
    """Spark commits a job's files one by one: half an INSERT must not be compensated."""
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    token = g.begin_write(["db.t"])
    touch(tmp_path / "t" / "b.parquet")
    v = g.check("db.dm", covered([a]))
    assert v.kind == FRESH and "in progress" in v.reason
    g.end_write(token)
    g.end_write(token)                      # idempotent
    assert g.check("db.dm", covered([a])).kind == NEW
