"""The rewriter's table-schema cache is bounded in bytes, and table names that failed to
load (clients can make up any number) do not pile up (issue 10, defect 3). No Spark."""
from __future__ import annotations

import pytest

from rewriter.bytecache import ByteLRU, text_size
from tests.datamaps.support import decision_service


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path, {})


def test_schema_cache_is_bounded_in_bytes(service, monkeypatch):
    wide = {f"c{i}": "string" for i in range(200)}
    tables = {f"t{i}": wide for i in range(50)}
    service._schemas_provider = lambda names: {"db1": {n.split(".")[1]: tables[n.split(".")[1]]
                                                       for n in names}}
    budget = 10 * text_size("db1.t0", wide)
    service._schema_cache = ByteLRU(budget, text_size)
    for i in range(50):
        got = service.schemas([f"db1.t{i}"])
        assert got == {"db1": {f"t{i}": wide}}        # what was just read, even if evicted
    assert service._schema_cache.bytes <= budget and len(service._schema_cache) <= 10
    assert "db1.t49" in service._schema_cache and "db1.t0" not in service._schema_cache


def test_failed_schema_loads_do_not_accumulate(service):
    service._schemas_provider = lambda names: (_ for _ in ()).throw(RuntimeError("no such table"))
    service.load_schemas([f"db1.made_up_{i}" for i in range(5000)])
    assert len(service._schema_failed) <= 4096
