"""The catalog's change marks (rewrite_marks): every write that changes what a rewrite index
entry is made from (the datamap's row, its visible segments, its base tables' live
segments, its query rewrite switch) changes that datamap's marks in the same commit. The
index trusts the marks instead of reading rows, so a write that forgot to stamp would
leave a datamap answering from old segments: each step here compares the rows as they are
with the marks."""
from __future__ import annotations

import json

import pytest

from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.rewrite.entries import Marks
from tests.support.catalog import DEFN, create_datamap as _create


def _rows(c: Catalog) -> dict[str, tuple]:
    """Per datamap, everything an entry is made from, read the slow way."""
    with c._tx(write=False) as tx:
        dms = {f"{r['db']}.{r['name']}": r for r in tx.execute("SELECT * FROM datamaps")}
        out = {}
        for n, r in dms.items():
            segs = tx.execute("SELECT * FROM dm_segments WHERE db = ? AND name = ? AND "
                              "visible = 1 ORDER BY id", (r["db"], r["name"])).fetchall()
            base = tuple(tuple(x[0] for x in tx.execute(
                "SELECT id FROM base_segments WHERE tbl = ? AND status = 'SUCCESS' ORDER BY id",
                (t,))) for t in json.loads(r["base_tables"]))
            row = tuple(v for k, v in zip(r.keys(), r) if k != "changed")
            out[n] = (row, tuple(tuple(s) for s in segs), base)
    off = c.rewrite_off()
    return {n: v + (n in off,) for n, v in out.items()}


def _marks(c: Catalog) -> dict[str, tuple]:
    _, rows, base, off = c.rewrite_marks()
    return {n: (changed, tuple(base.get(t, 0) for t in json.loads(tables)), n in off)
            for n, (changed, tables) in rows.items()}


def _step(c: Catalog, before: tuple[dict, dict]) -> tuple[dict, dict]:
    rows, marks = _rows(c), _marks(c)
    for n in rows:
        if n in before[0] and rows[n] != before[0][n]:
            assert marks[n] != before[1][n], f"{n} changed without a change of its marks"
    return rows, marks


def test_every_write_an_index_entry_reads_changes_its_marks(catalog_location):
    c = Catalog(catalog_location)
    try:
        _create(c)
        _create(c, "other", tables=("db1.sales", "db1.items"))
        _create(c, "lazy", lazy=True)
        seen = _step(c, ({}, {}))
        c.add_base_segment("db1.sales", ["file:/w/a.parquet"])
        seen = _step(c, seen)
        for name in ("agg", "lazy"):
            sid = c.begin_segment("db1", name, {"db1.sales": ["0"]})
            seen = _step(c, seen)
            c.publish_segment("db1", name, sid, rows=3, kind="built")
            seen = _step(c, seen)
        c.add_base_segment("db1.sales", ["file:/w/b.parquet"])
        seen = _step(c, seen)
        sid = c.begin_segment("db1", "agg", {"db1.sales": ["1"]})
        c.publish_segment("db1", "agg", sid, rows=1)
        seen = _step(c, seen)
        sid = c.begin_segment("db1", "agg", {"db1.sales": ["0", "1"]})
        c.publish_segment("db1", "agg", sid, rows=4, kind="compacted", supersedes=["0", "1"],
                          files=["file:/w/agg/2.parquet"])
        seen = _step(c, seen)
        sid = c.begin_segment("db1", "agg", {"db1.sales": ["1"]})
        c.fail_segment("db1", "agg", sid, "boom")
        seen = _step(c, seen)
        c.set_status("db1", "agg", "ENABLED")
        seen = _step(c, seen)
        c.disable_on_table_change("db1.sales", "base table changed")
        seen = _step(c, seen)
        c.set_rewrite("db1", "agg", False)
        seen = _step(c, seen)
        c.set_rewrite("db1", "agg", True)
        seen = _step(c, seen)
        c.update_definition("db1", "other", DEFN)
        seen = _step(c, seen)
        c.relocate_files("db1", "agg", "file:/w", "file:/v")
        seen = _step(c, seen)
        c.mark_dropped("db1", "agg", [sid])
        seen = _step(c, seen)
        c.mark_base_deleted("db1.sales", ["0"])
        seen = _step(c, seen)
        c.invalidate_datamap("db1", "agg", "zone changed")
        seen = _step(c, seen)
        c.forget_base_table("db1.sales")
        seen = _step(c, seen)
        c.add_base_segment("db1.sales", ["file:/w/c.parquet"])    # the table made again
        seen = _step(c, seen)
        c.drop_datamap("db1", "agg")
        _create(c)                                               # the same name again
        sid = c.begin_segment("db1", "agg", {"db1.sales": ["0"]})
        c.publish_segment("db1", "agg", sid, rows=3, kind="built")
        rows, marks = _rows(c), _marks(c)
        assert rows["db1.agg"] != seen[0]["db1.agg"] and marks["db1.agg"] != seen[1]["db1.agg"]
    finally:
        c.close()


@pytest.mark.parametrize("catalog_location", ["sqlite"], indirect=True)
def test_marks_are_the_version_of_the_last_change(catalog_location):
    """A mark is the catalog version its write committed: a datamap dropped and created
    again never has the marks of the one before."""
    c = Catalog(catalog_location)
    try:
        _create(c)
        version, rows, base, _ = c.rewrite_marks()
        assert rows["db1.agg"][0] == version == c.version()
        c.add_base_segment("db1.sales", ["file:/w/a.parquet"])
        version, rows, base, _ = c.rewrite_marks()
        assert base == {"db1.sales": version} and rows["db1.agg"][0] < version
    finally:
        c.close()


def test_the_marks_since_a_version_are_what_was_written_after_it(catalog_location):
    """The index reads only the marks written since its last read (rewrite_changes): a
    change of one datamap or one base table reads that datamap or the datamaps over that
    table, and a dropped datamap leaves a mark of its own."""
    c = Catalog(catalog_location)
    try:
        _create(c)
        _create(c, "other", tables=("db1.sales", "db1.items"))
        marks = Marks()
        assert list(marks.advance(c)) == ["db1.agg", "db1.other"]
        version, rows, _, dropped = c.rewrite_changes(-1)
        assert set(rows) == {"db1.agg", "db1.other"} and not dropped
        c.set_rewrite("db1", "other", False)
        version, rows, base, dropped = c.rewrite_changes(version)
        assert set(rows) == {"db1.other"} and rows["db1.other"][2] and not base
        assert list(marks.advance(c)) == ["db1.other"] and marks.off == {"db1.other"}
        c.add_base_segment("db1.items", ["file:/w/i.parquet"])
        c.drop_datamap("db1", "agg")
        version, rows, base, dropped = c.rewrite_changes(version)
        assert not rows and set(base) == {"db1.items"} and dropped == {"db1.agg"}
        assert c.rewrite_changes(version)[1:] == ({}, {}, set())
        assert set(marks.advance(c)) == {"db1.agg", "db1.other"}
        assert set(marks.marks) == {"db1.other"} and marks.version == version
        assert not marks.advance(c)
    finally:
        c.close()
