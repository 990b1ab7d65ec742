"""The freshness guard's parts without Spark: the cached listing of a table's
files on local disk, and the verdicts over what a datamap covers. The layouts Spark would
report are given as plain dicts; the files are real files in a temp directory."""
from __future__ import annotations

import os
import time

import pytest

from proxy.datamaps.freshness.guard import CHANGED, FRESH, NEW, UNVERIFIED, Covered, FreshnessGuard
from proxy.datamaps.freshness.listing import Listing, hidden, local_path


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
    from proxy.datamaps.freshness.answer import refresh_statements, with_refresh
    from proxy.routing.router import PassThrough, Rewrite, Serve
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


# -- writes through the proxy in flight (begin_write .. end_write) ---------------------------
# The invariant: an answer is as of a moment between the statement's arrival and its
# check. A file may be held back only when its write provably had not finished when the
# statement arrived: it appeared after a hold that began after the statement arrived.


def test_files_already_there_when_a_write_through_the_proxy_began_are_judged(tmp_path):
    """An outside write that finished before the hold began is compensated, not hidden."""
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    outside = touch(tmp_path / "t" / "outside.parquet")
    token = g.begin_write(["db.t"])
    v = g.check("db.dm", covered([a]), since=time.monotonic() - 10)
    assert (v.kind, dict(v.new), v.held) == (NEW, {"db.t": (outside,)}, 0)
    os.remove(a)                            # a removal is never held back
    assert g.check("db.dm", covered([a]), since=time.monotonic() - 10).kind == CHANGED
    g.end_write(token)


def test_files_written_during_a_hold_are_held_back_from_statements_that_came_before(tmp_path):
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    arrived = time.monotonic()              # a statement arrives ...
    token = g.begin_write(["db.t"])         # ... then a write through the proxy begins
    written = touch(tmp_path / "t" / "written.parquet")
    v = g.check("db.dm", covered([a]), since=arrived)
    assert (v.kind, v.held, v.reason) == (FRESH, 1, "")
    # a statement that arrived after the hold began cannot tell the proxy's files from an
    # outside write that finished meanwhile: they are judged
    v = g.check("db.dm", covered([a]), since=time.monotonic())
    assert (v.kind, dict(v.new), v.held) == (NEW, {"db.t": (written,)}, 0)
    assert g.check("db.dm", covered([a])).kind == NEW          # since: now
    g.end_write(token)
    g.end_write(token)                      # idempotent
    assert g.check("db.dm", covered([a]), since=arrived).kind == NEW


def test_a_held_back_answer_earns_no_max_staleness_credit(tmp_path):
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    arrived = time.monotonic()
    token = g.begin_write(["db.t"])
    touch(tmp_path / "t" / "written.parquet")
    assert g.check("db.dm", covered([a]), since=arrived).held == 1
    # fresh only as of before the write: a relaxed session must not take it for "now"
    assert g.check("db.dm", covered([a]), budget_s=300).kind == NEW
    g.end_write(token)


def test_overlapping_holds_are_each_their_own(tmp_path):
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    early = time.monotonic()
    first = g.begin_write(["db.t"])
    between = touch(tmp_path / "t" / "between.parquet")    # during the first only
    middle = time.monotonic()
    second = g.begin_write(["db.t"])
    late = touch(tmp_path / "t" / "late.parquet")          # during both
    v = g.check("db.dm", covered([a]), since=early)        # before both: as of the first
    assert (v.kind, v.held) == (FRESH, 2)
    v = g.check("db.dm", covered([a]), since=middle)       # between them: as of the second
    assert (v.kind, dict(v.new), v.held) == (NEW, {"db.t": (between,)}, 1)
    g.end_write(first)
    v = g.check("db.dm", covered([a]), since=early)        # the second still holds `late`
    assert (v.kind, dict(v.new), v.held) == (NEW, {"db.t": (between,)}, 1)
    g.end_write(second)
    v = g.check("db.dm", covered([a]), since=early)
    assert (v.kind, dict(v.new), v.held) == (NEW, {"db.t": (between, late)}, 0)


def test_a_hold_on_a_table_not_listed_when_it_began_holds_nothing_back(tmp_path):
    """Which files it wrote cannot be told: every file is judged (never a stale answer)."""
    a = touch(tmp_path / "t" / "a.parquet")
    spark = Spark({"db.t": {"hive": False, "roots": [f"file:{tmp_path}/t"], "cached": False}})
    g = FreshnessGuard(spark.layout, spark.requested.append)
    arrived = time.monotonic()
    token = g.begin_write(["db.t"])         # layout not loaded yet: no listing
    g.load_layouts(["db.t"])
    b = touch(tmp_path / "t" / "b.parquet")
    v = g.check("db.dm", covered([a]), since=arrived)
    assert (v.kind, dict(v.new), v.held) == (NEW, {"db.t": (b,)}, 0)
    g.end_write(token)


