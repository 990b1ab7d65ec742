"""Remote mode's time-zone alignment against a real Spark Thrift Server started in another
zone (America/Los_Angeles) than the pipeline session (UTC): the same time bucket differs
between the two until the proxy aligns the pipeline session (proxy/datamaps/zones/pipeline.py
align_pipeline_zone, run when the remote pipeline session opens); an upstream whose zone
cannot be read blocks time-dependent datamaps instead; doctor reports the mismatch.

Embedded mode needs no check: its Thrift server runs in the pipeline's own Spark
application, whose sessions share one default zone."""
from __future__ import annotations

import logging
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from proxy.config import UpstreamSettings
from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.handler import DatamapDdlHandler
from proxy.datamaps.service import DatamapService
from proxy.datamaps.zones.pipeline import (align_pipeline_settings, align_pipeline_zone,
                                           check_upstream_zone)
from proxy.doctor import PASS, WARN, Target, check_upstream
from proxy.engine.semantics import differences, upstream_listing
from proxy.engine.timezone import TIME_ZONE_KEY, upstream_time_zone
from proxy.routing.router import StatementContext
from tests.support.clients import pyhive_connect, pyhive_execute
from tests.support.ports import free_port
from tests.support.sts import start_sts

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

ZONE = "America/Los_Angeles"
# 2026-01-01 03:00 UTC = 2025-12-31 19:00 in Los Angeles: day, hour and date all differ.
BUCKETS = ("SELECT CAST(date_trunc('DAY', timestamp_seconds(1767236400)) AS STRING), "
           "CAST(CAST(timestamp_seconds(1767236400) AS DATE) AS STRING), "
           "hour(timestamp_seconds(1767236400))")


@pytest.fixture(scope="module")
def sts(tmp_path_factory):
    server = start_sts(tmp_path_factory.mktemp("sts_la"), fast_start=True,
                       extra_conf={TIME_ZONE_KEY: ZONE})
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def pipeline_utc(pipeline_spark):
    """The shared pipeline session in UTC for the test, its own zone restored afterwards."""
    before = pipeline_spark.conf.get(TIME_ZONE_KEY)
    pipeline_spark.conf.set(TIME_ZONE_KEY, "UTC")
    try:
        yield pipeline_spark
    finally:
        pipeline_spark.conf.set(TIME_ZONE_KEY, before)


def _sts_rows(sts, sql):
    conn = pyhive_connect(sts.host, sts.port)
    try:
        return [tuple(r) for r in pyhive_execute(conn.cursor(), sql).rows]
    finally:
        conn.close()


def test_pipeline_session_is_aligned_to_the_upstream_zone(sts, pipeline_utc, caplog,
                                                           tmp_path):
    upstream = UpstreamSettings(host=sts.host, port=sts.port)
    assert upstream_time_zone(upstream) == ZONE
    upstream_buckets = _sts_rows(sts, BUCKETS)
    assert upstream_buckets == [("2025-12-31 00:00:00", "2025-12-31", 19)]
    assert [tuple(r) for r in pipeline_utc.sql(BUCKETS).collect()] != upstream_buckets
    service = DatamapService(Catalog.in_state_dir(tmp_path), lambda: pipeline_utc)
    service.time_zone_problem = "left over"
    with caplog.at_level(logging.INFO, logger="proxy.timezone"):
        assert align_pipeline_zone(pipeline_utc, upstream, service) == []
    assert service.time_zone_problem is None
    assert service.catalog.setting("time_zone") == ZONE   # what datamaps are computed under
    assert pipeline_utc.conf.get(TIME_ZONE_KEY) == ZONE
    assert [tuple(r) for r in pipeline_utc.sql(BUCKETS).collect()] == upstream_buckets
    assert any("differs from the upstream's default " + ZONE in r.getMessage()
               for r in caplog.records), caplog.text


def test_the_upstreams_settings_are_read_from_a_fresh_sessions_listing(sts):
    """What the Thrift server was started with (--conf, spark-defaults) is in the `SET`
    listing of a fresh session; the settings are Spark's defaults there."""
    listed = upstream_listing(UpstreamSettings(host=sts.host, port=sts.port))
    assert listed is not None and listed.get(TIME_ZONE_KEY) == ZONE, listed
    assert differences(listed) == []


def test_unreadable_upstream_zone_blocks_time_dependent_datamaps(pipeline_utc):
    upstream = UpstreamSettings(host="127.0.0.1", port=free_port(), connect_timeout=2.0)
    service = SimpleNamespace(time_zone_problem=None)
    align_pipeline_zone(pipeline_utc, upstream, service)
    assert "could not be read" in service.time_zone_problem
    assert pipeline_utc.conf.get(TIME_ZONE_KEY) == "UTC"
    # nor can its other settings: no datamap answers until they are
    service = SimpleNamespace(engine_settings_problem=None)
    assert align_pipeline_settings(pipeline_utc, upstream, service) == []
    assert "could not be read" in service.engine_settings_problem


