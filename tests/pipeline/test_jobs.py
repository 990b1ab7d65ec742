"""Pipeline jobs on a real local SparkSession: full build and incremental refresh equal a
full recomputation; the inner-join delta rule with both sides changed; left joins;
compaction keeps answers with fewer rows; orphan cleanup. Definitions come from the
rewriter's compile_datamap over the tables' real schemas.
"""
from __future__ import annotations

import uuid

import pytest

from pipeline import (
    cleanup_orphans, compact, drop, full_build, incremental_append, list_files, list_segments,
    read_files, read_segments, reaggregate, table_schemas,
)
from pipeline.errors import PipelineError
from pipeline.files import quote_table, total_bytes
from pipeline.segments import segment_stats, table_exists
from rewriter import compile_datamap

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


def _defn(spark, db, name, sql, tables):
    return compile_datamap(name, sql, table_schemas(spark, tables), db)


def _tables(spark, db):
    tag = uuid.uuid4().hex[:6]
    sales, store = f"{db}.sales_{tag}", f"{db}.store_{tag}"
    spark.sql(f"CREATE TABLE {sales} (id INT, country STRING, qty INT, price DECIMAL(10,2), "
              "store_id INT) USING parquet")
    spark.sql(f"CREATE TABLE {store} (store_id INT, region STRING) USING parquet")
    return sales, store


def _rows(df):
    return sorted((tuple(r) for r in df.collect()), key=repr)


def _expected(spark, definition):
    cols = ", ".join(f"CAST(`{c.name}` AS {c.type}) AS `{c.name}`" for c in definition.columns)
    return _rows(spark.sql(f"SELECT {cols} FROM ({definition.build_sql({})}) q"))


def _answer(spark, definition, segments):
    return _rows(reaggregate(definition, read_segments(spark, definition, segments)))


def _agg_sales(spark, db, sales):
    return _defn(spark, db, f"agg_{sales.split('.')[1]}",
                 f"SELECT country, sum(qty), count(*), count(price), min(price), max(price), "
                 f"avg(price) FROM {sales} GROUP BY country", [sales])


def test_single_table_build_refresh_compact_cleanup(pipeline_spark, pipe_db):
    spark = pipeline_spark
    sales, _ = _tables(spark, pipe_db)
    spark.sql(f"INSERT INTO {sales} VALUES (1, 'cn', 5, 1.50, 1), (2, 'us', -3, NULL, 2), "
              "(2, 'us', -3, NULL, 2), (3, NULL, NULL, 7.25, NULL)")
    spark.sql(f"INSERT INTO {sales} VALUES (4, 'cn', 10, -2.00, 1)")
    d = _agg_sales(spark, pipe_db, sales)
    props = {"sort_columns": "country", "table_blocksize": "1 MB", "column_compressor": "ZSTD"}
    files0 = list_files(spark, sales)
    assert files0 and all(f.startswith("file:/") and not f.startswith("file:///") for f in files0)

    w0 = full_build(spark, d, "0", props)
    assert (w0.segment_id, w0.rows) == ("0", 3) and w0.files and w0.seconds > 0
    assert segment_stats(spark, d, "0") == (w0.rows, w0.files)
    assert _answer(spark, d, ["0"]) == _expected(spark, d)
    storage = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE EXTENDED {d.storage}").collect()}
    assert "parquet.block.size=1048576" in storage["Storage Properties"]
    assert "compression=zstd" in storage["Storage Properties"]
    assert all(f.endswith(".zstd.parquet") for f in w0.files), w0.files

    spark.sql(f"INSERT INTO {sales} VALUES (5, 'cn', 1, 9.99, 3), (6, 'fr', 2, 0.01, 3), "
              "(7, NULL, 4, NULL, 1)")
    files1 = list_files(spark, sales)
    new = sorted(set(files1) - set(files0))
    assert new
    r1 = incremental_append(spark, d, "1", {sales: new}, properties=props)
    assert not r1.full_rebuild and r1.write.rows == 3 and r1.terms == 1
    assert all(f.endswith(".zstd.parquet") for f in r1.write.files), r1.write.files
    expected = _expected(spark, d)
    assert _answer(spark, d, ["0", "1"]) == expected

    assert incremental_append(spark, d, "2", {sales: []}).write is None
    assert list_segments(spark, d) == ["0", "1"]

    w3 = compact(spark, d, ["0", "1"], "3", props)
    assert w3.rows == len(expected) < w0.rows + r1.write.rows
    assert _rows(read_segments(spark, d, ["3"])) == expected   # one row per group
    assert cleanup_orphans(spark, d, keep=["3"]) == ["0", "1"]
    assert list_segments(spark, d) == ["3"]
    with pytest.raises(PipelineError, match="no segments given"):
        compact(spark, d, [], "4")
    drop(spark, d)
    assert not table_exists(spark, d.table) and not table_exists(spark, d.storage)


