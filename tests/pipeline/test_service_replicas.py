"""Two replicas' DatamapServices on one PostgreSQL catalog and a real SparkSession
(docs/replicas.md): a load seen by one replica while the other's periodic sync runs is
cut into one base segment and refreshed once, and both answer from the datamap."""
from __future__ import annotations

import threading
import uuid

import pytest

from proxy import leader
from proxy.datamaps.catalog import Catalog
from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.datamaps.service import DatamapService
from proxy.router import Rewrite, StatementContext

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


async def _no_upstream(sql):
    raise AssertionError(f"DDL must not go upstream: {sql}")


def _rows(spark, sql):
    return sorted((tuple(r) for r in spark.sql(sql).collect()), key=repr)


async def test_a_load_is_refreshed_once_by_two_replicas(pipeline_spark, pipe_db, postgres):
    spark = pipeline_spark
    t = f"sales_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE TABLE {pipe_db}.{t} (country STRING, qty INT) USING parquet")
    spark.sql(f"INSERT INTO {pipe_db}.{t} VALUES ('cn', 1), ('us', 2), (NULL, 3)")
    url = postgres.new_database()
    replicas = []
    for _ in range(2):
        catalog = Catalog(url)
        svc = DatamapService(catalog, lambda: spark)
        svc.locks.leases = leader.LeaseKeeper(catalog, ttl=10)
        replicas.append(svc)
    a, b = replicas
    ctx = StatementContext("s", "me", pipe_db, {}, 10)
    try:
        await DatamapDdlHandler(a)(ctx, f"CREATE DATAMAP agg USING 'mv' AS SELECT country, "
                                        f"sum(qty) FROM {t} GROUP BY country"
                                   ).runner(_no_upstream)
        spark.sql(f"INSERT INTO {pipe_db}.{t} VALUES ('fr', 5), ('cn', 6)")
        errors = []

        def run(job):
            try:
                job()
            except BaseException as e:  # noqa: BLE001 - reported by the assertion below
                errors.append(e)
        jobs = [threading.Thread(target=run, args=(lambda: a.after_load(f"{pipe_db}.{t}"),)),
                threading.Thread(target=run, args=(b.sync_all,))]
        for j in jobs:
            j.start()
        for j in jobs:
            j.join(240)
        assert errors == []
        c = b.catalog
        assert [s.id for s in c.base_segments(f"{pipe_db}.{t}")] == ["0", "1"]
        assert [(s.id, s.kind) for s in c.visible_segments(pipe_db, "agg")] == [
            ("0", "built"), ("1", "refreshed")]
        assert [e.kind for e in c.events(pipe_db, "agg")].count("refreshed") == 1
        assert c.lease_holder(f"job:{pipe_db}.agg") is None
        q = f"SELECT country, sum(qty) AS s FROM {pipe_db}.{t} GROUP BY country"
        for svc in replicas:
            d = DatamapSelectHandler(svc)(ctx, q)
            assert isinstance(d, Rewrite) and _rows(spark, d.sql) == _rows(spark, q)
    finally:
        for svc in replicas:
            svc.locks.leases.stop()
            svc.close()
            svc.catalog.close()
