"""doctor's check of the in-process serving engine: started as `serve` starts it (the same
LocalEngine, its Python UDF registered, the same [serving] threads and memory_limit), then
asked its check query. What fails here fails in serve too: serve then logs the same cause
and fix as an ERROR and every datamap answer comes from Spark (docs/serving.md)."""
from __future__ import annotations

from proxy.doctor.checks import FAIL, PASS, Check

NAME = "serving engine"


def check_serving_engine(enabled: bool = True, threads: int = 2,
                         memory_limit: str = "1GB") -> Check:
    if not enabled:
        return Check(NAME, PASS, "[serving] enabled = false: datamap answers come from Spark "
                                 "(not checked)")
    from proxy.serving.engine import EngineUnavailable, LocalEngine
    try:
        engine = LocalEngine(threads, memory_limit, workers=1)
    except EngineUnavailable as e:
        return _failed(e)
    try:
        engine.check()
    except EngineUnavailable as e:
        return _failed(e)
    finally:
        engine.close()
    return Check(NAME, PASS, f"DuckDB {engine.version} started and answered a query "
                             f"(threads={threads}, memory_limit={memory_limit})")


def _failed(e) -> Check:
    return Check(NAME, FAIL, f"{e.engine} could not start: {e.cause}; serve would answer every "
                             "datamap query on Spark", e.fix)
