"""DatamapService end to end on a real SparkSession: DDL through the router handlers,
loads, incremental refresh, rewrite answers equal Spark's, compaction, lazy datamaps,
overwrite -> full rebuild, recovery of orphan partitions, drop; two replicas on one
PostgreSQL catalog."""
from __future__ import annotations

import threading
import uuid

import pytest

from pipeline import list_segments
from pipeline.table import create_table
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.datamaps.service import DatamapService
from proxy.errors import ClientError
from proxy.ha import leader
from proxy.routing.router import PassThrough, Rewrite, StatementContext

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]


async def _no_upstream(sql):
    raise AssertionError(f"DDL must not go upstream: {sql}")


def _rows(spark, sql):
    return sorted((tuple(r) for r in spark.sql(sql).collect()), key=repr)


async def test_service_lifecycle(pipeline_spark, pipe_db, tmp_path):
    spark = pipeline_spark
    t = f"sales_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE TABLE {pipe_db}.{t} (country STRING, qty INT) USING parquet")
    spark.sql(f"INSERT INTO {pipe_db}.{t} VALUES ('cn', 1), ('us', 2), (NULL, 3), ('cn', -4)")
    catalog = Catalog.in_state_dir(tmp_path)
    svc = DatamapService(catalog, lambda: spark)
    svc.garbage_grace_s = 0   # drop superseded partitions at once (default keeps them a while)
    ddl, select = DatamapDdlHandler(svc), DatamapSelectHandler(svc)
    ctx = StatementContext("s", "me", pipe_db, {}, 10)

    async def run(sql):
        return await ddl(ctx, sql).runner(_no_upstream)

    await run(f"CREATE DATAMAP agg ON TABLE {t} USING 'mv' DMPROPERTIES ('sort_columns'="
              f"'country', 'minor_compaction_threshold'='2') AS SELECT country, sum(qty), count(*) FROM {t} GROUP BY country")
    await run(f"CREATE DATAMAP lazy USING 'mv' WITH DEFERRED REBUILD AS SELECT country, max(qty)"
              f" FROM {t} GROUP BY country")
    with pytest.raises(ClientError) as e:
        await run(f"CREATE DATAMAP agg USING 'mv' AS SELECT country FROM {t}")
    assert e.value.sqlstate == "42710"
    await run(f"CREATE DATAMAP IF NOT EXISTS agg USING 'mv' AS SELECT country FROM {t}")
    with pytest.raises(ClientError) as e:
        await run(f"CREATE DATAMAP nope USING 'mv' AS SELECT a FROM {pipe_db}.missing_table")
    assert e.value.sqlstate == "42S02" and "missing_table" in str(e.value)
    spark.sql(f"CREATE TABLE {pipe_db}.taken_table (x INT) USING parquet")
    with pytest.raises(ClientError) as e:
        await run(f"CREATE DATAMAP taken USING 'mv' AS SELECT country FROM {t}")
    assert e.value.sqlstate == "42710" and f"{pipe_db}.taken_table" in str(e.value)

    shown = {r[0]: r for r in (await run("SHOW DATAMAP")).rows}
    assert shown["agg"][4] == "ENABLED" and shown["lazy"][4:6] == ("DISABLED", "NA")
    assert f'"{pipe_db}.{t}": "0"' in shown["agg"][5]

    q = f"SELECT country, sum(qty) AS s FROM {pipe_db}.{t} GROUP BY country"
    d = select(ctx, q)
    assert isinstance(d, Rewrite) and "agg_table" in d.sql
    assert _rows(spark, d.sql) == _rows(spark, q)

    # a load through the proxy: one new base segment, incremental refresh of agg
    spark.sql(f"INSERT INTO {pipe_db}.{t} VALUES ('fr', 5), ('cn', 6)")
    svc.after_load(f"{pipe_db}.{t}")
    segs = (await run(f"SHOW SEGMENTS FOR TABLE agg_table")).rows
    assert [(r[0], r[1], r[6]) for r in segs] == [
        ("1", "Success", f'{{"{pipe_db}.{t}": ["1"]}}'),
        ("0", "Success", f'{{"{pipe_db}.{t}": ["0"]}}')]
    d = select(ctx, q)
    assert isinstance(d, Rewrite) and _rows(spark, d.sql) == _rows(spark, q)
    assert catalog.get_datamap(pipe_db, "lazy").status == "DISABLED"

    await run("ALTER DATAMAP agg COMPACT 'MINOR'")
    assert [s.id for s in catalog.visible_segments(pipe_db, "agg")] == ["2"]
    assert list_segments(spark, catalog.get_datamap(pipe_db, "agg").definition) == ["2"]
    d = select(ctx, q)
    assert isinstance(d, Rewrite) and _rows(spark, d.sql) == _rows(spark, q)

    await run("REBUILD DATAMAP lazy")
    assert catalog.get_datamap(pipe_db, "lazy").status == "ENABLED"
    ql = f"SELECT country, max(qty) FROM {pipe_db}.{t} GROUP BY country"
    d = select(ctx, ql)
    assert isinstance(d, Rewrite) and "lazy_table" in d.sql and _rows(spark, d.sql) == _rows(spark, ql)

    # overwrite: files disappear -> full rebuild replaces every segment
    spark.sql(f"INSERT OVERWRITE TABLE {pipe_db}.{t} VALUES ('de', 7)")
    svc.after_load(f"{pipe_db}.{t}")
    assert [s.id for s in catalog.visible_segments(pipe_db, "agg")] == ["3"]
    assert _rows(spark, select(ctx, q).sql) == [("de", 7)]
    assert catalog.get_datamap(pipe_db, "lazy").status == "DISABLED"
    d = select(ctx, ql)     # the base tables answer, after REFRESH TABLE (the table changed)
    assert d is None or (isinstance(d, PassThrough) and d.before), d

    # a crash left a partition the catalog does not show
    agg_def = catalog.get_datamap(pipe_db, "agg").definition
    create_table(spark, agg_def)
    spark.sql(f"INSERT INTO {agg_def.storage} PARTITION (dm_segment_id='99') "
              "SELECT 'zz', 1, 1")
    assert svc.recover()[f"{pipe_db}.agg"] == ["99"]
    assert list_segments(spark, agg_def) == ["3"]

    await run("DROP DATAMAP agg")
    await run(f"DROP MATERIALIZED VIEW {pipe_db}.lazy")
    assert not spark.catalog.tableExists(agg_def.table)
    assert not spark.catalog.tableExists(agg_def.storage)
    assert (await run("SHOW DATAMAPS")).rows == []
    d = select(ctx, q)
    assert d is None or (isinstance(d, PassThrough) and d.before), d
    catalog.close()


