"""The dependency graph of datamaps on datamaps (proxy/datamaps/upkeep/stacking.py): order,
cycles, DROP refusal, and freshness through the levels on a real SQLite catalog."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.upkeep.stacking import (
    CycleError, check_create, check_drop, dependents, depends_on, refresh_order, stale_below,
    table_levels,
)
from proxy.errors import ClientError


def rec(name: str, *tables: str, db: str = "d"):
    return SimpleNamespace(db=db, name=name, qualified=f"{db}.{name}",
                           table=f"{db}.{name}_table", base_tables=tables)


# minute -> hour -> day over d.ev; month joins day to a dimension; other is unrelated
HIERARCHY = [rec("month", "d.day_table", "d.dim"), rec("day", "d.hour_table"),
             rec("hour", "d.minute_table"), rec("minute", "d.ev"), rec("other", "d.ev")]


def test_refresh_order_puts_every_datamap_after_what_it_reads():
    assert refresh_order(HIERARCHY) == ["d.minute", "d.other", "d.hour", "d.day", "d.month"]
    assert refresh_order([]) == []


def test_levels_of_tables():
    assert table_levels(HIERARCHY) == {
        "d.ev": 0, "d.dim": 0, "d.minute_table": 1, "d.other_table": 1, "d.hour_table": 2,
        "d.day_table": 3, "d.month_table": 4}


def test_dependents_direct_and_transitive():
    assert dependents(HIERARCHY, "d.hour") == ["d.day"]
    assert dependents(HIERARCHY, "d.minute", transitive=True) == ["d.day", "d.hour", "d.month"]
    assert dependents(HIERARCHY, "d.month", transitive=True) == []
    assert dependents(HIERARCHY, "d.other") == []


def test_cycle_is_refused_not_looped():
    loop = [rec("a", "d.b_table"), rec("b", "d.c_table"), rec("c", "d.a_table"),
            rec("x", "d.ev")]
    with pytest.raises(CycleError, match="d.a, d.b, d.c"):
        refresh_order(loop)
    with pytest.raises(CycleError):
        table_levels([rec("self", "d.self_table")])


def test_drop_refused_while_others_read_it():
    with pytest.raises(ClientError) as e:
        check_drop(HIERARCHY, HIERARCHY[1])      # day: month reads it
    assert e.value.sqlstate == "2BP01"
    assert "d.day" in str(e.value) and "d.month reads its table d.day_table" in str(e.value)
    two = HIERARCHY + [rec("week", "d.day_table")]
    with pytest.raises(ClientError, match="datamaps d.month, d.week read"):
        check_drop(two, two[1])
    check_drop(HIERARCHY, HIERARCHY[0])          # the top one goes
    check_drop(HIERARCHY, HIERARCHY[4])


def test_create_refuses_storage_tables_and_itself():
    with pytest.raises(ClientError) as e:
        check_create(HIERARCHY, "d.x", "d.x_table", ["d.hour_table_segments"])
    assert e.value.sqlstate == "0A000" and "read its live table d.hour_table" in str(e.value)
    with pytest.raises(ClientError) as e:
        check_create(HIERARCHY, "d.x", "d.x_table", ["d.x_table"])
    assert e.value.sqlstate == "42000"
    check_create(HIERARCHY, "d.x", "d.x_table", ["d.hour_table", "d.dim"])


# -- freshness on the catalog --------------------------------------------------------------

@pytest.fixture
def catalog(tmp_path):
    c = Catalog.in_state_dir(tmp_path)
    yield c
    c.close()


def _create(c: Catalog, name: str, table: str):
    return c.create_datamap("d", name, provider="mv", select_sql="SELECT 1",
                            base_tables=(table,))


def _build(c: Catalog, name: str, table: str, files: list[str], kind: str = "built") -> str:
    """Publish a segment of `name` covering every live base segment of `table`."""
    sid = c.begin_segment("d", name, {table: [s.id for s in c.base_segments(table)]})
    c.publish_segment("d", name, sid, rows=1, files=files, kind=kind)
    return sid


def test_stacked_is_fresh_only_while_everything_below_is(catalog):
    _create(catalog, "hour", "d.ev")
    _create(catalog, "day", "d.hour_table")
    catalog.add_base_segment("d.ev", ["file:/ev/1"])
    _build(catalog, "hour", "d.ev", ["file:/hour/0"])
    catalog.add_base_segment("d.hour_table", ["file:/hour/0"])
    _build(catalog, "day", "d.hour_table", ["file:/day/0"])
    day = catalog.get_datamap("d", "day")
    assert stale_below(catalog, day) is None
    assert depends_on(catalog, day, catalog.list_datamaps()) == "d.hour (fresh)"
    assert depends_on(catalog, catalog.get_datamap("d", "hour"), catalog.list_datamaps()) == ""

    # a load of the base table the hour datamap has not caught up with: day is stale too
    catalog.add_base_segment("d.ev", ["file:/ev/2"])
    why = stale_below(catalog, day)
    assert why.startswith("datamap d.hour below it is not fresh (datamap is not in sync"), why
    assert depends_on(catalog, day, catalog.list_datamaps()).startswith("d.hour (not fresh: ")

    # hour caught up (a new segment), day not yet: stale until day covers its files
    _build(catalog, "hour", "d.ev", ["file:/hour/1"], kind="refreshed")
    assert "has segments it has not caught up with" in stale_below(catalog, day)
    catalog.add_base_segment("d.hour_table", ["file:/hour/1"])
    _build(catalog, "day", "d.hour_table", ["file:/day/1"], kind="refreshed")
    assert stale_below(catalog, day) is None

    catalog.set_status("d", "hour", "DISABLED", "refresh failed: boom")
    assert "DISABLED: refresh failed: boom" in stale_below(catalog, day)


# -- a coarse datamap's full build from a finer one (proxy/datamaps/upkeep/finer.py) ----------

EV = {"db1": {"ev": {"ts": "timestamp", "k": "string", "v": "int"}}}


def _level(gran: str) -> str:
    return (f"SELECT timeseries(ts, '{gran}') AS t, k, sum(v) AS s, count(v) AS n, "
            f"max(v) AS m FROM ev GROUP BY timeseries(ts, '{gran}'), k")


@pytest.fixture
def service(tmp_path):
    from tests.support.datamaps import decision_service
    yield from decision_service(tmp_path, EV)


def test_full_build_reads_the_smallest_finer_datamap_over_the_same_segments(service):
    from tests.support.datamaps import add_datamap
    add_datamap(service, EV, "db1", "minute", _level("minute"), rows=500)
    add_datamap(service, EV, "db1", "hour", _level("hour"), rows=50)
    add_datamap(service, EV, "db1", "week", _level("week"), rows=3)
    add_datamap(service, EV, "db1", "day", _level("day"), build=False)
    add_datamap(service, EV, "db1", "month", _level("month"), build=False)
    source = service.maintenance.build_source
    day = service.catalog.get_datamap("db1", "day")
    sql, used = source(day, {"db1.ev": ["0"]})
    assert used == "db1.hour" and "db1.hour_table_segments" in sql, sql   # not minute, not week
    # the finer ones hold other base segments than the build will record: the base table
    assert source(day, {"db1.ev": ["0", "1"]}) is None
    # a week datamap cannot give months, nor itself its own build
    service.catalog.drop_datamap("db1", "minute")
    service.catalog.drop_datamap("db1", "hour")
    assert source(service.catalog.get_datamap("db1", "month"), {"db1.ev": ["0"]}) is None
    assert source(service.catalog.get_datamap("db1", "week"), {"db1.ev": ["0"]}) is None


def test_projection_datamaps_are_built_from_the_base_tables(service):
    from tests.support.datamaps import add_datamap
    add_datamap(service, EV, "db1", "wide", "SELECT ts, k, v FROM ev")
    add_datamap(service, EV, "db1", "narrow", "SELECT k, v FROM ev", build=False)
    narrow = service.catalog.get_datamap("db1", "narrow")
    assert service.maintenance.build_source(narrow, {"db1.ev": ["0"]}) is None
