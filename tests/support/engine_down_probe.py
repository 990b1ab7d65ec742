"""Run by test_engine_down.py in a subprocess whose numpy cannot be imported
(tests/support/engine_down.py): the serving tier over a real catalog and real Parquet
files (test_tier.py's set-up, no Spark) while its engine cannot start, then after numpy
became importable. Prints what it saw as one JSON object on the last line of stdout.

    python -m tests.support.engine_down_probe TMPDIR
"""
from __future__ import annotations

import asyncio
import json
import logging
import sys
from pathlib import Path


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.seen: list[tuple[str, str, bool]] = []

    def emit(self, record):
        self.seen.append((record.levelname, record.getMessage(), record.exc_info is not None))

    def take(self) -> list[tuple[str, str, bool]]:
        out, self.seen = self.seen, []
        return out


def main(tmp: Path) -> dict:
    from prometheus_client.parser import text_string_to_metric_families

    from proxy.config import ServingSettings
    from proxy.datamaps.explain import served_lines
    from proxy.datamaps.handler import DatamapSelectHandler
    from proxy.datamaps.verify.auditor import Auditor
    from proxy.observability.metrics.registry import Metrics
    from proxy.observability.metrics.collect import DatamapCollector
    from proxy.routing.router import Serve
    from proxy.serving import ServingTier
    from tests.support.datamaps import add_datamap, decision_service, statement_ctx
    from tests.support.serving_tier import TIER_AGG, TIER_QUERY, TIER_SCHEMAS, publish

    records = Records()
    logger = logging.getLogger("proxy.serving")
    logger.addHandler(records)
    logger.setLevel(logging.DEBUG)
    out: dict = {}
    gen = decision_service(tmp / "state", TIER_SCHEMAS)
    service = next(gen)
    add_datamap(service, TIER_SCHEMAS, "db1", "agg", TIER_AGG, build=False)
    service.catalog.add_base_segment("db1.sales", ["file:/w/a.parquet"])
    publish(service, tmp, [("de", 3, "1.50", 1, 1), ("fr", None, None, 0, 2)])
    result = service.index().rewrite(TIER_QUERY, "db1")

    def engine_up() -> float:
        m = Metrics(DatamapCollector(service.catalog, tier))
        return next(s.value for f in text_string_to_metric_families(m.render().decode())
                    for s in f.samples if s.name == "datamap_proxy_serving_engine_up")

    # planned before the engine was started, answered when it fails to start
    tier = ServingTier(service.catalog, ServingSettings())
    h = DatamapSelectHandler(service, serving=tier)
    first = h(statement_ctx(), TIER_QUERY)
    out["planned_before_start"] = type(first).__name__
    out["answer_when_start_fails"] = list(asyncio.run(first.attempt()))[1]
    out["start_logs"] = records.take()

    # DOWN: every later decision, EXPLAIN, the audit, the metric
    d = h(statement_ctx(), TIER_QUERY)
    out["decision"] = type(d).__name__
    out["decision_note"] = getattr(d, "note", "")
    out["explain"] = served_lines(tier, result, {})
    out["explain_serving_off"] = served_lines(
        tier, result, {"datamap.serving.enabled": "false"})
    status = tier.engine_status()
    out["status"] = [status.state.value, status.cause, status.fix, status.engine]
    out["audit_served_plan"] = [None if p is None else type(p).__name__
                                for p in Auditor(service, serving=tier)._served_plan(result)]
    out["metric_down"] = engine_up()
    tier.retry()                                  # still no numpy: DOWN, no new ERROR
    out["retry_still_down"] = tier.engine_status().state.value
    out["retry_logs"] = records.take()

    # numpy installed while the proxy runs: the next retry starts the engine
    import sitecustomize
    sitecustomize.install_numpy()
    tier.retry()
    out["after_install"] = tier.engine_status().state.value
    out["install_logs"] = records.take()
    d = h(statement_ctx(), TIER_QUERY)
    out["decision_after"] = type(d).__name__
    out["answer_after"] = list(asyncio.run(d.attempt()))[1] if isinstance(d, Serve) else None
    out["explain_after"] = served_lines(tier, result, {})
    out["metric_up"] = engine_up()
    h.close()
    tier.close()
    for _ in gen:
        pass
    return out


if __name__ == "__main__":
    print(json.dumps(main(Path(sys.argv[1]))))
