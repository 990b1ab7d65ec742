"""DMPROPERTIES spellings (pipeline/properties.py): pure logic, no Spark."""
import pytest

from pipeline.properties import HONOURED, NO_OPS, PropertyError, check, parquet_options, size_mb


@pytest.mark.parametrize("text, mb", [("256", 256), ("256 MB", 256), ("128MB", 128), ("64mb", 64),
                                      ("1 GB", 1024), ("2g", 2048), (" 32 m ", 32)])
def test_sizes_in_carbondata_spellings(text, mb):
    assert size_mb(text) == mb


@pytest.mark.parametrize("text", ["big", "", "1.5 GB", "-1", "256 KB", "MB"])
def test_not_sizes(text):
    assert size_mb(text) is None


def test_honoured_properties_become_parquet_options():
    assert parquet_options({"table_blocksize": "1 GB", "column_compressor": "NONE"}) == {
        "parquet.block.size": str(1024 ** 3), "compression": "uncompressed"}
    assert parquet_options({"local_dictionary_enable": "false"}) == {}


def test_every_guide_property_is_accepted_and_documented():
    guide = ["sort_columns", "sort_scope", "table_blocksize", "flat_folder", "long_string_columns",
             "local_dictionary_enable", "local_dictionary_threshold", "local_dictionary_exclude",
             "inverted_index", "no_inverted_index", "column_compressor"]
    assert all(p in HONOURED or p in NO_OPS for p in guide)
    check({"local_dictionary_enable": "FALSE", "flat_folder": "True", "sort_scope": "GLOBAL_SORT"})
    with pytest.raises(PropertyError) as e:
        check({"table_blocksize": "0 MB"})
    assert e.value.what == "'table_blocksize'='0 MB'"
