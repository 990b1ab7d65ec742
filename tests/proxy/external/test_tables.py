"""proxy/external/tables.py and handler.py without Spark: a real catalog and real links
in a temporary directory; the Spark side (pipeline/external.py) is recorded, not run.
ADD SEGMENT's order (staged links, hook, one rename, catalog commit), its refusals, a
failing hook leaving nothing visible, DELETE SEGMENT keeping the files, COMPACT, crash
recovery, and the handler's decisions."""
from __future__ import annotations

import os

import pytest

from proxy.datamaps.catalog.store import Catalog
from proxy.errors import ClientError
from proxy.external import grammar, links
from proxy.external.handler import ExternalHandler
from proxy.external.hooks import SegmentHooks
from proxy.external.tables import ExternalTables
from proxy.routing.router import Local, LocalResult, Reject, Rewrite, StatementContext

CREATE = ("CREATE TABLE t (id int, v string) TBLPROPERTIES ('format'='csv', "
          "'csv.header'='v,x,id')")


@pytest.fixture
def ext(tmp_path, monkeypatch):
    from pipeline import external as spark_side
    calls = []
    for name in ("create", "drop", "refresh", "replace_view", "recreate_source", "rename"):
        monkeypatch.setattr(spark_side, name,
                            lambda *a, _n=name: calls.append((_n, a[1:])))
    monkeypatch.setattr(spark_side, "exists", lambda spark, table: False)
    catalog = Catalog(tmp_path / "state" / "catalog.db")
    tables = ExternalTables(catalog, lambda: "spark", tmp_path / "state", None, SegmentHooks())
    tables.calls = calls
    tables.create(grammar.parse_create(CREATE))
    yield tables
    catalog.close()


@pytest.fixture
def files(tmp_path):
    d = tmp_path / "data"
    (d / "sub").mkdir(parents=True)
    for name in ("a.csv", "sub/b.csv.gz", "_skip.csv", "sub/.hidden"):
        (d / name).write_text("1,x,2\n")
    return d


def _add(ext, *paths):
    return ext.add_segment(grammar.AddSegment("default.t", tuple(str(p) for p in paths)))


def test_add_segment_links_files_in_place(ext, files):
    seen = []

    def hook(table, seg, pairs):
        seen.append((table, seg, pairs))
        for staged, final in pairs:      # staged links exist, the segment is not visible yet
            assert os.path.islink(links.local(staged)) and not os.path.lexists(links.local(final))
    ext.hooks.on_segment_files = hook
    assert _add(ext, files) == 0
    seg, = ext.store.segments("default.t")
    assert seg.rows is None             # the hook counted nothing
    assert [os.path.basename(f.target) for f in seg.files] == ["a.csv", "b.csv.gz"]
    for f in seg.files:
        assert os.path.islink(links.local(f.link)) and f.link.startswith("file:/")
        assert os.readlink(links.local(f.link)) == f.target and f.link.endswith(
            os.path.basename(f.target))
    assert seen[0][:2] == ("default.t", 0) and [p[1] for p in seen[0][2]] == [
        f.link for f in seg.files]
    assert ("refresh", ()) in [(c[0], ()) for c in ext.calls]


def test_refusals_name_the_path(ext, files):
    _add(ext, files / "a.csv")
    for paths, words in [((files,), "already mapped by segment 0"),
                         ((files / "sub", files / "sub"), "given twice"),
                         ((files / "sub", files), "overlap"),
                         ((files / "nope",), "does not exist")]:
        with pytest.raises(ClientError) as e:
            _add(ext, *paths)
        assert e.value.sqlstate == "42000" and words in str(e.value)
    with pytest.raises(ClientError) as e:
        _add(ext, "hdfs://nn/x")
    assert e.value.sqlstate == "0A000"


def test_a_failing_hook_leaves_nothing_visible(ext, files, monkeypatch):
    def hook(*_a):
        raise RuntimeError("index writer broke")
    ext.hooks.on_segment_files = hook
    with pytest.raises(ClientError) as e:
        _add(ext, files)
    assert "index writer broke" in str(e.value) and "nothing was added" in str(e.value)
    t = ext.get("default.t")
    assert os.listdir(t.location) == [] and ext.store.segments("default.t") == []
    assert ext.store.next_id("default.t") == 0
    gone = []
    ext.hooks.on_segment_files = lambda *_a: None
    ext.hooks.on_files_gone = lambda table, fs: gone.append(fs)

    def no_rename(*_a):
        raise OSError("disk full")
    monkeypatch.setattr(links, "publish", no_rename)
    with pytest.raises(ClientError) as e:
        _add(ext, files)
    assert "while publishing" in str(e.value) and len(gone[0]) == 2
    assert os.listdir(t.location) == [] and ext.store.segments("default.t") == []