def test_inner_join_delta_with_both_sides_changed(pipeline_spark, pipe_db):
    spark = pipeline_spark
    sales, store = _tables(spark, pipe_db)
    spark.sql(f"INSERT INTO {store} VALUES (1, 'north'), (2, 'south'), (2, 'south2'), "
              "(NULL, 'nowhere')")
    spark.sql(f"INSERT INTO {sales} VALUES (1, 'cn', 5, 1.50, 1), (2, 'us', 3, 2.00, 2), "
              "(3, 'us', 3, 2.00, 2), (4, 'fr', 1, 1.00, 4), (5, 'fr', 1, 1.00, NULL)")
    spj = _defn(spark, pipe_db, f"spj_{store.split('.')[1]}",
                f"SELECT s.id, s.qty, t.region FROM {sales} s JOIN {store} t "
                "ON s.store_id = t.store_id", [sales, store])
    agg = _defn(spark, pipe_db, f"aggj_{store.split('.')[1]}",
                f"SELECT t.region, sum(s.qty), count(*) FROM {sales} s, {store} t "
                "WHERE s.store_id = t.store_id GROUP BY t.region", [sales, store])
    assert spj.join_kinds == ("inner",) and not spj.is_aggregate and agg.is_aggregate
    old_sales, old_store = list_files(spark, sales), list_files(spark, store)
    full_build(spark, spj, "0")
    full_build(spark, agg, "0")

    # new sales match old and new stores; new stores match old and new sales
    spark.sql(f"INSERT INTO {sales} VALUES (6, 'cn', 7, 3.00, 2), (7, 'de', 8, 4.00, 5), "
              "(8, 'de', 9, 4.00, 1)")
    spark.sql(f"INSERT INTO {store} VALUES (4, 'east'), (5, 'west'), (2, 'south3')")
    new = {sales: sorted(set(list_files(spark, sales)) - set(old_sales)),
           store: sorted(set(list_files(spark, store)) - set(old_store))}
    # old files given for one table, derived ("every file not new") for the other
    r = incremental_append(spark, spj, "1", new, old_files={sales: old_sales})
    assert r.terms == 2 and not r.full_rebuild
    got = _rows(read_segments(spark, spj, ["0", "1"]))
    assert got == _expected(spark, spj)
    assert len(got) == 13   # new x new (7 x west) counted exactly once

    r = incremental_append(spark, agg, "1", new, old_files={sales: old_sales, store: old_store})
    assert r.terms == 2 and r.write.rows == 6       # one row per region inside the segment
    assert _answer(spark, agg, ["0", "1"]) == _expected(spark, agg)


