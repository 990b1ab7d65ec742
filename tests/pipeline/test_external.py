"""pipeline/external.py and the external-view resolution in pipeline/files.py, on the
pipeline tests' SparkSession: the view over a hidden CSV table of symbolic links (one
directory per segment, one gzip'ed), its files as Spark's `_metadata.file_path` spells
them, and reading only some of them."""
from __future__ import annotations

import gzip
import os

import pytest

from pipeline import external, list_files, read_files, table_layout
from pipeline.files import external_source, file_path_column, in_files, read_other_files

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def ext(pipeline_spark, pipe_db, tmp_path_factory):
    spark, root = pipeline_spark, tmp_path_factory.mktemp("ext")
    data, location = root / "data", root / "links"
    data.mkdir()
    (data / "a.csv").write_text("x1;1;one\nx2;2;two\n")
    with gzip.open(data / "b.csv.gz", "wt") as f:
        f.write("x3;3;three\n")
    links = {}
    for seg, name in ((0, "a.csv"), (1, "b.csv.gz")):
        os.makedirs(location / f"seg_{seg}")
        link = location / f"seg_{seg}" / f"f00000_{name}"
        os.symlink(data / name, link)
        links[seg] = f"file:{link}"
    view, source = f"{pipe_db}.t", f"{pipe_db}.t__csv_1"
    external.create(spark, view, source, [("extra", "string"), ("id", "int"), ("name", "string")],
                    [("id", "int"), ("name", "string")],
                    {"sep": ";", "header": "false", "recursiveFileLookup": "true"}, str(location))
    return spark, view, source, links, str(location)


def test_the_view_reads_every_segment(ext):
    spark, view, source, links, _ = ext
    assert external_source(spark, view) == source and external_source(spark, source) is None
    rows = sorted(tuple(r) for r in spark.table(view).collect())
    assert rows == [(1, "one"), (2, "two"), (3, "three")]
    assert spark.table(view).columns == ["id", "name"]


def test_files_are_the_links(ext):
    spark, view, _, links, location = ext
    assert list_files(spark, view) == tuple(sorted(links.values()))
    layout = table_layout(spark, view)
    assert layout["roots"] == [f"file:{location}"] and not layout["hive"]
    assert layout["external"] == external_source(spark, view)


def test_read_only_some_files(ext):
    spark, view, source, links, _ = ext
    df = read_files(spark, view, [links[1]])
    assert df.columns == ["id", "name"] and [tuple(r) for r in df.collect()] == [(3, "three")]
    assert read_files(spark, view, []).count() == 0
    rows = spark.table(source).where(in_files(spark, view, [links[0]])).select(
        file_path_column(spark, view)).distinct().collect()
    assert [r[0] for r in rows] == [links[0]]
    others = read_other_files(spark, view, [links[1]])
    assert others.columns == ["id", "name"]
    assert sorted(tuple(r) for r in others.collect()) == [(1, "one"), (2, "two")]


def test_read_links_by_path_even_in_a_hidden_directory(ext):
    spark, _, source, links, location = ext
    staged = os.path.join(location, ".staging_9")
    os.makedirs(staged)
    os.symlink(os.readlink(links[1][len("file:"):]), os.path.join(staged, "f00000_b.csv.gz"))
    df = external.read_links(spark, source, [f"file:{staged}/f00000_b.csv.gz", links[0]])
    assert sorted(r["id"] for r in df.collect()) == [1, 2, 3] and df.columns[0] == "extra"
    assert spark.table(source).count() == 3          # the listing still skips it
    os.unlink(os.path.join(staged, "f00000_b.csv.gz")), os.rmdir(staged)


def test_a_new_type_and_a_new_name(ext):
    spark, view, source, _, location = ext
    external.recreate_source(spark, view, source, [("extra", "string"), ("id", "string"),
                                                   ("name", "string")],
                             [("id", "string"), ("name", "string")],
                             {"sep": ";", "header": "false", "recursiveFileLookup": "true"},
                             location)
    assert dict(spark.table(view).dtypes)["id"] == "string"
    external.rename(spark, view, view + "2")
    assert spark.table(view + "2").count() == 3 and not external.exists(spark, view)
    external.drop(spark, view + "2", source)
    assert not external.exists(spark, source) and os.listdir(location)