def test_delete_keeps_files_and_reports_them_gone(ext, files):
    gone = []
    ext.hooks.on_files_gone = lambda table, fs: gone.append(fs)
    _add(ext, files / "a.csv")
    _add(ext, files / "sub")
    link = ext.store.segments("default.t")[1].files[0].link
    assert ext.delete_segments(grammar.DeleteSegments("default.t", (0,))) == [0]
    assert gone == [[link]] and not os.path.lexists(links.local(link))
    assert (files / "a.csv").read_text() == "1,x,2\n"
    with pytest.raises(ClientError) as e:
        ext.delete_segments(grammar.DeleteSegments("default.t", (0, 9)))
    assert "no segment 9" in str(e.value)
    _add(ext, files / "a.csv")           # unmapped files may be mapped again


def test_compact_remaps_the_same_links(ext, files):
    (files.parent / "more").mkdir()
    (files.parent / "more" / "c.csv").write_text("3,y,4\n")
    compacted = []
    ext.hooks.on_compacted = lambda table, old, new: compacted.append((old, new))
    _add(ext, files / "a.csv")
    _add(ext, files / "sub")
    links_before = sorted(f.link for s in ext.store.segments("default.t") for f in s.files)
    assert ext.compact(grammar.Compact("default.t", "major")) == 2
    live = ext.store.segments("default.t", live_only=True)
    assert [s.id for s in live] == [2] and sorted(f.link for f in live[0].files) == links_before
    assert compacted == [([0, 1], 2)]
    assert ext.compact(grammar.Compact("default.t", "minor")) is None
    ext.delete_segments(grammar.DeleteSegments("default.t", (2,)))
    _add(ext, files / "a.csv")
    _add(ext, files / "sub")

    def broken(*_a):
        raise RuntimeError("index files locked")
    ext.hooks.on_compacted = broken
    with pytest.raises(ClientError) as e:
        ext.compact(grammar.Compact("default.t", "major"))
    assert "nothing changed" in str(e.value)
    assert [s.id for s in ext.store.segments("default.t", live_only=True)] == [4, 3]
    ext.hooks.on_compacted = lambda *_a: None
    assert ext.compact(grammar.Compact("default.t", "minor")) == 5
    ext.hooks.on_segment_files = lambda *_a: 7          # a hook that counted the rows
    _add(ext, files.parent / "more")
    assert ext.store.segments("default.t")[0].rows == 7
    assert ext.compact(grammar.Compact("default.t", "minor")) is None   # 5 is a result
    assert ext.compact(grammar.Compact("default.t", "major")) == 7
    (files.parent / "last.csv").write_text("4,z,5\n")
    _add(ext, files.parent / "last.csv")                  # 8
    with pytest.raises(ClientError) as e:
        ext.compact(grammar.Compact("default.t", "custom", (8, 5)))   # 5 was merged into 7
    assert e.value.sqlstate == "42000" and "no live segment 5" in str(e.value)
    assert ext.compact(grammar.Compact("default.t", "custom", (7, 8))) == 9
    assert [s.id for s in ext.store.segments("default.t", live_only=True)] == [9]


def test_recover_follows_the_catalog(ext, files):
    _add(ext, files / "a.csv")
    t = ext.get("default.t")
    link = links.local(ext.store.segments("default.t")[0].files[0].link)
    os.unlink(link)                                   # a link lost
    os.makedirs(os.path.join(t.location, ".staging_5"))   # a crash while staging
    os.makedirs(os.path.join(t.location, "seg_7"))        # renamed, never committed
    os.symlink(str(files / "a.csv"), os.path.join(t.location, "seg_7", "f00000_a.csv"))
    ext.recover()
    assert sorted(os.listdir(t.location)) == ["seg_0"] and os.path.islink(link)
    assert (files / "a.csv").exists()


def test_drop_unlinks_everything_but_the_files(ext, files):
    _add(ext, files)
    location = ext.get("default.t").location
    ext.drop("default.t")
    assert not os.path.exists(location) and ext.get("default.t") is None
    assert (files / "a.csv").exists() and (files / "sub" / "b.csv.gz").exists()


def _ctx(**conf):
    return StatementContext("s", "me", "default", conf, 10)