async def test_datamaps_under_a_location_that_needs_escaping(pipeline_spark, tmp_path):
    """A database whose directory has a space and a percent sign: build, incremental
    refreshes (new files read directly), compaction and REBUILD all land where the
    metastore points, and the rewritten queries answer what Spark answers."""
    spark = pipeline_spark
    db = f"dmpipe_odd_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE DATABASE {db} LOCATION '{tmp_path / 'odd dir %41'}'")
    try:
        spark.sql(f"CREATE TABLE {db}.t (k STRING, v INT) USING parquet")
        spark.sql(f"INSERT INTO {db}.t VALUES ('a', 1), ('b', 2)")
        catalog = Catalog.in_state_dir(tmp_path / "state")
        svc = DatamapService(catalog, lambda: spark)
        svc.garbage_grace_s = 0
        ddl, select = DatamapDdlHandler(svc), DatamapSelectHandler(svc)
        ctx = StatementContext("s", "me", db, {}, 10)

        async def run(sql):
            return await ddl(ctx, sql).runner(_no_upstream)
        q = f"SELECT k, sum(v), count(*) FROM {db}.t GROUP BY k"
        await run(f"CREATE DATAMAP odd USING 'mv' AS {q}")
        for values in ("('a', 3)", "('c', 4), ('a', 5)"):
            spark.sql(f"INSERT INTO {db}.t VALUES {values}")
            svc.after_load(f"{db}.t")
            d = select(ctx, q)
            assert isinstance(d, Rewrite) and _rows(spark, d.sql) == _rows(spark, q)
        assert [s.id for s in catalog.visible_segments(db, "odd")] == ["0", "1", "2"]
        assert all("/odd%20dir%20%2541/" in f for s in catalog.visible_segments(db, "odd")
                   for f in s.files)
        await run("ALTER DATAMAP odd COMPACT 'MAJOR'")
        await run("REBUILD DATAMAP odd")
        d = select(ctx, q)
        assert isinstance(d, Rewrite) and _rows(spark, d.sql) == _rows(spark, q) == [
            ("a", 9, 3), ("b", 2, 1), ("c", 4, 1)]
        assert sorted(p.name for p in tmp_path.iterdir()) == ["odd dir %41", "state"]
        await run("DROP DATAMAP odd")
        catalog.close()
    finally:
        spark.sql(f"DROP DATABASE IF EXISTS {db} CASCADE")


# Two replicas' services on one PostgreSQL catalog (docs/replicas.md): a load seen by one
# while the other's periodic sync runs is cut into one base segment and refreshed once,
# and both answer from the datamap.
async def test_a_load_is_refreshed_once_by_two_replicas(pipeline_spark, pipe_db, postgres):
    spark = pipeline_spark
    t = f"sales_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE TABLE {pipe_db}.{t} (country STRING, qty INT) USING parquet")
    spark.sql(f"INSERT INTO {pipe_db}.{t} VALUES ('cn', 1), ('us', 2), (NULL, 3)")
    url = postgres.new_database()
    replicas = []
    for _ in range(2):
        catalog = Catalog(url)
        svc = DatamapService(catalog, lambda: spark, leases=leader.LeaseKeeper(catalog, ttl=10))
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
            # a replica's first rewrite index is the warm-up thread's, never a statement's
            # (the second replica has asked for none yet): Spark answers until it is built
            assert svc.rewrite_index.warmed(60)
            d = DatamapSelectHandler(svc)(ctx, q)
            assert isinstance(d, Rewrite) and _rows(spark, d.sql) == _rows(spark, q)
    finally:
        for svc in replicas:
            svc.locks.leases.stop()
            svc.close()
            svc.catalog.close()
