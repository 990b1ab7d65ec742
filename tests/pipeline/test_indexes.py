"""pipeline/indexes.py and rewriter/prune/bloom.py against Spark itself: Python's xxhash64
equals Spark's for every type bloom filters support; built filters have no false
negatives and about the configured false-positive rate; minmax entries equal Spark's
min/max/NULL count per file; staged files are read by path and keyed by their final path.
Parquet and CSV tables, several files each (one module, the shared pipeline session)."""
from __future__ import annotations

import datetime
import decimal
import os
import shutil
import uuid

import pytest

from pipeline import list_files
from pipeline.errors import PipelineError
from pipeline.indexes import BloomSpec, build, minmax_supports
from rewriter.prune import bloom

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

TYPES = ["tinyint", "smallint", "int", "bigint", "string", "date", "boolean", "float",
         "double", "decimal(10,2)", "decimal(18,0)", "timestamp_ntz", "binary"]


def _values():
    """Rows of every supported type, with NULLs, negatives, extremes and long strings."""
    rows = []
    for i in range(-60, 60):
        rows.append((
            i, i * 250, i * 1_000_003, i * 10**15 + 7,
            None if i % 17 == 0 else ("é" * (i % 5)) + f"v{i}" + "x" * (abs(i) % 40),
            datetime.date(2020, 1, 1) + datetime.timedelta(days=i * 37),
            i % 2 == 0, i / 8, i * 1.1 if i else -0.0, decimal.Decimal(i * 101) / 100,
            decimal.Decimal(i) * 10**16, datetime.datetime(2021, 3, 4, 5, 6, 7) +
            datetime.timedelta(seconds=i * 3601, microseconds=i), bytes([abs(i) % 256]) * (i % 9)))
    rows.append((127, 32767, 2**31 - 1, 2**63 - 1) + (None,) * 9)
    rows.append((-128, -32768, -2**31, -2**63) + (None,) * 9)
    return rows


def test_python_xxhash64_equals_sparks_for_every_supported_type(pipeline_spark):
    spark = pipeline_spark
    cols = [f"c{i}" for i in range(len(TYPES))]
    schema = ", ".join(f"{c} {t}" for c, t in zip(cols, TYPES))
    df = spark.createDataFrame(_values(), schema)
    hashed = df.selectExpr(*cols, *[f"xxhash64({c}) AS h{i}" for i, c in enumerate(cols)])
    checked = 0
    for row in hashed.collect():
        for i, t in enumerate(TYPES):
            if row[i] is not None:
                assert bloom.spark_hash(row[i], t) == row[f"h{i}"], (t, row[i])
                checked += 1
    assert checked > 1400


