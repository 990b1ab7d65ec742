"""Remote mode with an unknown upstream time zone: datamaps whose rows depend on the zone
are not offered to the rewriter, EXPLAIN says why, the others still answer. No Spark."""
from __future__ import annotations

import pytest

from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.routing.router import LocalResult, Rewrite, StatementContext
from tests.support.datamaps import SALES_AGG as BY_COUNTRY, sales_service

BY_HOUR = ("SELECT timeseries(ts, 'hour') AS h, sum(qty) FROM db1.sales "
           "GROUP BY timeseries(ts, 'hour')")


@pytest.fixture
def service(tmp_path):
    yield from sales_service(tmp_path, {"by_country": BY_COUNTRY, "by_hour": BY_HOUR})


def _ctx():
    return StatementContext("s1", "me", "db1", {}, 10)


async def _upstream(sql):
    return LocalResult((("plan", "string"),), [("== Physical Plan ==",)])


HOURLY = "SELECT timeseries(ts, 'day'), sum(qty) FROM sales GROUP BY timeseries(ts, 'day')"
COUNTRY = "SELECT country, sum(qty) FROM sales GROUP BY country"


async def test_unknown_upstream_zone_blocks_time_dependent_datamaps(service):
    sel = DatamapSelectHandler(service)
    assert "by_hour" in sel(_ctx(), HOURLY).note            # zone known (or embedded)
    service.time_zone_problem = "the upstream's default zone could not be read"
    service.invalidate_schemas()                            # a new index, as at start
    d = sel(_ctx(), HOURLY)
    assert not (isinstance(d, Rewrite) and "by_hour" in d.note)
    assert [c.definition.name for c in service.candidates()] == ["by_country"]
    plan = (await DatamapDdlHandler(service)(_ctx(), "EXPLAIN " + HOURLY).runner(_upstream)
            ).rows[0][0]
    lines = plan.splitlines()
    assert "No datamap hit" in lines
    skipped = [l for l in lines if l.startswith("Skipped by_hour: ")]
    assert skipped and "TIMESTAMP column ts" in skipped[0] and "could not be read" in skipped[0]
    # a datamap that does not depend on the zone still answers
    d = sel(_ctx(), COUNTRY)
    assert isinstance(d, Rewrite) and d.note == "mv:by_country"


async def test_remote_pipeline_session_is_aligned_before_any_job(tmp_path, monkeypatch):
    """serve's App in remote mode: when the pipeline session opens, its zone is set to
    the upstream's before recovery (the first pipeline job) runs."""
    import asyncio
    from types import SimpleNamespace

    from proxy.engine import spark as engine_mod, timezone
    from proxy.app import App
    from proxy.config import ServerSettings, Settings, StateSettings, UpstreamSettings
    from proxy.datamaps import startup
    from proxy.datamaps.handler import DatamapSelectHandler as Select

    class Conf(dict):
        def set(self, k, v):
            self[k] = v
    session = SimpleNamespace(conf=Conf({timezone.TIME_ZONE_KEY: "UTC"}))
    monkeypatch.setattr(engine_mod, "open_pipeline_session", lambda state_dir, spark=None: session)
    monkeypatch.setattr(engine_mod, "close_pipeline_session", lambda s: None)
    asked = []
    monkeypatch.setattr(timezone, "upstream_time_zone",
                        lambda upstream: asked.append(upstream.host) or "Asia/Tokyo")
    seen = []
    monkeypatch.setattr(startup, "recover",
                        lambda service: seen.append(session.conf.get(timezone.TIME_ZONE_KEY)))
    monkeypatch.setattr(startup, "warm_index", lambda service: None)
    settings = Settings(state=StateSettings(dir=str(tmp_path)),
                        server=ServerSettings(host="127.0.0.1", port=0),
                        upstream=UpstreamSettings(host="sts.example", port=10000))
    app = await App(settings).start()
    try:
        service = next(h.service for h in app.router.handlers if isinstance(h, Select))
        assert await asyncio.to_thread(service.spark_provider.get) is session
        assert asked == ["sts.example"] and seen == ["Asia/Tokyo"]
        assert service.time_zone_problem is None
    finally:
        await app.close()


def test_zone_change_invalidates_only_time_dependent_datamaps(service):
    """The catalog records the zone datamaps were computed under. The first zone seen is
    recorded; another spelling of the same zone changes nothing; a different zone hides
    and disables the datamaps that depend on it (naming both zones) and no other. The
    embedded engine's zone is checked the same way at start."""
    from types import SimpleNamespace

    from proxy.datamaps.zones.pipeline import adopt_engine_zone
    from proxy.engine.timezone import TIME_ZONE_KEY
    c = service.catalog
    session = SimpleNamespace(conf={TIME_ZONE_KEY: "UTC"})
    assert adopt_engine_zone(session, service) == []
    assert c.setting("time_zone") == "UTC"
    aligned = []
    assert service.adopt_time_zone("Etc/UTC", aligned.append) == [] and aligned == ["Etc/UTC"]
    assert service.adopt_time_zone("Asia/Tokyo", aligned.append, rebuild=False) == [
        "db1.by_hour"]
    assert aligned[-1] == "Asia/Tokyo" and c.setting("time_zone") == "Asia/Tokyo"
    hour, country = c.get_datamap("db1", "by_hour"), c.get_datamap("db1", "by_country")
    assert hour.status == "DISABLED" and not c.visible_segments("db1", "by_hour")
    assert "changed from UTC to Asia/Tokyo" in hour.status_reason
    assert "REBUILD DATAMAP" in hour.status_reason
    assert country.status == "ENABLED" and c.visible_segments("db1", "by_country")
    assert [e.kind for e in c.events("db1", "by_hour")][-1] == "invalidated"
    session.conf[TIME_ZONE_KEY] = "Asia/Tokyo"
    assert adopt_engine_zone(session, service) == []
