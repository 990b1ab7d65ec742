"""Replicas on one catalog (docs/replicas.md), on SQLite and on a real PostgreSQL: leases,
the leader moving to a survivor, two processes contending for one datamap's lock, a
builder killed mid-build, the visibility bound, and a lost PostgreSQL connection."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proxy.datamaps.catalog.store import Catalog, CatalogError
from proxy.datamaps.locks import KeyedLocks
from proxy.ha import leader
from tests.support.datamaps import add_datamap, no_spark, schemas_of
from tests.support.lease_worker import wait_until

ROOT = Path(__file__).resolve().parents[3]
SCHEMAS = {"db1": {"sales": {"country": "string", "price": "decimal(10,2)"}}}
SQL = "SELECT country, sum(price) AS p FROM db1.sales GROUP BY country"


def _worker(location: str, ttl: float, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.support.lease_worker", location,
                             str(ttl), *args], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _kill(*procs: subprocess.Popen) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait(30)
        p.stdout.close()


@pytest.fixture
def service(catalog_location, monkeypatch):
    from proxy.datamaps.service import DatamapService
    catalog = Catalog(catalog_location)
    svc = DatamapService(catalog, no_spark, schemas_provider=schemas_of(SCHEMAS))
    svc.maintenance.guard = None
    # recovery's Spark half (view and partitions) is not what these tests are about
    monkeypatch.setattr(svc.maintenance, "_reconcile_storage", lambda rec: [])
    yield svc
    svc.close()
    catalog.close()


def test_a_lease_is_exclusive_until_it_expires(catalog_location):
    a, b = Catalog(catalog_location), Catalog(catalog_location)
    v = a.version()
    assert a.acquire_lease("x", "A", 0.3) and a.acquire_lease("x", "A", 0.3)   # renewal
    assert not b.acquire_lease("x", "B", 10)
    assert b.lease_holder("x")[0] == "A"
    wait_until("the 0.3 s lease to expire", lambda: b.lease_holder("x") is None, timeout=10)
    assert b.acquire_lease("x", "B", 10) and not a.acquire_lease("x", "A", 10)
    b.release_lease("x", "A")            # not A's any more: nothing happens
    assert a.lease_holder("x")[0] == "B"
    b.release_lease("x", "B")
    assert a.acquire_lease("x", "A", 10)
    assert a.version() == v              # leases change nothing a reader caches
    a.close(), b.close()


def test_the_leader_moves_to_the_survivor_when_it_is_killed(catalog_location):
    Catalog(catalog_location).close()        # migrated once, before the two race
    procs = [_worker(catalog_location, 1.0, "leader") for _ in range(2)]
    try:
        holders = [p.stdout.readline().strip() for p in procs]
        watcher = Catalog(catalog_location)
        first = wait_until("a leader",
                           lambda: (watcher.lease_holder(leader.LEADER) or (None,))[0])
        assert first in holders
        _kill(procs[holders.index(first)])
        other = holders[1 - holders.index(first)]
        wait_until("the survivor to lead",
              lambda: (watcher.lease_holder(leader.LEADER) or (None,))[0] == other)
        watcher.close()
    finally:
        _kill(*procs)


def test_two_replicas_never_run_one_datamaps_job_at_once(service, catalog_location):
    add_datamap(service, SCHEMAS, "db1", "agg", SQL)
    procs = [_worker(catalog_location, 2.0, "lock", "3") for _ in range(2)]
    try:
        holders = {p.stdout.readline().strip() for p in procs}
        for p in procs:
            assert p.wait(120) == 0
    finally:
        _kill(*procs)
    turns = [(e.kind, e.detail) for e in service.catalog.events("db1", "agg")
             if e.kind in ("enter", "exit")]
    assert len(turns) == 12
    for enter, leave in zip(turns[::2], turns[1::2]):     # strictly one at a time
        assert enter[0] == "enter" and leave == ("exit", enter[1])
    assert {d for _, d in turns} == holders


def test_a_builder_killed_mid_build_leaves_nothing_half_published(service, catalog_location):
    """Recovery leaves a live replica's IN_PROGRESS segment alone and fails it only once
    that replica's lease expired; the published segments never change meanwhile."""
    c = service.catalog
    add_datamap(service, SCHEMAS, "db1", "agg", SQL)
    keeper = leader.LeaseKeeper(c, ttl=3.0)
    service.locks.leases = keeper
    builder = _worker(catalog_location, 3.0, "build")
    try:
        builder.stdout.readline()
        assert builder.stdout.readline().split() == ["building", "1"]
        assert service.recover() == {}                       # its job: hands off
        assert service.recover() == {}
        assert [s.status for s in c.segments("db1", "agg")] == ["INSERT_IN_PROGRESS",
                                                                "SUCCESS"]
        builder.send_signal(signal.SIGKILL)
        builder.wait(30)
        wait_until("the dead builder's lease to expire", lambda: service.recover() != {})
    finally:
        _kill(builder)
    assert [(s.id, s.status, s.visible) for s in c.segments("db1", "agg")] == [
        ("1", "FAILED", False), ("0", "SUCCESS", True)]
    assert c.is_in_sync("db1", "agg")
    with service.locks("db1.agg"):                           # this replica may build now
        assert c.lease_holder("job:db1.agg")[0] == keeper.holder
        assert c.begin_segment("db1", "agg", {"db1.sales": ["0"]}) == "2"
    assert c.lease_holder("job:db1.agg") is None
    keeper.stop()


