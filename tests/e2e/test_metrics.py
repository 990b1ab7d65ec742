"""Prometheus metrics end to end (docs/metrics.md): a known workload through the shared
embedded `serve` (datamap hits served in-process and on Spark, misses, a load that
refreshes the datamap, an error), then the `[metrics] port` scraped with urllib and parsed
with prometheus_client's own parser. The shared server serves other modules too, so every
counter is read before and after and must have moved by exactly the workload."""
from __future__ import annotations

import time
import urllib.error
import urllib.request

import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from tests.support.e2e import Conn

pytestmark = pytest.mark.spark

P = "datamap_proxy_"
DM = "default.q17b_agg"
HIT = "SELECT region, sum(amount) FROM q17b_sales GROUP BY region"


def scrape(port: int, path: str = "/metrics") -> dict[tuple, float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        assert r.headers["Content-Type"] == CONTENT_TYPE_LATEST
        text = r.read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def total(got: dict, name: str, **labels) -> float:
    """Sum of the samples of `name` whose labels include `labels`."""
    want = set(labels.items())
    return sum(v for (n, lab), v in got.items() if n == name and want <= set(lab))


def test_metrics_move_by_exactly_the_workload(shared_serve):
    port = shared_serve.metrics_port
    setup = Conn(shared_serve.port)
    setup.run("CREATE TABLE q17b_sales (region STRING, amount INT) USING parquet")
    setup.run("INSERT INTO q17b_sales VALUES ('eu', 1), ('eu', 2), ('us', 5)")
    setup.run("CREATE DATAMAP q17b_agg USING 'mv' AS " + HIT)
    setup.close()
    before = _settled(port, lambda g: True)

    a = Conn(shared_serve.port)                         # USE default (PyHive)
    assert a.rows(HIT) == [("eu", 3), ("us", 5)]        # served in-process
    assert a.rows(HIT) == [("eu", 3), ("us", 5)]        # served from the result cache
    a.rows("SELECT amount FROM q17b_sales WHERE amount > 1")       # miss
    a.rows("SELECT count(DISTINCT amount) FROM q17b_sales")        # miss
    assert a.error("SELECT q17b_nope FROM q17b_sales").sqlstate    # error (a miss too)
    a.run("INSERT INTO q17b_sales VALUES ('us', 10)")              # load: refreshes q17b_agg
    b = Conn(shared_serve.port)                         # USE default
    b.run("SET datamap.serving.enabled=false")          # local
    assert b.rows(HIT) == [("eu", 3), ("us", 15)]       # a hit answered on Spark
    mid = scrape(port)
    assert total(mid, P + "sessions_open") - total(before, P + "sessions_open") == 2
    assert total(mid, P + "connections_open", transport="binary") \
        - total(before, P + "connections_open", transport="binary") == 2
    a.close()
    b.close()
    statements = 10       # 3 hits, 3 misses (one an error), the load, SET, 2 x USE
    after = _settled(port, lambda g: total(g, P + "operations_total")
                     - total(before, P + "operations_total") >= statements
                     and total(g, P + "sessions_open") == 0)

    def moved(name: str, **labels) -> float:
        return total(after, name, **labels) - total(before, name, **labels)

    assert moved(P + "operations_total") == statements
    assert moved(P + "operations_total", outcome="error") == 1
    assert moved(P + "operations_total", kind="local") == 1
    assert moved(P + "statement_duration_seconds_count") == statements
    assert moved(P + "rewrite_decisions_total", result="hit") == 3
    assert moved(P + "rewrite_decisions_total", result="miss") == 3
    assert moved(P + "rewrite_decisions_total", result="bypassed") == 0
    assert moved(P + "datamap_hits_total", datamap=DM) == 3
    assert moved(P + "datamap_served_total", datamap=DM) == 2
    assert moved(P + "sessions_opened_total") == 2
    assert moved(P + "sessions_refused_total") == 0
    assert moved(P + "connections_total", transport="binary") == 2
    assert moved(P + "rpc_duration_seconds_count", method="OpenSession") == 2
    assert moved(P + "rpc_duration_seconds_count", method="CloseSession") == 2
    assert moved(P + "rpc_duration_seconds_count", method="ExecuteStatement") == statements

    # the scrape-time side: the catalog as the load left it
    assert total(after, P + "datamap_status", datamap=DM, status="ENABLED") == 1
    assert moved(P + "datamap_job_duration_seconds_count", datamap=DM, job="refreshed") == 1
    assert moved(P + "datamap_segments", datamap=DM, status="SUCCESS") == 1
    assert total(after, P + "datamap_rows", datamap=DM) == 3      # eu, us + us again
    assert total(after, P + "datamap_size_bytes", datamap=DM) > 0
    assert total(after, P + "datamap_staleness_seconds", datamap=DM) == 0
    assert total(after, P + "datamap_job_last_duration_seconds", datamap=DM,
                 job="refreshed") > 0
    assert total(after, P + "upstream_up") == 1
    assert total(after, P + "catalog_up") == 1
    assert total(after, P + "build_info") == 1
    assert moved(P + "serving_cache_hits_total") == 1

    with pytest.raises(urllib.error.HTTPError) as e:
        scrape(port, "/nothing")
    assert e.value.code == 404


def _settled(port: int, ready, timeout: float = 15.0) -> dict:
    """A scrape once `ready(scrape)` holds and the statement count stopped moving: a
    statement is counted when its operation closes, which a client's close sends a moment
    after it returns."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        got = scrape(port)
        n = total(got, P + "operations_total")
        if (ready(got) and n == last) or time.monotonic() > deadline:
            return got
        last = n
        time.sleep(0.3)
