"""An engine that runs with a result-affecting setting away from Spark's defaults, on real
Spark: with spark.sql.decimalOperations.allowPrecisionLoss=false, Spark types
`sum(a) / sum(b)` over DECIMAL(20,2) and DECIMAL(20,0) columns DECIMAL(38,21), where the
answer served from the datamap (computed as under Spark's defaults) is DECIMAL(38,10). Once
the engine's settings are read (proxy/datamaps/zones/pipeline.py adopt_engine_settings, run
at start), the query goes to Spark, which gives its own answer, and EXPLAIN says why.

The shared pipeline session stands for the embedded engine; the setting is set on it for
the test and restored afterwards."""
from __future__ import annotations

import uuid
from decimal import Decimal

import duckdb
import pytest

from proxy.config import ServingSettings
from proxy.datamaps.handler import DatamapDdlHandler, DatamapSelectHandler
from proxy.datamaps.zones.pipeline import adopt_engine_settings
from proxy.routing.router import LocalResult, PassThrough, Serve, StatementContext
from proxy.serving.tier import ServingTier
from tests.support.datamaps import add_datamap, decision_service

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

KEY = "spark.sql.decimalOperations.allowPrecisionLoss"
ROWS = [(1, "12.34", "7"), (1, "0.01", "0"), (2, "-5.00", "3")]


def _spark_answer(spark, sql):
    df = spark.sql(sql)
    return ([(f.name, f.dataType.simpleString()) for f in df.schema.fields],
            sorted(tuple(r) for r in df.collect()))


def _schemas(db: str, name: str) -> dict:
    return {db: {name: {"g": "int", "a": "decimal(20,2)", "b": "decimal(20,0)"}}}


def _published(service, db, name, tmp_path) -> None:
    """Datamap dec_sums over db.name, its one segment holding the sums of ROWS, written as the
    pipeline stores them (no Spark job: the datamap's build is not what is tested here)."""
    add_datamap(service, _schemas(db, name), db, "dec_sums",
                f"SELECT g, sum(a), sum(b) FROM {db}.{name} GROUP BY g", build=False)
    c = service.catalog
    c.add_base_segment(f"{db}.{name}", [f"file:/w/{name}/a.parquet"])
    sid = c.begin_segment(db, "dec_sums", {f"{db}.{name}": ["0"]})
    path = tmp_path / "dec_sums" / "part-0.parquet"
    path.parent.mkdir()
    duckdb.sql(f"COPY (SELECT * FROM (VALUES (1, 12.35::DECIMAL(30,2), 7::DECIMAL(30,0)), "
               f"(2, -5.00::DECIMAL(30,2), 3::DECIMAL(30,0))) AS s(g, sum_a, sum_b)) "
               f"TO '{path}' (FORMAT parquet)")
    c.publish_segment(db, "dec_sums", sid, rows=2, files=[path.as_uri()], kind="built")


async def _explain(service, tier, ctx, query) -> list[str]:
    async def upstream(sql):
        return LocalResult((("plan", "string"),), [("== Physical Plan ==",)])
    return (await DatamapDdlHandler(service, serving=tier)(ctx, "EXPLAIN " + query)
            .runner(upstream)).rows[0][0].splitlines()


async def test_an_engine_without_precision_loss_gets_sparks_answer(pipeline_spark, tmp_path):
    spark = pipeline_spark
    db, name = "global_temp", f"dec_{uuid.uuid4().hex[:6]}"   # no files: no write job
    spark.sql(f"SELECT * FROM VALUES {', '.join(f'({g}, {a}, {b})' for g, a, b in ROWS)} "
              "AS v(g, a, b)").selectExpr("g", "CAST(a AS DECIMAL(20,2)) AS a",
                                          "CAST(b AS DECIMAL(20,0)) AS b"
                                          ).createGlobalTempView(name)
    query = f"SELECT g, sum(a) / sum(b) AS r FROM {db}.{name} GROUP BY g"
    ctx = StatementContext("s", "me", db, {}, 10)
    service = next(services := decision_service(tmp_path / "state", _schemas(db, name)))
    _published(service, db, name, tmp_path)
    assert adopt_engine_settings(spark, service) == []   # Spark's defaults: recorded
    tier = ServingTier(service.catalog, ServingSettings())
    select = DatamapSelectHandler(service, serving=tier)
    try:
        served = select(ctx, query)
        assert isinstance(served, Serve), served
        result, how = await served.attempt()
        assert how.startswith("local"), how
        # a decimal comes as the text HiveServer2 sends (the columnar result) or a Decimal
        got = (list(result.columns), sorted((g, Decimal(str(r))) for g, r in result.rows))
        assert got == ([("g", "int"), ("r", "decimal(38,10)")],
                       [(1, Decimal("1.7642857143")), (2, Decimal("-1.6666666667"))])
        assert _spark_answer(spark, query) == got           # Spark's, under its defaults

        spark.conf.set(KEY, "false")        # the engine as an operator's [spark] conf sets it
        try:
            want = _spark_answer(spark, query)
            assert want[0] == [("g", "int"), ("r", "decimal(38,21)")]     # not the served one
            assert want[1][0][1] != got[1][0][1]
            adopt_engine_settings(spark, service)
            why = (f"the engine runs with {KEY}=false; datamap answers are proven under "
                   "Spark's defaults")
            assert service.engine_settings_problem == why
            d = select(ctx, query)
            assert isinstance(d, PassThrough) and d.why_not == (("", why),), d
            assert _spark_answer(spark, query) == want          # what the client gets

            lines = await _explain(service, tier, ctx, query)
            assert "No datamap hit" in lines and f"Datamaps not used: {why}" in lines, lines
        finally:
            spark.conf.unset(KEY)
    finally:
        select.close()
        tier.close()
        next(services, None)                 # closes the service and its catalog
        spark.catalog.dropGlobalTempView(name)
