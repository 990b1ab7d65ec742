"""proxy/engine/timezone.py's pure parts and doctor's time-zone check (no Spark, no sockets)."""
from __future__ import annotations

from pathlib import Path

import pytest

from proxy.doctor import FAIL, PASS, WARN, Target, check_time_zone
from proxy.engine.timezone import TIME_ZONE_KEY, pipeline_zone, same_zone, time_dependent

SCHEMAS = {"db1": {"sales": {"k": "string", "v": "int", "ts": "timestamp",
                             "ntz": "timestamp_ntz", "d": "date", "s": "string"}}}


@pytest.mark.parametrize("sql,why", [
    ("SELECT k, sum(v) FROM db1.sales GROUP BY k", None),
    ("SELECT d, sum(v) FROM db1.sales GROUP BY d", None),
    ("SELECT ntz, count(*) FROM db1.sales GROUP BY ntz", None),
    ("SELECT timeseries(ts, 'hour'), sum(v) FROM db1.sales GROUP BY timeseries(ts, 'hour')",
     "ts"),
    ("SELECT k, sum(v) FROM db1.sales WHERE ts >= '2026-01-01' GROUP BY k", "ts"),
    ("SELECT date_trunc('DAY', s), count(*) FROM db1.sales GROUP BY date_trunc('DAY', s)",
     "date_trunc"),
    ("SELECT CAST(s AS TIMESTAMP), count(*) FROM db1.sales GROUP BY CAST(s AS TIMESTAMP)",
     "TIMESTAMP"),
    ("SELECT hour(s), count(*) FROM db1.sales GROUP BY hour(s)", "hour"),
    ("SELECT from_unixtime(v), count(*) FROM db1.sales GROUP BY from_unixtime(v)",
     "from_unixtime"),
])
def test_time_dependent(sql, why):
    got = time_dependent(sql, SCHEMAS)
    if why is None:
        assert got is None, got
    else:
        assert got is not None and why.lower() in got.lower(), got


def test_same_zone_and_pipeline_zone(monkeypatch):
    assert same_zone("UTC", "Etc/UTC") and same_zone("Z", "GMT")
    assert same_zone("America/Los_Angeles", "America/Los_Angeles")
    assert not same_zone("UTC", "America/Los_Angeles")
    assert not same_zone(None, "UTC")
    assert pipeline_zone({TIME_ZONE_KEY: "Asia/Tokyo"})[0] == "Asia/Tokyo"
    assert pipeline_zone({"spark.driver.extraJavaOptions": "-Xss4m -Duser.timezone=Europe/Paris"}
                         )[0] == "Europe/Paris"
    monkeypatch.setenv("TZ", ":Europe/Berlin")
    assert pipeline_zone({}) == ("Europe/Berlin", "this machine's default")


def _target(zone):
    return Target("127.0.0.1", 1, Path("/tmp"), ("127.0.0.1", 2), "plain", "u", "p", (), 1.0,
                  pipeline_time_zone=zone, pipeline_time_zone_source="[spark] conf")


def test_doctor_time_zone_check():
    c = check_time_zone("America/Los_Angeles", _target("UTC"))
    assert c.status == WARN and "mismatch" in c.detail
    assert "America/Los_Angeles" in c.detail and "UTC" in c.detail
    assert "America/Los_Angeles" in c.fix
    assert check_time_zone("UTC", _target("Etc/UTC")).status == PASS
    assert check_time_zone("UTC", _target(None)).status == PASS
    c = check_time_zone(None, _target("UTC"))
    assert c.status == WARN and TIME_ZONE_KEY in c.detail
    assert c.status != FAIL
