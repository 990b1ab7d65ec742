"""Remote mode's time-zone alignment against a real Spark Thrift Server started in another
zone (America/Los_Angeles) than the pipeline session (UTC): the same time bucket differs
between the two until the proxy aligns the pipeline session (proxy/app.py
align_time_zone, run when the remote pipeline session opens); an upstream whose zone
cannot be read blocks time-dependent datamaps instead; doctor reports the mismatch.

Embedded mode needs no check: its Thrift server runs in the pipeline's own Spark
application, whose sessions share one default zone."""
from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

import pytest

from proxy.app import align_time_zone
from proxy.config import UpstreamSettings
from proxy.doctor import PASS, WARN, Target, check_upstream
from proxy.timezone import TIME_ZONE_KEY, upstream_time_zone
from tests.support.clients import pyhive_connect, pyhive_execute
from tests.support.sts import free_port, start_sts

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


def test_pipeline_session_is_aligned_to_the_upstream_zone(sts, pipeline_utc, caplog):
    upstream = UpstreamSettings(host=sts.host, port=sts.port)
    assert upstream_time_zone(upstream) == ZONE
    upstream_buckets = _sts_rows(sts, BUCKETS)
    assert upstream_buckets == [("2025-12-31 00:00:00", "2025-12-31", 19)]
    assert [tuple(r) for r in pipeline_utc.sql(BUCKETS).collect()] != upstream_buckets
    service = SimpleNamespace(time_zone_problem="left over")
    with caplog.at_level(logging.INFO, logger="proxy.timezone"):
        align_time_zone(pipeline_utc, upstream, service)
    assert service.time_zone_problem is None
    assert pipeline_utc.conf.get(TIME_ZONE_KEY) == ZONE
    assert [tuple(r) for r in pipeline_utc.sql(BUCKETS).collect()] == upstream_buckets
    assert any("differs from the upstream's default " + ZONE in r.getMessage()
               for r in caplog.records), caplog.text


def test_unreadable_upstream_zone_blocks_time_dependent_datamaps(pipeline_utc):
    upstream = UpstreamSettings(host="127.0.0.1", port=free_port(), connect_timeout=2.0)
    service = SimpleNamespace(time_zone_problem=None)
    align_time_zone(pipeline_utc, upstream, service)
    assert "could not be read" in service.time_zone_problem
    assert pipeline_utc.conf.get(TIME_ZONE_KEY) == "UTC"


def test_doctor_reports_the_mismatch(sts, tmp_path: Path):
    def target(zone):
        return Target("127.0.0.1", free_port(), tmp_path, (sts.host, sts.port), "plain",
                      "doctor", "doctor", (), 60.0, pipeline_time_zone=zone,
                      pipeline_time_zone_source="this machine's default")
    checks = {c.name: c for c in check_upstream(target("UTC"))}
    tz = checks["time zone"]
    assert tz.status == WARN and "mismatch" in tz.detail, tz
    assert ZONE in tz.detail and "UTC" in tz.detail and ZONE in tz.fix
    assert {c.name: c for c in check_upstream(target(ZONE))}["time zone"].status == PASS
