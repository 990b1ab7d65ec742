"""Index datamap DDL without Spark: what parses, what fails with which SQLSTATE."""
import pytest

from proxy.datamaps.ddl.index_providers import CreateIndexDatamap, bloom_settings
from proxy.datamaps.ddl.parser import DdlError, Name, parse


def test_minmax_defaults_to_every_column():
    stmt = parse("CREATE DATAMAP IF NOT EXISTS fact_dm1 ON TABLE db.fact USING 'minmax'")
    assert stmt == CreateIndexDatamap(Name("fact_dm1"), Name("fact", "db"), "minmax", True)
    assert stmt.columns is None


def test_bloomfilter_with_carbondata_properties():
    stmt = parse("create datamap dm2 on table fact using 'BloomFilter' dmproperties("
                 "'INDEX_COLUMNS'=' Col1 , c2', 'BLOOM_SIZE'='1000', 'BLOOM_FPP'='0.01', "
                 "'BLOOM_COMPRESS'='false')")
    assert stmt.provider == "bloomfilter" and stmt.columns == ("col1", "c2")
    s = bloom_settings(stmt.props)
    assert (s.size, s.fpp, s.compress) == (1000, 0.01, False)


def test_deferred_rebuild_is_lazy():
    stmt = parse("CREATE DATAMAP d ON TABLE t USING 'minmax' WITH DEFERRED REBUILD "
                 "DMPROPERTIES('INDEX_COLUMNS'='a')")
    assert stmt.lazy and stmt.columns == ("a",)


def test_drop_show_rebuild_share_the_mv_statements():
    assert parse("DROP DATAMAP IF EXISTS d ON TABLE t").on_table == Name("t")
    assert parse("SHOW DATAMAP ON TABLE db.t").on_table == Name("t", "db")
    assert parse("REBUILD DATAMAP d").name == Name("d")


@pytest.mark.parametrize("sql, state, words", [
    ("CREATE DATAMAP d USING 'minmax'", "42000", "needs ON TABLE"),
    ("CREATE DATAMAP d ON TABLE t USING 'bloomfilter'", "42000", "INDEX_COLUMNS"),
    ("CREATE DATAMAP d ON TABLE t USING 'minmax' AS SELECT 1", "42000", "takes no AS query"),
    ("CREATE DATAMAP d ON TABLE t USING 'minmax' DMPROPERTIES('BLOOM_SIZE'='9')", "42000",
     "'bloom_size'='9' for datamap d: not a property of 'minmax'"),
    ("CREATE DATAMAP d ON TABLE t USING 'minmax' DMPROPERTIES('INDEX_COLUMNS'='a,a')",
     "42000", "named twice"),
    ("CREATE DATAMAP d ON TABLE t USING 'minmax' DMPROPERTIES('INDEX_COLUMNS'='a b')",
     "42000", "column names"),
    ("CREATE DATAMAP d ON TABLE t USING 'bloomfilter' DMPROPERTIES('INDEX_COLUMNS'='a', "
     "'BLOOM_SIZE'='lots')", "42000", "'bloom_size'='lots'"),
    ("CREATE DATAMAP d ON TABLE t USING 'bloomfilter' DMPROPERTIES('INDEX_COLUMNS'='a', "
     "'BLOOM_FPP'='0')", "42000", "false-positive rate"),
    ("CREATE DATAMAP d ON TABLE t USING 'bloomfilter' DMPROPERTIES('INDEX_COLUMNS'='a', "
     "'BLOOM_COMPRESS'='yes')", "42000", "'true' or 'false'"),
    ("CREATE DATAMAP d ON TABLE t USING 'lucene'", "0A000", "minmax, bloomfilter"),
])
def test_bad_statements(sql, state, words):
    with pytest.raises(DdlError) as info:
        parse(sql)
    assert info.value.sqlstate == state and words in info.value.message