def test_a_hold_never_ended_is_ignored_after_an_hour(tmp_path, monkeypatch):
    import proxy.datamaps.freshness.guard as freshness
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    arrived = time.monotonic()
    g.begin_write(["db.t"])
    touch(tmp_path / "t" / "b.parquet")
    monkeypatch.setattr(freshness, "WRITE_HOLD_MAX_S", 0.0)
    assert g.check("db.dm", covered([a]), since=arrived).kind == NEW


# -- a commit in progress: Spark moves a job's files into the table one by one -------------
JOB = "bbbded7e-7125-4449-80b5-b305899f3e15"
OTHER = "43bb276c-b4b7-49b1-9e91-3ad65652e85e"


def test_files_of_a_job_still_committing_are_held_back(tmp_path):
    """What Spark 4 leaves on disk mid-commit: the job's moved files in the table, the rest
    under _temporary/0/task_*; both named part-NNNNN-<job uuid>-c000."""
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    moved = touch(tmp_path / "t" / f"part-00000-{JOB}-c000.snappy.parquet")
    pending = tmp_path / "t" / "_temporary" / "0" / "task_1_m_000001" / \
        f"part-00001-{JOB}-c000.snappy.parquet"
    touch(pending)
    done = touch(tmp_path / "t" / f"part-00000-{OTHER}-c000.snappy.parquet")   # committed
    v = g.check("db.dm", covered([a]))
    assert (v.kind, dict(v.new), v.held) == (NEW, {"db.t": (done,)}, 1)
    # the commit moves the last file (_temporary goes after): the whole job is read
    os.rename(pending, tmp_path / "t" / pending.name)
    v = g.check("db.dm", covered([a]))
    assert (v.kind, v.held) == (NEW, 0)
    assert set(v.new["db.t"]) == {moved, done, str(tmp_path / "t" / pending.name)}


def test_a_staging_directory_left_by_a_job_that_died_holds_nothing_back(tmp_path):
    """Spark's readers see what a job moved in before it died: so must the datamaps."""
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    moved = touch(tmp_path / "t" / f"part-00000-{JOB}-c000.snappy.parquet")
    touch(tmp_path / "t" / "_temporary" / "0" / "task_1" / f"part-00001-{JOB}-c000.snappy.parquet")
    staging = tmp_path / "t" / "_temporary"
    settle(staging, staging / "0", staging / "0" / "task_1", seconds=120)
    v = g.check("db.dm", covered([a]))
    assert (v.kind, dict(v.new), v.held) == (NEW, {"db.t": (moved,)}, 0)


def test_a_job_only_writing_its_tasks_holds_nothing_back(tmp_path):
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    touch(tmp_path / "t" / "_temporary" / "0" / "_temporary" / "attempt_1" /
          f"part-00000-{JOB}-c000.snappy.parquet")
    assert g.check("db.dm", covered([a])).kind == FRESH
    copied = touch(tmp_path / "t" / "copied.parquet")        # no job id: read at once
    v = g.check("db.dm", covered([a]))
    assert (v.kind, dict(v.new), v.held) == (NEW, {"db.t": (copied,)}, 0)


def test_staging_directories_of_partitions_and_hive_writes_are_read(tmp_path):
    a = touch(tmp_path / "t" / "p=1" / "a.parquet")
    g, _ = guard_for(tmp_path)
    touch(tmp_path / "t" / "p=1" / f"part-00000-{JOB}-c000")
    touch(tmp_path / "t" / ".hive-staging_hive_2026-11-27_1" / "-ext-10000" /
          f"part-00001-{JOB}-c000")
    v = g.check("db.dm", covered([a]))
    assert (v.kind, v.held) == (FRESH, 1)


def test_a_sync_leaves_the_files_of_a_commit_going_on_to_the_next_one(tmp_path):
    a = touch(tmp_path / "t" / "a.parquet")
    g, _ = guard_for(tmp_path)
    moved = touch(tmp_path / "t" / f"part-00000-{JOB}-c000.snappy.parquet")
    pending = touch(tmp_path / "t" / "_temporary" / "0" / "task_1" /
                    f"part-00001-{JOB}-c000.snappy.parquet")
    done = touch(tmp_path / "t" / f"part-00000-{OTHER}-c000.snappy.parquet")
    spark = {f"file:{p}" for p in (a, moved, done)}
    assert g.unfinished("db.t", spark) == {f"file:{moved}"}
    # the commit ended while Spark listed: Spark saw one of its two files
    os.rename(pending, tmp_path / "t" / os.path.basename(pending))
    assert g.unfinished("db.t", spark) == {f"file:{moved}"}
    spark.add(f"file:{tmp_path}/t/{os.path.basename(pending)}")
    assert g.unfinished("db.t", spark) == frozenset()