@pytest.fixture(scope="module")
def tables(pipeline_spark, pipe_db):
    """A Parquet and a CSV table over the same 4 files' worth of rows (ids 0 .. 3999)."""
    spark = pipeline_spark
    tag = uuid.uuid4().hex[:6]
    data = spark.range(0, 4000).selectExpr(
        "id", "CAST(id % 97 AS INT) AS k", "IF(id % 13 = 0, NULL, concat('s', id)) AS s",
        "date_add(DATE'2024-01-01', CAST(id DIV 100 AS INT)) AS d",
        "CAST(id / 7 AS DECIMAL(12,3)) AS m", "CAST(id AS DOUBLE) / 3 AS x")
    out = {}
    for fmt in ("parquet", "csv"):
        name = f"{pipe_db}.t_{fmt}_{tag}"
        opts = "OPTIONS (header 'true')" if fmt == "csv" else ""
        spark.sql(f"CREATE TABLE {name} (id BIGINT, k INT, s STRING, d DATE, m DECIMAL(12,3),"
                  f" x DOUBLE) USING {fmt} {opts}")
        data.repartitionByRange(4, "id").write.insertInto(name)
        out[fmt] = name
    return out


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_minmax_and_blooms_agree_with_spark_per_file(pipeline_spark, tables, fmt):
    spark, table = pipeline_spark, tables[fmt]
    files = list_files(spark, table)
    assert len(files) == 4
    m, k = bloom.size_for(1000, 0.01)
    entries = build(spark, table, files, ["id", "k", "s", "d", "m", "x"],
                    [BloomSpec("id", m, k), BloomSpec("s", m, k)])
    truth = spark.sql(
        f"SELECT regexp_replace(_metadata.file_path, '^file://(localhost)?/', 'file:/') f, "
        f"count(*) n, min(id), max(id), min(s), max(s), CAST(min(d) AS STRING), "
        f"CAST(max(m) AS STRING), count_if(s IS NULL), collect_list(id), collect_list(s) "
        f"FROM {table} GROUP BY 1").collect()
    assert {r.f for r in truth} == set(entries)
    rate_hits = rate_tries = 0
    for r in truth:
        e = entries[r.f]
        assert e.size == os.stat(r.f[len("file:"):]).st_size and e.mtime_ns
        assert e.rows == r.n
        assert e.stats["id"] == (r[2], r[3], 0)
        assert e.stats["s"] == (r[4], r[5], r[8])
        assert e.stats["d"][0] == r[6] and e.stats["m"][1] == r[7]
        f_id = bloom.Bloom("bigint", m, k, e.blooms["id"])
        f_s = bloom.Bloom("string", m, k, e.blooms["s"])
        assert all(f_id.might_contain(v) for v in r[9])          # no false negatives
        assert all(f_s.might_contain(v) for v in r[10])
        absent = range(10**6, 10**6 + 5000)
        rate_hits += sum(f_id.might_contain(v) for v in absent)
        rate_tries += 5000
    assert rate_hits / rate_tries < 0.03                          # configured: 0.01


def test_only_the_given_files_are_read_and_empty_input_is_fine(pipeline_spark, tables):
    spark, table = pipeline_spark, tables["parquet"]
    one = list_files(spark, table)[:1]
    entries = build(spark, table, one, ["id"], [])
    n = spark.sql(f"SELECT count(*) FROM {table} WHERE _metadata.file_path = '{one[0]}'").first()[0]
    assert list(entries) == list(one) and entries[one[0]].rows == n < 4000
    assert build(spark, table, [], ["id"], []) == {}
    with pytest.raises(PipelineError, match="nope"):
        build(spark, table, one, ["nope"], [])


def test_staged_files_of_an_external_view_are_keyed_by_final_path(pipeline_spark, pipe_db):
    """Part A's layout: a view over a CSV source table whose segments are links."""
    spark = pipeline_spark
    tag = uuid.uuid4().hex[:6]
    root = spark._pipeline_tmp / f"ext_{tag}"
    (root / "src").mkdir(parents=True)
    orig = root / "orig.csv"
    orig.write_text("a,b\n" + "".join(f"{i},n{i}\n" for i in range(50)))
    source, view = f"{pipe_db}.src_{tag}", f"{pipe_db}.ext_{tag}"
    spark.sql(f"CREATE TABLE {source} (a INT, b STRING) USING csv OPTIONS (header 'true', "
              f"recursiveFileLookup 'true') LOCATION '{root / 'src'}'")
    spark.sql(f"CREATE VIEW {view} TBLPROPERTIES ('datamap.external.source'='{source}', "
              f"'datamap.external.format'='csv') AS SELECT a, b FROM {source}")
    staging = root / "src" / ".staging_1"
    staging.mkdir()
    os.symlink(orig, staging / "f.csv")
    final = f"file:{root}/src/seg_1/f.csv"
    entries = build(spark, view, [], ["a", "b"], [BloomSpec("b", 512, 3)],
                    staged={final: f"file:{staging}/f.csv"})
    e = entries[final]
    assert e.rows == 50 and e.stats["a"] == (0, 49, 0) and e.size == orig.stat().st_size
    assert bloom.Bloom("string", 512, 3, e.blooms["b"]).might_contain("n7")
    shutil.move(str(staging), str(root / "src" / "seg_1"))        # published: Spark sees it
    entries = build(spark, view, [final], ["a"], [])
    assert entries[final].stats["a"] == (0, 49, 0)