def test_doctor_reports_the_mismatch(sts, tmp_path: Path):
    def target(zone):
        return Target("127.0.0.1", free_port(), tmp_path, (sts.host, sts.port), "plain",
                      "doctor", "doctor", (), 60.0, pipeline_time_zone=zone,
                      pipeline_time_zone_source="this machine's default")
    checks = {c.name: c for c in check_upstream(target("UTC"))}
    assert checks["engine settings"].status == PASS, checks["engine settings"]
    tz = checks["time zone"]
    assert tz.status == WARN and "mismatch" in tz.detail, tz
    assert ZONE in tz.detail and "UTC" in tz.detail and ZONE in tz.fix
    assert {c.name: c for c in check_upstream(target(ZONE))}["time zone"].status == PASS


async def test_a_zone_change_invalidates_and_rebuilds_time_dependent_datamaps(
        sts, pipeline_utc, pipe_db, tmp_path):
    """Datamaps computed under one zone are wrong under another: when the upstream's zone
    is not the one the catalog recorded (a Thrift server restarted with another zone, seen
    by the periodic check or at the next start), the time-dependent datamaps are hidden and
    disabled with the reason; non-lazy ones are rebuilt under the new zone at once, lazy
    ones at REBUILD. Datamaps that do not depend on the zone are left alone."""
    spark = pipeline_utc
    t = f"{pipe_db}.ev_{uuid.uuid4().hex[:6]}"
    spark.sql(f"CREATE TABLE {t} (ts TIMESTAMP, n INT) USING parquet")
    spark.sql(f"INSERT INTO {t} VALUES (timestamp_seconds(1767236400), 1), "
              "(timestamp_seconds(1767250800), 2)")    # 03:00 and 07:00 UTC on 2026-01-01
    service = DatamapService(Catalog.in_state_dir(tmp_path), lambda: spark)
    service.garbage_grace_s = 0
    assert service.adopt_time_zone("UTC") == []           # the first record
    ctx = StatementContext("s", "me", pipe_db, {}, 10)

    async def run(sql):
        async def no_upstream(q):
            raise AssertionError(q)
        return await DatamapDdlHandler(service)(ctx, sql).runner(no_upstream)
    by_day = f"SELECT date_trunc('DAY', ts) AS d, sum(n) FROM {t} GROUP BY date_trunc('DAY', ts)"
    await run(f"CREATE DATAMAP tz_days USING 'mv' AS {by_day}")
    await run(f"CREATE DATAMAP tz_lazy USING 'mv' WITH DEFERRED REBUILD AS {by_day}")
    await run("REBUILD DATAMAP tz_lazy")
    await run(f"CREATE DATAMAP tz_plain USING 'mv' AS SELECT n, count(*) FROM {t} GROUP BY n")
    def days(name):     # the datamap's visible rows
        ids = ", ".join(f"'{s.id}'" for s in service.catalog.visible_segments(pipe_db, name))
        col = spark.table(f"{pipe_db}.{name}_table").columns[0]
        return sorted(r[0] for r in spark.sql(   # formatted by Spark, in the session's zone
            f"SELECT CAST(`{col}` AS STRING) FROM {pipe_db}.{name}_table "
            f"WHERE dm_segment_id IN ({ids})").collect())
    assert days("tz_days") == ["2026-01-01 00:00:00"]

    upstream = UpstreamSettings(host=sts.host, port=sts.port)
    changed = check_upstream_zone(spark, upstream, service)     # the upstream is in LA
    assert changed == [f"{pipe_db}.tz_days", f"{pipe_db}.tz_lazy"]
    assert spark.conf.get(TIME_ZONE_KEY) == ZONE
    recs = {r.name: r for r in service.catalog.list_datamaps()}
    assert recs["tz_days"].status == "ENABLED" and recs["tz_plain"].status == "ENABLED"
    assert recs["tz_lazy"].status == "DISABLED"
    assert "time zone changed from UTC to " + ZONE in recs["tz_lazy"].status_reason
    # rebuilt under LA: 03:00 UTC is the day before there, 07:00 UTC too (23:00)
    want = sorted(r[0] for r in spark.sql(f"SELECT CAST(d AS STRING) FROM ({by_day})").collect())
    assert want == ["2025-12-31 00:00:00"]
    visible = [s.id for s in service.catalog.visible_segments(pipe_db, "tz_days")]
    assert days("tz_days") == want and visible == ["1"]
    assert [s.id for s in service.catalog.visible_segments(pipe_db, "tz_plain")] == ["0"]
    assert service.catalog.setting("time_zone") == ZONE
    assert check_upstream_zone(spark, upstream, service) == []  # nothing changed since
    await run("REBUILD DATAMAP tz_lazy")
    assert service.catalog.get_datamap(pipe_db, "tz_lazy").status == "ENABLED"
    assert days("tz_lazy") == want