def test_another_replica_sees_a_published_segment_within_max_age(catalog_location):
    from proxy.datamaps.service import DatamapService
    a, b = Catalog(catalog_location), Catalog(catalog_location)
    svc_a = DatamapService(a, no_spark, schemas_provider=schemas_of(SCHEMAS))
    svc_b = DatamapService(b, no_spark, schemas_provider=schemas_of(SCHEMAS))
    try:
        assert svc_b.rewrite_index.index().version == a.version()
        add_datamap(svc_a, SCHEMAS, "db1", "agg", SQL)
        time.sleep(1.0)               # recent_version's max_age: the bound docs/replicas.md states
        index = svc_b.rewrite_index.index()
        assert index.version == a.version()
        assert [cand.definition.name for cand in svc_b.rewrite_index.candidates()] == ["agg"]
    finally:
        svc_a.close(), svc_b.close(), a.close(), b.close()


def test_keyed_locks_without_leases_stay_in_process():
    locks = KeyedLocks()
    with locks("db1.agg"):
        with locks.try_hold("db1.agg") as held:
            assert not held
    with locks.try_hold("db1.agg") as held:
        assert held


# -- PostgreSQL only ---------------------------------------------------------------------
def test_a_connection_lost_while_idle_is_replaced(postgres):
    url = postgres.new_database()
    c = Catalog(url)
    v = c.version()
    assert postgres.terminate_connections(url) >= 1
    assert c.version() == v
    c.close()


def test_a_connection_lost_in_a_transaction_applies_nothing(postgres):
    url = postgres.new_database()
    c = Catalog(url)
    c.create_datamap("db1", "agg", provider="mv", select_sql=SQL, base_tables=["db1.sales"])
    v = c.version()
    with pytest.raises(CatalogError) as info:
        with c._tx() as conn:
            conn.execute("UPDATE datamaps SET status_reason = ? WHERE name = ?", ("x", "agg"))
            postgres.terminate_connections(url)
            conn.execute("UPDATE datamaps SET status_reason = ? WHERE name = ?", ("y", "agg"))
    assert info.value.sqlstate == "08006" and "not applied" in str(info.value)
    assert postgres.password not in str(info.value)
    assert c.version() == v
    assert c.get_datamap("db1", "agg").status_reason == "not built yet"
    c.close()


def test_the_password_never_appears_in_errors(postgres):
    url = postgres.url("no_such_db").replace(postgres.password, "s3cret-pw")
    with pytest.raises(CatalogError) as info:
        Catalog(url)
    assert info.value.sqlstate == "08001"
    assert "s3cret-pw" not in str(info.value) and "test:***@127.0.0.1" in str(info.value)
    c = Catalog(postgres.new_database())
    assert postgres.password not in c.path and c.shared
    c.close()


def test_names_sort_byte_wise_on_both_backends(catalog_location):
    """SHOW DATAMAP lists in the same order whatever the database's locale."""
    c = Catalog(catalog_location)
    for name in ("b", "B", "a_b", "ab", "_z"):
        c.create_datamap("db1", name, provider="mv", select_sql=SQL, base_tables=["db1.sales"])
    assert [r.name for r in c.list_datamaps("db1")] == ["B", "_z", "a_b", "ab", "b"]
    c.close()


def test_a_renewal_round_never_takes_back_a_lease_given_back(catalog_location):
    c = Catalog(catalog_location)
    keeper = leader.LeaseKeeper(c, ttl=30)
    assert keeper.take("job:db1.agg") and keeper.holds("job:db1.agg")
    keeper.give_back("job:db1.agg")
    assert not keeper._try("job:db1.agg", renew=True)     # a round that listed it before
    assert c.lease_holder("job:db1.agg") is None and not keeper.holds("job:db1.agg")
    keeper.stop()
    c.close()


def test_external_table_jobs_hold_the_cross_replica_lease(service, catalog_location, tmp_path):
    # ADD/DELETE SEGMENT and compaction of an external-format table pick segment ids and
    # replace segments: two replicas doing it at once would publish the same files twice
    from proxy.external.tables import ExternalTables
    here = leader.LeaseKeeper(service.catalog, ttl=30)
    service.locks.leases = here
    external = ExternalTables(service.catalog, no_spark, tmp_path, service)
    other_catalog = Catalog(catalog_location)
    other = leader.LeaseKeeper(other_catalog, ttl=30)
    try:
        with external.lock("db1.ext"):
            assert here.holds("job:external:db1.ext")
            assert not other.try_take("job:external:db1.ext")     # the other replica waits
        assert other.try_take("job:external:db1.ext")
        other.give_back("job:external:db1.ext")
    finally:
        other.stop()
        here.stop()
        other_catalog.close()
