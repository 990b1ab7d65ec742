"""A CREATE DATAMAP running now shows in SHOW DATAMAP from its first moment, on every
replica sharing the catalog, before the datamap's own row exists; a process that dies
mid-CREATE leaves no phantom row beyond its time to live (catalog/creating.py,
ddl/creating.py). A real CREATE seen from a second session: tests/e2e/test_build_progress.py."""
from __future__ import annotations

import re
import time

import pytest

from proxy.datamaps.catalog.creating import Creating
from proxy.datamaps.catalog.records import format_time
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.ddl import creating as running_create
from proxy.datamaps.ddl.show import show_datamaps
from tests.support.catalog import create_datamap


@pytest.fixture
def catalogs(catalog_location):
    """Two replicas' catalogs over one store."""
    a, b = Catalog(catalog_location), Catalog(catalog_location)
    yield a, b
    a.close()
    b.close()


def _entry(token="t1", name="agg", started=None):
    return Creating(token, "db1", name, "mv", {"sort_columns": "country"}, ("db1.sales",),
                    time.time() if started is None else started)


def _show(catalog, on_table=None):
    records = catalog.list_datamaps(base_table=on_table)
    return show_datamaps(catalog, records, on_table=on_table).rows


def test_a_running_create_shows_before_its_row_and_on_other_replicas(catalogs):
    here, there = catalogs
    entry = _entry(started=time.time() - 12)
    here.begin_creating(entry, ttl=30)
    row, = _show(there)                  # another replica, no datamap row yet
    assert row[:9] == ("agg", "mv", "db1.agg_table", "'sort_columns'='country'", "DISABLED",
                       "NA", "CREATE DATAMAP has not finished", "", "true")
    assert re.fullmatch(rf"being created since {re.escape(format_time(entry.started))} "
                        r"\(1[23] s\)", row[9]), row
    assert [r[0] for r in _show(there, "db1.sales")] == ["agg"]
    assert _show(there, "db1.other") == []
    # its row exists and its first segment is written: one row, both said
    create_datamap(here)
    sid = here.begin_segment("db1", "agg", {"db1.sales": ["0"]})
    row, = _show(there)
    assert row[4] == "DISABLED" and row[6] == "not built yet"
    assert re.fullmatch(r"being created since .* \(\d+ s\); segment "
                        rf"{sid} since .* \(\d+ s\)", row[9]), row
    here.end_creating(entry.token)
    assert _show(there)[0][9].startswith(f"segment {sid} since ")


def test_a_crashed_create_leaves_no_phantom_row(catalogs):
    here, there = catalogs
    here.begin_creating(_entry("dead"), ttl=0.5)     # its process dies: never renewed
    assert [r[0] for r in _show(there)] == ["agg"]
    time.sleep(0.7)
    assert _show(there) == [] and there.creating() == []
    there.begin_creating(_entry("alive", name="other"), ttl=30)   # the next CREATE cleans up
    keys = [e.token for e in there.creating()]
    assert keys == ["alive"]
    with here._tx(write=False) as c:
        assert [k for k, in c.execute("SELECT key FROM meta WHERE key LIKE 'creating:%'")] == [
            "creating:alive"]


def test_the_statement_keeps_its_row_alive_and_removes_it_however_it_ends(catalogs):
    here, there = catalogs
    with running_create.creating(here, "db1", "agg", "mv", {}, ["db1.sales"], ttl=0.6) as run:
        time.sleep(1.0)                              # longer than its time to live: renewed
        assert [e.name for e in there.creating()] == ["agg"]
        run.moved("db2")                             # its SELECT's first table's database
        assert [e.qualified for e in there.creating()] == ["db2.agg"]
    assert there.creating() == []
    with pytest.raises(RuntimeError):
        with running_create.creating(here, "db1", "agg", "mv", {}, ["db1.sales"]):
            assert len(there.creating()) == 1
            raise RuntimeError("the build failed")
    assert there.creating() == []