@pytest.mark.parametrize("sql,what", [
    ("INSERT INTO t VALUES (1, 'a')", "INSERT"), ("INSERT OVERWRITE TABLE t SELECT 1, 'a'",
                                                  "INSERT"),
    ("LOAD DATA INPATH '/x' INTO TABLE t", "LOAD DATA"), ("TRUNCATE TABLE t", "TRUNCATE"),
    ("UPDATE t SET v = 'a'", "UPDATE"), ("DELETE FROM t WHERE id = 1", "DELETE"),
    ("MERGE INTO t USING u ON t.id = u.id WHEN MATCHED THEN DELETE", "MERGE"),
    ("CREATE OR REPLACE TABLE t AS SELECT 1", "CTAS"),
    ("ALTER TABLE t ADD COLUMNS (z int)", "ADD COLUMNS"),
    ("ALTER TABLE t SET TBLPROPERTIES ('a'='b')", "'a'"),
    ("ALTER TABLE t UNSET TBLPROPERTIES ('format')", "'format'"),
    ("ALTER TABLE t SET TBLPROPERTIES ('csv.delimiter'=';')", None),
    ("WITH s AS (SELECT 1 AS id, 'a' AS v) INSERT INTO t SELECT * FROM s", "INSERT"),
])
def test_writes_are_refused(ext, sql, what):
    d = ExternalHandler(ext, 100_000)(_ctx(), sql)
    if what is None:          # allowed
        assert isinstance(d, Local)
        return
    assert isinstance(d, Reject) and d.sqlstate == "0A000", d
    assert what in d.message and "default.t" in d.message


def test_other_tables_and_plain_queries_are_not_decided(ext):
    h = ExternalHandler(ext)
    for sql in ("INSERT INTO u VALUES (1)", "SELECT * FROM t", "DESC u", "DROP TABLE u", "DESC",
                "DESC t id", "DESCRIBE FUNCTION abs", "SHOW SEGMENTS FOR TABLE u",
                "CREATE TABLE u (id int)", "ALTER TABLE u ADD COLUMNS (z int)"):
        assert h(_ctx(), sql) is None, sql
    for sql in ("DESC FORMATTED t", "DROP TABLE t", "SHOW SEGMENTS FOR TABLE t",
                "ALTER TABLE t RENAME TO t2", "ALTER TABLE t DROP COLUMNS (v)"):
        assert isinstance(h(_ctx(), sql), Local), sql
    d = h(_ctx(), "ALTER TABLE u ADD SEGMENT LOCATION '/x'")
    assert isinstance(d, Reject) and "default.u" in d.message


def test_segment_selection_rewrites_queries(ext, files):
    _add(ext, files / "a.csv")
    _add(ext, files / "sub")
    h = ExternalHandler(ext)
    d = h(_ctx(), "SET carbon.input.segments.default.t = 1")
    assert isinstance(d, Local) and d.settings == (("carbon.input.segments.default.t", "1"),)
    bad = h(_ctx(), "SET carbon.input.segments.default.t = 4")
    assert isinstance(bad, Reject) and "4" in bad.message
    q = h(_ctx(**dict(d.settings)), "SELECT count(*) FROM t AS x")
    link = ext.store.segments("default.t")[0].files[0].link
    assert isinstance(q, Rewrite) and link in q.sql and "a.csv" not in q.sql and "AS `x`" in q.sql
    assert q.before and q.before[0].startswith("REFRESH TABLE")
    assert h(_ctx(**dict(d.settings)), "SELECT 1") is None
    assert h(_ctx(**{"carbon.input.segments.default.t": "*"}), "SELECT * FROM t") is None


async def test_explain_under_a_selection_shows_what_is_sent(ext, files):
    _add(ext, files / "a.csv")
    conf = {"carbon.input.segments.default.t": "0"}
    d = ExternalHandler(ext)(_ctx(**conf), "EXPLAIN SELECT id FROM t")
    sent = []

    async def upstream(sql):
        sent.append(sql)
        return LocalResult((("plan", "string"),), [("== Physical Plan ==",)])
    text = (await d.runner(upstream)).rows[0][0]
    assert sent[0].startswith("EXPLAIN SELECT id FROM (SELECT")
    assert "No datamap hit" in text and "Segment selection: default.t segments 0" in text
    assert ExternalHandler(ext)(_ctx(), "EXPLAIN SELECT id FROM t") is None