def test_left_join_incremental_on_left_full_on_right(pipeline_spark, pipe_db):
    spark = pipeline_spark
    sales, store = _tables(spark, pipe_db)
    spark.sql(f"INSERT INTO {store} VALUES (1, 'north'), (2, 'south')")
    spark.sql(f"INSERT INTO {sales} VALUES (1, 'cn', 5, 1.50, 1), (2, 'us', 3, 2.00, 3)")
    d = _defn(spark, pipe_db, f"lj_{store.split('.')[1]}",
              f"SELECT s.id, t.region FROM {sales} s LEFT JOIN {store} t "
              "ON s.store_id = t.store_id", [sales, store])
    assert d.join_kinds == ("left",)
    before = list_files(spark, sales)
    full_build(spark, d, "0")
    spark.sql(f"INSERT INTO {sales} VALUES (3, 'fr', 1, 1.00, 2), (4, 'fr', 1, 1.00, NULL)")
    new = sorted(set(list_files(spark, sales)) - set(before))
    r = incremental_append(spark, d, "1", {sales: new})
    assert r.write.rows == 2
    assert _rows(read_segments(spark, d, ["0", "1"])) == _expected(spark, d)

    store_before = list_files(spark, store)
    spark.sql(f"INSERT INTO {store} VALUES (3, 'east')")   # sales id 2 stops being NULL-extended
    new_store = sorted(set(list_files(spark, store)) - set(store_before))
    r = incremental_append(spark, d, "2", {store: new_store})
    assert r.full_rebuild and r.write is None and store in r.reason
    assert list_segments(spark, d) == ["0", "1"]
    w = full_build(spark, d, "2")
    assert _rows(read_segments(spark, d, ["2"])) == _expected(spark, d) and w.rows == 4


def test_read_files_accepts_both_spellings(pipeline_spark, pipe_db):
    spark = pipeline_spark
    sales, _ = _tables(spark, pipe_db)
    spark.sql(f"INSERT INTO {sales} VALUES (1, 'a', 1, 1.00, 1)")
    first = list_files(spark, sales)
    spark.sql(f"INSERT INTO {sales} VALUES (2, 'b', 2, 2.00, 2)")
    spelled = ["file:///" + f[len("file:/"):] for f in first]
    assert [r.id for r in read_files(spark, sales, spelled).collect()] == [1]
    assert read_files(spark, sales, []).count() == 0
    assert quote_table("a.b") == "`a`.`b`"


def test_writes_count_rows_from_footers_and_small_deltas_need_no_shuffle(
        pipeline_spark, pipe_db, monkeypatch):
    """The row count of a written segment comes from its files' Parquet footers, not from
    a second counting job; a delta smaller than one task's
    input is read as one partition, so it is aggregated without a shuffle into one file."""
    import pipeline.table as table_mod
    spark = pipeline_spark
    sales, _ = _tables(spark, pipe_db)
    spark.sql(f"INSERT INTO {sales} VALUES (1, 'cn', 5, 1.50, 1), (2, 'us', 3, 2.00, 2)")
    d = _agg_sales(spark, pipe_db, sales)
    old = list_files(spark, sales)

    def no_counting_job(*_a, **_k):
        raise AssertionError("segment_stats ran a counting job")
    monkeypatch.setattr(table_mod, "segment_stats", no_counting_job)
    assert full_build(spark, d, "0").rows == 2
    for i in range(3):   # three inserts: several new files in one delta
        spark.sql(f"INSERT INTO {sales} VALUES ({10 + i}, 'fr', {i}, 1.00, 1), "
                  f"({20 + i}, 'cn', 1, 0.50, 3)")
    new = sorted(set(list_files(spark, sales)) - set(old))
    assert len(new) >= 3
    r = incremental_append(spark, d, "1", {sales: new}, {sales: old})
    assert r.write.rows == 2 and len(r.write.files) == 1
    assert _answer(spark, d, ["0", "1"]) == _expected(spark, d)
    # A job that died after writing files but before ADD PARTITION leaves a directory the
    # metastore does not list: the start-up cleanup removes it too.
    from pipeline.segments import _partition_dir
    fs, stray = _partition_dir(spark, d.storage, "77")
    spark.range(3).write.parquet(stray.toString())
    assert fs.exists(stray)
    assert cleanup_orphans(spark, d, keep=["0", "1"]) == ["77"]
    assert not fs.exists(stray)
    assert _answer(spark, d, ["0", "1"]) == _expected(spark, d)


def _reads_table_whole(df) -> bool:
    return "file_path" in df._jdf.queryExecution().analyzed().toString()


