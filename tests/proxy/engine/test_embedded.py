"""Embedded engine, for real: EmbeddedEngine in a subprocess (never a SparkSession in the
pytest process), PyHive against its in-process Spark Thrift server, the same SparkSession
used as the pipeline session, one engine per state directory, and what it leaves there.
`python -m proxy serve` (embedded) restarted on its state directory, with beeline and PyHive
through the proxy, is tests/e2e/test_mv_guide.py's restart (one Spark start fewer)."""
from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.support.clients import pyhive_connect, pyhive_execute
from tests.support.driver_client import SparkDriver
from tests.support.ports import free_port

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]
REPO = Path(__file__).resolve().parents[3]

SETTINGS = {"master": "local[2]", "driver_memory": "1g", "ui": False,
            "conf": {"spark.sql.shuffle.partitions": "4"}}


def _query(port: int, *statements: str):
    conn = pyhive_connect("127.0.0.1", port)
    try:
        cur = conn.cursor()
        return [pyhive_execute(cur, s).rows for s in statements]
    finally:
        conn.close()


def test_embedded_engine_serves_and_persists(tmp_path: Path):
    state = tmp_path / "state dir"  # a space: Java options and paths must survive it
    log = tmp_path / "driver.log"
    first = SparkDriver("embedded", state, SETTINGS, log)
    try:
        assert "error" not in first.hello, first.hello
        host, port = first.hello["ready"]
        assert host == "127.0.0.1"
        print(f"embedded engine start-up: {first.hello['seconds']} s")

        # One engine per state dir: a second one fails fast and says why (no JVM started).
        second = SparkDriver("embedded", state, SETTINGS, tmp_path / "second.log", timeout=60)
        assert "in use by another engine" in second.hello.get("error", ""), second.hello
        assert second.close() is None

        # Clients through the in-process Thrift server.
        rows = _query(port,
                      "CREATE TABLE sales (id INT, region STRING, amount DECIMAL(10,2)) "
                      "USING parquet",
                      "INSERT INTO sales VALUES (1, 'north', 10.50), (2, 'south', NULL), "
                      "(3, 'north', -2.25)",
                      "SELECT id, region, amount FROM sales ORDER BY id")
        assert [tuple(r) for r in rows[-1]] == [
            (1, "north", pytest.approx(10.5)), (2, "south", None), (3, "north", -2.25)]

        # The pipeline session is the same Spark application: it sees the client's table,
        # and a table it writes is visible to clients.
        assert first.sql("SELECT region, CAST(SUM(amount) AS STRING) FROM sales "
                         "GROUP BY region ORDER BY region") == [["north", "8.25"], ["south", None]]
        first.sql("CREATE TABLE from_pipeline USING parquet AS "
                  "SELECT region, COUNT(*) AS n FROM sales GROUP BY region")
        assert _query(port, "SELECT region, n FROM from_pipeline ORDER BY region") == [
            [("north", 2), ("south", 1)]]

        # doctor, while the engine runs: the state dir is locked (a warning, not a failure)
        # and its Thrift server answers a real OpenSession.
        from proxy import doctor
        lines: list[str] = []
        target = doctor.Target("127.0.0.1", free_port(), state.resolve(), (host, port),
                               "plain", "doctor", "x", (), 90.0)
        assert doctor.report(doctor.run_checks(target), lines.append) == 0, lines
        assert any(l.startswith("[WARN] state dir lock") for l in lines), lines
        assert any("OpenSession ok" in l for l in lines), lines
        # Its metastore is the engine's private Derby: reported, as a warning.
        assert any(l.startswith("[WARN] shared metastore") for l in lines), lines

        # The Thrift server listens on loopback only.
        addr = _non_loopback_address()
        if addr is not None:
            with pytest.raises(OSError):
                socket.create_connection((addr, port), timeout=2).close()

        stopped = first.close()
        assert stopped is not None and "stopped" in stopped, first.tail()
        assert first.proc.returncode == 0
    finally:
        first.kill()

    # Nothing leaked into the working directory; everything is under the state dir.
    assert list(first.cwd.iterdir()) == []
    assert (state / "metastore_db").is_dir()
    assert (state / "warehouse" / "sales").is_dir()
    assert (state / "logs" / "spark.log").stat().st_size > 0
    driver_log = log.read_text(errors="replace")
    assert "Setting default log level" not in driver_log  # JVM noise went to logs/jvm.out
    assert " INFO SparkContext" not in driver_log
    assert "engine: Spark Thrift server on 127.0.0.1:" in driver_log


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET: no packet is sent for UDP connect
            addr = s.getsockname()[0]
        except OSError:
            return None
    return None if addr.startswith("127.") else addr


def test_engine_start_failure_is_reported_not_hung(tmp_path: Path):
    """A broken JVM option: start() raises EngineError carrying the JVM's own complaint."""
    bad = dict(SETTINGS, conf={"spark.driver.extraJavaOptions": "-Xmxbogus"})
    t0 = time.monotonic()
    drv = SparkDriver("embedded", tmp_path / "state", bad, tmp_path / "bad.log", timeout=120)
    try:
        err = drv.hello.get("error", "")
        assert err.startswith("EngineError"), drv.hello
        assert "jvm.out" in err and "-Xmxbogus" in err, err
        assert time.monotonic() - t0 < 120
    finally:
        drv.close()
        drv.kill()