def test_datamaps_follow_segments_and_schema_changes(ext, files):
    from types import SimpleNamespace
    calls = []
    guard = SimpleNamespace(begin_write=lambda tables: calls.append(("hold", tables)) or "tok",
                            end_write=lambda token: calls.append(("release", token)),
                            note_change=lambda table: calls.append(("changed", table)))
    ext.datamaps = SimpleNamespace(
        guard=guard, after_load=lambda table, overwrite=False: calls.append(
            ("after_load", table, overwrite)),
        invalidate_schemas=lambda table: calls.append(("schemas", table)),
        after_drop_table=lambda table: calls.append(("dropped", table)),
        catalog=SimpleNamespace(list_datamaps=lambda base_table: []),
        indexes=SimpleNamespace(suspend=lambda table: ext.calls.append(("suspend", table))))
    _add(ext, files)
    assert calls == [("hold", ["default.t"]), ("changed", "default.t"),
                     ("after_load", "default.t", False), ("release", "tok")]
    calls.clear()
    ext.calls.clear()
    ext.change_type("default.t", "id", "id", "bigint")
    assert dict(ext.get("default.t").fields)["id"] == "bigint"
    # no query may be pruned by the old values once Spark reads the new ones
    assert [c[0] for c in ext.calls][:2] == ["suspend", "recreate_source"]
    assert ("after_load", "default.t", True) in calls and ("schemas", "default.t") in calls
    with pytest.raises(ClientError) as e:
        ext.change_type("default.t", "id", "id2", "bigint")
    assert e.value.sqlstate == "0A000"
    calls.clear()
    ext.drop_columns("default.t", ["v"])
    assert ext.get("default.t").fields == (("id", "bigint"),)
    assert ext.get("default.t").header == ("v", "x", "id")      # the file layout stays
    assert ("after_load", "default.t", True) in calls
    ext.drop("default.t")
    assert calls[-1] == ("dropped", "default.t")


@pytest.mark.parametrize("sql", [
    "INSERT INTO {s} VALUES (1, 'a', 2)", "INSERT OVERWRITE TABLE {s} SELECT 1, 'a', 2",
    "DROP TABLE {s}", "DROP TABLE IF EXISTS {s}", "ALTER TABLE {s} SET LOCATION '/tmp/x'",
    "ALTER TABLE {s} RENAME TO default.elsewhere", "TRUNCATE TABLE {s}",
    "CREATE OR REPLACE TABLE {s} AS SELECT 1", "LOAD DATA INPATH '/x' INTO TABLE {s}"])
def test_the_hidden_source_table_is_changed_only_through_its_view(ext, sql):
    """The source table is listed by SHOW TABLES; an INSERT OVERWRITE of it would unlink
    every segment's links behind the catalog's back, a DROP would leave the view broken."""
    source = ext.get("default.t").source
    d = ExternalHandler(ext)(_ctx(), sql.format(s=source))
    assert isinstance(d, Reject) and d.sqlstate == "0A000", d
    assert source in d.message and "default.t" in d.message
    for allowed in (f"SELECT * FROM {source}", f"REFRESH TABLE {source}", f"DESC {source}"):
        assert ExternalHandler(ext)(_ctx(), allowed) is None


def test_a_temporary_view_of_the_same_name_is_not_restricted(ext, files):
    """Under a segment selection on default.t, an unqualified `t` that names the
    session's temporary view reads the view (Spark's resolution), not t's segments."""
    _add(ext, files / "a.csv")
    conf = {"carbon.input.segments.default.t": "0", "datamap.session.temp_views": "t"}
    h = ExternalHandler(ext)
    assert h(_ctx(**conf), "SELECT count(*) FROM t") is None
    q = h(_ctx(**conf), "SELECT count(*) FROM default.t JOIN t AS v ON v.id = t.id")
    assert isinstance(q, Rewrite) and "JOIN t AS v" in q.sql


@pytest.mark.parametrize("sql", ["SELECT count(*) FROM t TABLESAMPLE (10 PERCENT)",
                                 "SELECT x.a FROM t AS x(a, b)"])
def test_what_a_selection_cannot_keep_is_refused(ext, files, sql):
    """The segment subquery would drop a sample (every selected row returned) or the
    column aliases: refused with the reason, not answered otherwise."""
    _add(ext, files / "a.csv")
    d = ExternalHandler(ext)(_ctx(**{"carbon.input.segments.default.t": "0"}), sql)
    assert isinstance(d, Reject) and d.sqlstate == "0A000" and "default.t" in d.message, d


def test_add_segment_reports_its_stages_to_the_statement(ext, files):
    """ADD SEGMENT's own steps are stages of its operation log (proxy/routing/progress.py),
    as a datamap build's are: mapping, the index hook's step in between, publishing."""
    from proxy.routing import progress
    seen: list[str] = []
    ext.hooks.on_segment_files = lambda table, seg, pairs: seen.append(
        f"hook {table} {seg} {len(pairs)}") or 7
    with progress.reporting(seen.append):
        _add(ext, files)
    assert seen == ["stage: adding segment 0 to default.t: mapping 2 file(s) in place",
                    "hook default.t 0 2",
                    "stage: publishing segment 0 of default.t (7 rows, 2 file(s))",
                    "stage: segment 0 of default.t published"]