def test_new_files_of_plain_tables_are_read_directly(pipeline_spark, pipe_db, tmp_path,
                                                     monkeypatch):
    """Non-partitioned Parquet/ORC tables: only the given files are read (no listing and
    filtering of the whole table), with the table's columns and options, from any spelling
    and through paths that need escaping. Partitioned tables and CHAR columns (whose values
    the table read pads) take the whole-table read with a file filter; both give the rows
    Spark gives for the table."""
    spark = pipeline_spark
    db = f"dmpipe_esc_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE DATABASE {db} LOCATION '{tmp_path / 'a db%x'}'")
    try:
        cases = {"plain": ("USING parquet", True),
                 "orc": ("USING orc OPTIONS ('compression' = 'zlib')", True),
                 "padded": ("USING parquet", False),
                 "parted": ("USING parquet PARTITIONED BY (b)", False)}
        for name, (using, direct) in cases.items():
            t = f"{db}.{name}"
            b_type = "CHAR(4)" if name == "padded" else "STRING"
            spark.sql(f"CREATE TABLE {t} (a INT, b {b_type}) {using}")
            spark.sql(f"INSERT INTO {t} VALUES (1, 'x')")
            first = list_files(spark, t)
            spark.sql(f"INSERT INTO {t} VALUES (2, 'y'), (3, NULL)")
            new = sorted(set(list_files(spark, t)) - set(first))
            spelled = ["file:///" + f[len("file:/"):] for f in new]
            assert total_bytes(spark, spelled) == total_bytes(spark, new) > 0
            for files, want in ((first, [(1, "x")]), (spelled, [(2, "y"), (3, None)])):
                df = read_files(spark, t, files)
                assert _reads_table_whole(df) is not direct, name
                assert df.columns == ["a", "b"]
                got = sorted((r.a, r.b.rstrip() if r.b else r.b) for r in df.collect())
                assert got == want, name
                if name == "padded":
                    assert {r.b for r in df.collect()} - {None} <= {"x   ", "y   "}
        # a segment written under that escaped location: rows from its footers, no job
        import pipeline.table as table_mod

        def no_counting_job(*_a, **_k):
            raise AssertionError("segment_stats ran a counting job")
        monkeypatch.setattr(table_mod, "segment_stats", no_counting_job)
        d = _defn(spark, db, "agg_plain", f"SELECT b, count(*) FROM {db}.plain GROUP BY b",
                  [f"{db}.plain"])
        w = full_build(spark, d, "0")
        assert w.rows == 3 and len(w.files) >= 1, w
        # the segment lies under the table's real location (encoded in the URI), and reads
        spelled = {r.f for r in spark.sql(f"SELECT _metadata.file_path AS f FROM {d.storage}")
                   .collect()}
        assert set(w.files) == spelled and "/a%20db%25x/" in w.files[0], (w.files, spelled)
        assert _answer(spark, d, ["0"]) == _expected(spark, d)
        assert not (tmp_path / "a%20db%25x").exists()
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


def test_segments_are_registered_without_alter_table(pipeline_spark, pipe_db, monkeypatch):
    """A segment's partition goes straight to the metastore (no ALTER TABLE statement, which
    costs twice as much); a datamap table with statistics takes the statement, which keeps
    them right. Either way the segment reads back whole."""
    spark = pipeline_spark
    sales, _ = _tables(spark, pipe_db)
    spark.sql(f"INSERT INTO {sales} VALUES (1, 'cn', 5, 1.50, 1)")
    d = _agg_sales(spark, pipe_db, sales)
    statements = []
    real_sql = spark.sql

    def sql(query, *a, **k):
        statements.append(query)
        return real_sql(query, *a, **k)
    monkeypatch.setattr(spark, "sql", sql)
    full_build(spark, d, "0")
    assert not [q for q in statements if q.startswith("ALTER TABLE")], statements
    assert list_segments(spark, d) == ["0"]
    real_sql(f"ANALYZE TABLE {quote_table(d.storage)} COMPUTE STATISTICS")
    statements.clear()
    full_build(spark, d, "1")
    assert [q for q in statements if q.startswith("ALTER TABLE")], statements
    assert list_segments(spark, d) == ["0", "1"]
    assert _answer(spark, d, ["1"]) == _answer(spark, d, ["0"]) == _expected(spark, d)
