"""An embedded proxy restarted in another time zone (TZ): the datamaps whose rows bucket
timestamps were computed under the old zone, so they are invalidated at start and the
non-lazy ones rebuilt in the background; until then queries are answered from the base
tables. A datamap that does not depend on the zone keeps its segments."""
from __future__ import annotations


import pytest

from tests.support.e2e import Pair, ServeProc
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(420)]

BY_DAY = ("SELECT date_trunc('DAY', ts) AS d, sum(n) FROM tz_ev "
          "GROUP BY date_trunc('DAY', ts)")
BY_N = "SELECT n, count(*) FROM tz_ev GROUP BY n"


def _visible(c: Pair, table: str) -> list[str]:
    return [s[0] for s in c.segments(table) if s[1] == "Success"]


def test_restart_in_another_zone_rebuilds_time_dependent_datamaps(tmp_path):
    state = tmp_path / "state"
    srv = ServeProc(tmp_path / "utc", state, env={"TZ": "UTC"})
    c = Pair(srv.port)
    try:
        c.dm.run("CREATE TABLE tz_ev (ts TIMESTAMP, n INT) USING parquet")
        # 03:00 and 07:00 UTC on 2026-01-01: the evening before in Los Angeles
        c.dm.run("INSERT INTO tz_ev VALUES (timestamp_seconds(1767236400), 1), "
                 "(timestamp_seconds(1767250800), 2)")
        c.dm.run(f"CREATE DATAMAP tz_day USING 'mv' AS {BY_DAY}")
        c.dm.run(f"CREATE DATAMAP tz_n USING 'mv' AS {BY_N}")
        assert [tuple(map(str, r)) for r in c.hit(BY_DAY, "tz_day")] == [
            ("2026-01-01 00:00:00", "3")]
        c.hit(BY_N, "tz_n")
    finally:
        c.close()
        assert srv.stop() == 0, srv.tail()

    srv = ServeProc(tmp_path / "la", state, env={"TZ": "America/Los_Angeles"})
    c = Pair(srv.port)
    try:
        wait_until(lambda: _visible(c, "tz_day_table") == ["1"]
                   and c.datamaps()["tz_day"][4] == "ENABLED", timeout=120, interval=0.5,
                   what="tz_day rebuilt in the new zone",
                   detail=lambda: (c.datamaps(), c.segments("tz_day_table"), srv.tail()))
        assert [tuple(map(str, r)) for r in c.hit(BY_DAY, "tz_day")] == [
            ("2025-12-31 00:00:00", "3")]
        assert _visible(c, "tz_n_table") == ["0"] and c.datamaps()["tz_n"][4] == "ENABLED"
        c.hit(BY_N, "tz_n")
        assert "datamaps were computed under UTC" in srv.log_path.read_text(errors="replace")
    finally:
        c.close()
        assert srv.stop() == 0, srv.tail()
