"""The rewriter's table-schema cache is bounded in bytes, and table names that failed to
load (clients can make up any number) do not pile up. No Spark."""
from __future__ import annotations

from proxy.datamaps.schemas import SchemaCache
from rewriter.bytecache import text_size
from tests.support.datamaps import no_spark


def _cache(provider, **kw):
    cache = SchemaCache(no_spark, provider, **kw)
    yield cache
    cache.close()


def test_schema_cache_is_bounded_in_bytes():
    wide = {f"c{i}": "string" for i in range(200)}
    tables = {f"t{i}": wide for i in range(50)}
    budget = 10 * text_size("db1.t0", wide)
    for cache in _cache(lambda names: {"db1": {n.split(".")[1]: tables[n.split(".")[1]]
                                               for n in names}}, budget=budget):
        for i in range(50):
            got = cache.schemas([f"db1.t{i}"])
            assert got == {"db1": {f"t{i}": wide}}        # what was just read, even if evicted
        assert cache.bytes <= budget and len(cache) <= 10
        assert "db1.t49" in cache and "db1.t0" not in cache


def test_failed_schema_loads_do_not_accumulate():
    for cache in _cache(lambda names: (_ for _ in ()).throw(RuntimeError("no such table"))):
        cache.load([f"db1.made_up_{i}" for i in range(5000)])
        assert cache.failed_count() <= 4096
