"""An engine running with result-affecting settings away from Spark's defaults: no datamap
answers, EXPLAIN and the query log's why-not say why, and the catalog records the settings
datamap rows were computed under (a change disables them; back under the defaults they are
rebuilt). No Spark: the engine's session is a conf mapping."""
from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.datamaps.zones.pipeline import adopt_engine_settings
from proxy.routing.router import LocalResult, PassThrough, Rewrite, StatementContext
from tests.support.datamaps import SALES_AGG as BY_COUNTRY, sales_service

COUNTRY = "SELECT country, sum(qty) FROM sales GROUP BY country"
WHY = ("the engine runs with spark.sql.ansi.enabled=false; datamap answers are proven "
       "under Spark's defaults")


@pytest.fixture
def service(tmp_path):
    yield from sales_service(tmp_path, {"by_country": BY_COUNTRY})


def _ctx():
    return StatementContext("s1", "me", "db1", {}, 10)


async def _upstream(sql):
    return LocalResult((("plan", "string"),), [("== Physical Plan ==",)])


def _engine(**conf):
    """A pipeline session as adopt_engine_settings reads it (no JVM: the table's defaults)."""
    return SimpleNamespace(conf=SimpleNamespace(getAll={k.replace("_", "."): v
                                                        for k, v in conf.items()}))


async def test_no_datamap_answers_while_the_engine_runs_with_other_settings(service, caplog):
    sel = DatamapSelectHandler(service)
    assert isinstance(sel(_ctx(), COUNTRY), Rewrite)
    with caplog.at_level(logging.WARNING, logger="proxy.app"):
        assert adopt_engine_settings(_engine(spark_sql_ansi_enabled="false"), service) == []
    assert service.engine_settings_problem == WHY
    assert any("no datamap will answer queries: " + WHY in r.getMessage()
               for r in caplog.records), caplog.text
    d = sel(_ctx(), COUNTRY)
    assert isinstance(d, PassThrough) and d.bypassed == WHY and d.why_not == (("", WHY),)
    plan = (await DatamapDdlHandler(service)(_ctx(), "EXPLAIN " + COUNTRY).runner(_upstream)
            ).rows[0][0]
    lines = plan.splitlines()
    assert "No datamap hit" in lines and f"Datamaps not used: {WHY}" in lines, plan
    # timeseries() is still Spark SQL to translate
    d = sel(_ctx(), "SELECT timeseries(ts, 'day') AS d FROM sales")
    assert isinstance(d, Rewrite) and "timeseries(" not in d.sql and d.bypassed == WHY


def test_the_catalog_records_the_settings_datamaps_were_computed_under(service):
    c = service.catalog
    assert adopt_engine_settings(_engine(), service) == []          # the first record
    assert c.setting("engine_settings") == "Spark's defaults"
    assert service.engine_settings_problem is None
    # restarted with ANSI off: every datamap is disabled (not rebuilt: nothing would read it)
    assert adopt_engine_settings(_engine(spark_sql_ansi_enabled="false"), service) == []
    rec = c.get_datamap("db1", "by_country")
    assert rec.status == "DISABLED" and not c.visible_segments("db1", "by_country")
    assert ("the engine's settings changed from Spark's defaults to "
            "spark.sql.ansi.enabled=false") in rec.status_reason
    assert c.setting("engine_settings") == "spark.sql.ansi.enabled=false"
    # back under the defaults: datamaps answer again, the invalidated ones are to be rebuilt
    assert adopt_engine_settings(_engine(spark_sql_ansi_enabled="true"), service) == [
        "db1.by_country"]
    assert service.engine_settings_problem is None
    assert c.setting("engine_settings") == "Spark's defaults"
    assert adopt_engine_settings(_engine(), service) == []          # nothing changed since