def test_char_columns_are_reported_as_char(pipeline_spark, pipe_db):
    from pipeline.indexes import column_types
    table = f"{pipe_db}.chars_{uuid.uuid4().hex[:6]}"
    pipeline_spark.sql(f"CREATE TABLE {table} (c CHAR(4), v VARCHAR(4)) USING parquet")
    types = column_types(pipeline_spark, table)
    assert types == {"c": "char(4)", "v": "string"}
    assert not minmax_supports(types["c"]) and not bloom.supports(types["c"])


@pytest.mark.parametrize("t, ok", [("int", True), ("decimal(38,2)", True), ("binary", False),
                                   ("array<int>", False), ("timestamp", True)])
def test_minmax_types(t, ok):
    assert minmax_supports(t) is ok


# -- IndexService (proxy/datamaps/indexes/commands.py) over this session: the hooks -------
@pytest.fixture
def service(pipeline_spark, tmp_path):
    from proxy.datamaps.catalog.store import Catalog
    from proxy.datamaps.indexes.commands import IndexService
    from proxy.datamaps.locks import KeyedLocks
    catalog = Catalog.in_state_dir(tmp_path)
    svc = IndexService(catalog, lambda: pipeline_spark, KeyedLocks())
    svc.store._max_age = 0.0
    yield svc
    catalog.close()


def _create(service, sql, db):
    from proxy.datamaps.ddl.parser import parse
    service.create(parse(sql), db)


def test_a_failed_sync_disables_and_rebuild_restores(pipeline_spark, pipe_db, service):
    spark = pipeline_spark
    table = f"{pipe_db}.sync_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE TABLE {table} (a INT, b STRING) USING parquet")
    spark.sql(f"INSERT INTO {table} VALUES (1, 'x'), (2, 'y')")
    _create(service, f"CREATE DATAMAP mm ON TABLE {table} USING 'minmax'", pipe_db)
    (info,) = service.store.indexes_on(table)
    assert info.enabled and info.columns == ("a", "b")
    spark.sql(f"INSERT INTO {table} VALUES (3, 'z')")
    service.after_load(table)
    assert len(service.store.file_stats(table)) == len(list_files(spark, table))
    location = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").where("col_name = 'Location'") \
        .first()[1]
    bad = location.replace("file:", "") + "/part-zz-corrupt.parquet"
    with open(bad, "wb") as f:
        f.write(b"not parquet at all")
    service.after_load(table)                       # the load stands; the index waits
    (info,) = service.store.indexes_on(table)
    assert not info.enabled and "indexing files of" in info.status_reason
    assert service.store.file_stats(table) == {}    # a disabled index prunes nothing
    os.remove(bad)
    service.rebuild(info)
    (info,) = service.store.indexes_on(table)
    assert info.enabled and len(service.store.file_stats(table)) == len(list_files(spark, table))


def test_segment_hooks_of_an_external_table(pipeline_spark, pipe_db, service):
    """What part A calls: index staged files under final paths; compaction re-maps;
    files gone are forgotten. Also: a bloom filter over an mv-free view."""
    spark = pipeline_spark
    tag = uuid.uuid4().hex[:6]
    root = spark._pipeline_tmp / f"hook_{tag}"
    (root / "src").mkdir(parents=True)
    source, view = f"{pipe_db}.hsrc_{tag}", f"{pipe_db}.hext_{tag}"
    spark.sql(f"CREATE TABLE {source} (a INT, b STRING) USING csv OPTIONS (header 'true', "
              f"recursiveFileLookup 'true') LOCATION '{root / 'src'}'")
    spark.sql(f"CREATE VIEW {view} TBLPROPERTIES ('datamap.external.source'='{source}') AS "
              f"SELECT a, b FROM {source}")
    _create(service, f"CREATE DATAMAP bf ON TABLE {view} USING 'bloomfilter' "
                     "DMPROPERTIES('INDEX_COLUMNS'='b', 'BLOOM_SIZE'='100')", pipe_db)
    finals = []
    for seg in ("1", "2"):
        orig = root / f"orig{seg}.csv"
        orig.write_text("a,b\n" + "".join(f"{i},s{seg}_{i}\n" for i in range(20)))
        staging = root / "src" / f".staging_{seg}"
        staging.mkdir()
        os.symlink(orig, staging / "f.csv")
        final = f"file:{root}/src/seg_{seg}/f.csv"
        service.on_segment_files(view, seg, [(f"file:{staging}/f.csv", final)])
        staging.rename(root / "src" / f"seg_{seg}")
        finals.append(final)
    stats = service.store.file_stats(view)
    assert set(stats) == set(finals)
    assert stats[finals[1]].columns["b"].bloom.might_contain("s2_7")
    (info,) = service.store.indexes_on(view)
    service.on_compacted(view, ["1", "2"], "3")
    assert set(service.store.segments(info).values()) == {"3"}
    service.on_files_gone(view, [finals[0]])
    assert set(service.store.file_stats(view)) == {finals[1]}


