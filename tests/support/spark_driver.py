"""Subprocess driver for the engine tests: keeps every SparkSession out of the pytest process.

    python -m tests.support.spark_driver embedded STATE_DIR SETTINGS_JSON
    python -m tests.support.spark_driver pipeline STATE_DIR SETTINGS_JSON

`embedded` starts proxy.engine.spark.EmbeddedEngine and prints {"ready": [host, port], "seconds": s};
`pipeline` opens proxy.engine.spark.open_pipeline_session and prints {"ready": null, "seconds": s}.
Then each stdin line is one SQL statement run on that SparkSession, answered by one JSON
line {"rows": [[...], ...]} or {"error": "..."}. At EOF it stops and prints {"stopped": s}.
Start-up failures print {"error": "..."} and exit 1.
"""
from __future__ import annotations

import json
import logging
import sys
import time
from pathlib import Path


def _say(obj: object) -> None:
    sys.stdout.write(json.dumps(obj, default=str) + "\n")
    sys.stdout.flush()


def main(argv: list[str]) -> int:
    mode, state_dir, settings = argv[0], Path(argv[1]), json.loads(argv[2])
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    from proxy.engine.spark import EmbeddedEngine, close_pipeline_session, open_pipeline_session

    t0 = time.monotonic()
    engine = None
    try:
        if mode == "embedded":
            engine = EmbeddedEngine(state_dir, settings)
            address = engine.start()
            spark = engine.spark
        else:
            address = None
            spark = open_pipeline_session(state_dir, settings)
    except Exception as exc:  # reported to the test, which asserts on it
        _say({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    _say({"ready": address, "seconds": round(time.monotonic() - t0, 2)})
    for line in sys.stdin:
        sql = line.strip()
        if not sql:
            continue
        try:
            _say({"rows": [list(r) for r in spark.sql(sql).collect()]})
        except Exception as exc:
            _say({"error": f"{type(exc).__name__}: {exc}"})
    t1 = time.monotonic()
    if engine is not None:
        alive_before = engine.alive()
        engine.stop()
        engine.stop()  # idempotent
        if not alive_before or engine.alive():
            _say({"error": f"alive() was {alive_before} before stop, {engine.alive()} after"})
            return 1
    else:
        close_pipeline_session(spark)
        close_pipeline_session(spark)  # idempotent
    _say({"stopped": round(time.monotonic() - t1, 2)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