def test_a_type_change_rebuilds_entries_under_the_new_type(pipeline_spark, pipe_db, service):
    """An external table's CHANGE type keeps the files (same paths, sizes, dates) but not
    the values: the entries are rebuilt, and the bounds decoded and the blooms probed as
    the type the build read (a bigint bloom probed as int would rule out every file)."""
    spark = pipeline_spark
    tag = uuid.uuid4().hex[:6]
    root = spark._pipeline_tmp / f"retype_{tag}"
    (root / "src" / "seg_0").mkdir(parents=True)
    (root / "f.csv").write_text("a,b\n7,x\n8,y\n")
    os.symlink(root / "f.csv", root / "src" / "seg_0" / "f.csv")
    source, view = f"{pipe_db}.rsrc_{tag}", f"{pipe_db}.rext_{tag}"

    def declare(a_type, b_type):
        spark.sql(f"DROP TABLE IF EXISTS {source}")
        spark.sql(f"CREATE TABLE {source} (a {a_type}, b {b_type}) USING csv OPTIONS (header "
                  f"'true', recursiveFileLookup 'true') LOCATION '{root / 'src'}'")
        spark.sql(f"CREATE OR REPLACE VIEW {view} TBLPROPERTIES ('datamap.external.source'="
                  f"'{source}') AS SELECT a, b FROM {source}")

    declare("INT", "STRING")
    _create(service, f"CREATE DATAMAP bf ON TABLE {view} USING 'bloomfilter' "
                     "DMPROPERTIES('INDEX_COLUMNS'='a', 'BLOOM_SIZE'='100')", pipe_db)
    _create(service, f"CREATE DATAMAP mm ON TABLE {view} USING 'minmax' "
                     "DMPROPERTIES('INDEX_COLUMNS'='b')", pipe_db)
    declare("BIGINT", "INT")                  # 'x' and 'y' now read as NULL
    service.after_load(view, overwrite=True)  # what ExternalTables.change_type calls
    bf, mm = service.store.indexes_on(view)
    assert bf.enabled and bf.column_types == (("a", "bigint"),)
    assert mm.enabled and mm.column_types == (("b", "int"),)
    (stats,) = service.store.file_stats(view).values()
    assert stats.columns["a"].bloom.might_contain(7)
    nulls = spark.sql(f"SELECT count(*) FROM {view} WHERE b IS NULL").first()[0]
    assert stats.columns["b"].nulls == nulls == 2
    declare("BIGINT", "STRING")               # REBUILD after a change made outside
    service.rebuild(mm)
    (stats,) = service.store.file_stats(view).values()
    assert stats.columns["b"].low == "x" and service.store.indexes_on(view)[1].column_types \
        == (("b", "string"),)
    declare("BIGINT", "BINARY")               # a type the index does not take: disabled
    service.after_load(view, overwrite=True)
    bf, mm = service.store.indexes_on(view)
    assert bf.enabled and not mm.enabled and "binary" in mm.status_reason
