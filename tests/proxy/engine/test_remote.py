"""Remote topology, for real, on one machine, started by the deploy/local scripts:
a standalone Hive metastore, a Spark standalone master + worker, a Spark Thrift Server
executing on that worker, and a pipeline SparkSession (proxy.engine.spark.open_pipeline_session,
in a subprocess) on the same cluster and metastore. Tables cross in both directions, and
datamaps live their whole life through a remote-mode proxy started by proxy.sh.

The warehouse is `viewfs://rmwh/warehouse`, a Hadoop mount over a local directory that
every JVM of the topology reads from HADOOP_CONF_DIR's core-site.xml (as a platform team's
HDFS or s3a:// warehouse), and that the proxy's Python cannot open: the proxy's datamap
answers are served in-process from its segment mirror, copied by its pipeline session."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.support.clients import pyhive_connect, pyhive_execute
from tests.support.driver_client import SparkDriver
from tests.support.ports import free_port
from tests.support.sts import FAST_START_JVM_OPTS
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(420)]

REPO = Path(__file__).resolve().parents[3]
DEPLOY = REPO / "deploy" / "local"
CORE = "metastore spark-master spark-worker thrift-server"
MOUNT = "rmwh"
WAREHOUSE = f"viewfs://{MOUNT}/warehouse"
MIRRORED = "Served by: local engine (mirror)"


def _run(script: str, *args: str, env: dict | None = None, timeout: float = 300):
    proc = subprocess.run([str(DEPLOY / script), *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=timeout,
                          stdin=subprocess.DEVNULL)
    return proc


@pytest.fixture(scope="module")
def topology(tmp_path_factory):
    """start.sh with everything but the proxy; meanwhile, a pipeline session (local[2]
    driver, the topology's metastore) starts in a subprocess: its Hive client connects
    lazily, at the first query, so both start-ups overlap."""
    root = tmp_path_factory.mktemp("topology")
    ms_port = free_port()
    scripts = {**_viewfs_warehouse(root), **_fast_start_jvms()}
    start = subprocess.Popen([str(DEPLOY / "start.sh"), str(root)], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             env={**os.environ, **scripts, "COMPONENTS": CORE,
                                  "METASTORE_PORT": str(ms_port)})
    with pytest.MonkeyPatch.context() as env:     # SparkDriver passes on os.environ
        env.setenv("JAVA_TOOL_OPTIONS", scripts["JAVA_TOOL_OPTIONS"])
        pipeline = SparkDriver("pipeline", root / "pipeline-state",
                               _pipeline_settings(f"thrift://127.0.0.1:{ms_port}", root),
                               root / "pipeline.log", wait=False)
    try:
        out, _ = start.communicate(timeout=300)
        assert start.returncode == 0, out
        env = dict(line.split("=", 1) for line in
                   (root / "topology.env").read_text().splitlines() if "=" in line)
        assert env["WAREHOUSE"] == WAREHOUSE, env
        env["DIR"] = str(root)
        env["SCRIPTS"] = scripts
        yield env, pipeline
    finally:
        if start.poll() is None:
            start.kill()
        pipeline.close()
        pipeline.kill()
        stopped = _run("stop.sh", str(root), timeout=120)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        leftover = list((root / "pids").glob("*.pid"))
        assert not leftover, f"stop.sh left {leftover}"


def _viewfs_warehouse(root: Path) -> dict[str, str]:
    """The deploy scripts' environment for a warehouse at WAREHOUSE, mounted over
    root/cluster by root/hadoop-conf/core-site.xml."""
    (root / "cluster").mkdir()
    conf = root / "hadoop-conf"
    conf.mkdir()
    (conf / "core-site.xml").write_text(
        '<?xml version="1.0"?>\n<configuration>\n'
        f"  <property><name>fs.viewfs.mounttable.{MOUNT}.link./warehouse</name>"
        f"<value>{(root / 'cluster').as_uri()}</value></property>\n</configuration>\n")
    return {"WAREHOUSE": WAREHOUSE, "HADOOP_CONF_DIR": str(conf)}


def _fast_start_jvms() -> dict[str, str]:
    """Every JVM of the topology (metastore, master, worker, its executors, Thrift server,
    pipeline sessions, and the proxy's) with the tests' start-up options (C1-only JIT,
    serial GC): about ten JVMs start on 2 cores here, each running little but its start-up.
    JAVA_TOOL_OPTIONS, because every JVM reads it and passes it to the ones it starts."""
    return {"JAVA_TOOL_OPTIONS": " ".join(
        o for o in (os.environ.get("JAVA_TOOL_OPTIONS", ""), FAST_START_JVM_OPTS) if o)}


def _sts(topology) -> tuple[str, int]:
    host, port = topology[0]["THRIFT_SERVER"].split(":")
    return host, int(port)


def _query(host: str, port: int, *statements: str):
    conn = pyhive_connect(host, port)
    try:
        cur = conn.cursor()
        return [pyhive_execute(cur, s).rows for s in statements]
    finally:
        conn.close()


def _pipeline_settings(metastore_uri: str, root: Path) -> dict:
    """What a [spark] section for the pipeline session says. local[2]: the Thrift server is
    the one that runs on the cluster here (the proxy.sh topology uses the cluster for both).
    The warehouse's mount is in its conf (proxy.sh's proxy reads it from HADOOP_CONF_DIR)."""
    return {"master": "local[2]", "driver_memory": "768m", "metastore_uris": metastore_uri,
            "conf": {"spark.sql.warehouse.dir": WAREHOUSE,
                     f"spark.hadoop.fs.viewfs.mounttable.{MOUNT}.link./warehouse":
                         (root / "cluster").as_uri(),
                     "spark.sql.shuffle.partitions": "4"}}


def test_scripts_are_valid_bash():
    for script in DEPLOY.glob("*.sh"):
        proc = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True)
        assert proc.returncode == 0, f"{script.name}: {proc.stderr}"
        assert os.access(script, os.X_OK) or script.name == "common.sh", script.name


def test_scripts_refuse_missing_dir_and_missing_dependencies(tmp_path: Path):
    usage = _run("metastore.sh")
    assert usage.returncode != 0 and "usage: metastore.sh DIR" in usage.stderr
    orphan = _run("thrift-server.sh", str(tmp_path))
    assert orphan.returncode != 0 and "no metastore in" in orphan.stderr
    spaced = _run("start.sh", str(tmp_path / "a b"))
    assert spaced.returncode != 0 and "must not contain whitespace" in spaced.stderr


def test_thrift_server_runs_queries_on_cluster_executors(topology):
    host, port = _sts(topology)
    rows = _query(host, port,
                  "CREATE TABLE sts_sales (id INT, region STRING, amount DOUBLE) USING parquet",
                  "INSERT INTO sts_sales VALUES (1, 'north', 10.5), (2, 'south', NULL), "
                  "(3, 'north', -2.25)",
                  "SELECT region, SUM(amount), COUNT(*) FROM sts_sales GROUP BY region "
                  "ORDER BY region")
    assert rows[-1] == [("north", 8.25, 2), ("south", None, 1)]
    # Tasks ran in an executor launched by the standalone worker, not in the driver.
    logs = glob.glob(f"{topology[0]['DIR']}/spark-worker/work/app-*/*/stderr")
    assert logs, "the worker launched no executor"
    assert any("Finished task" in Path(p).read_text(errors="replace") for p in logs)


def test_pipeline_session_shares_the_metastore_both_ways(topology):
    host, port = _sts(topology)
    env, drv = topology
    _query(host, port,
           "CREATE TABLE IF NOT EXISTS from_sts (k STRING, v BIGINT) USING parquet",
           "INSERT INTO from_sts VALUES ('a', 1), ('b', NULL), ('a', -3)")
    hello = drv.wait_ready(180)
    assert "error" not in hello, hello
    print(f"pipeline session start-up: {hello['seconds']} s")
    # Sees the table created through the Thrift server...
    assert drv.sql("SELECT k, SUM(v), COUNT(*) FROM from_sts GROUP BY k ORDER BY k") == [
        ["a", -2, 2], ["b", None, 1]]
    # ...and what it writes is visible through the Thrift server.
    drv.sql("CREATE TABLE from_pipeline USING parquet AS "
            "SELECT k, COUNT(v) AS n FROM from_sts GROUP BY k")
    assert _query(host, port, "SELECT k, n FROM from_pipeline ORDER BY k") == [
        [("a", 2), ("b", 0)]]
    assert "stopped" in (drv.close() or {}), drv.tail()
    # The pipeline session had no private Derby metastore.
    assert not (Path(env["DIR"]) / "pipeline-state" / "metastore_db").exists()


def test_proxy_in_remote_mode_forwards_to_the_thrift_server(topology):
    host, port = _sts(topology)
    _query(host, port, "CREATE TABLE IF NOT EXISTS via_proxy (x INT) USING parquet",
           "INSERT INTO via_proxy VALUES (7), (8)")
    env, _ = topology
    started = _run("proxy.sh", env["DIR"], env=env["SCRIPTS"], timeout=120)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        proxy_port = int((Path(env["DIR"]) / "ports" / "proxy").read_text())
        assert _query("127.0.0.1", proxy_port, "SELECT SUM(x) FROM via_proxy") == [[(15,)]]
    finally:
        stopped = _run("stop.sh", env["DIR"], "proxy", timeout=60)
        assert stopped.returncode == 0, stopped.stderr


def test_doctor_probes_the_real_thrift_server_and_metastore(topology, capsys):
    from proxy import doctor

    env, _ = topology
    args = ["--upstream", env["THRIFT_SERVER"], "--metastore-uris", env["METASTORE_URI"],
            "--state-dir", str(Path(env["DIR"]) / "doctor-state"), "--port", str(free_port())]
    assert doctor.main(args) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert f"[PASS] upstream {env['THRIFT_SERVER']}" in out and "OpenSession ok" in out
    assert f"[PASS] metastore {env['METASTORE_URI']}" in out and "default" in out
    assert "[PASS] shared metastore" in out
    # A pipeline pointed at another metastore than the Thrift server's is caught.
    other = ["--metastore-uris", f"thrift://127.0.0.1:{free_port()}"]
    assert doctor.main(args + other) == 1
    out = capsys.readouterr().out
    assert "[FAIL] shared metastore" in out and env["METASTORE_URI"] in out
    # Wrong transport: the server speaks SASL, doctor is told NOSASL.
    assert doctor.main(args + ["--upstream-auth", "nosasl", "--timeout", "5"]) == 1
    out = capsys.readouterr().out
    assert "OpenSession failed" in out and "--upstream-auth plain" in out


def _explain(cur, sql: str) -> list[str]:
    return pyhive_execute(cur, "EXPLAIN " + sql).rows[0][0].splitlines()


def _base_rows(port: int, sql: str) -> list[tuple]:
    """Spark's own answer through the proxy: a fresh session with rewriting off (a Thrift
    server session caches a table's file listing for its lifetime)."""
    conn = pyhive_connect("127.0.0.1", port)
    try:
        cur = conn.cursor()
        pyhive_execute(cur, "SET datamap.rewrite.enabled=false")
        return sorted(pyhive_execute(cur, sql).rows, key=repr)
    finally:
        conn.close()


def _served_by(cur, sql: str) -> str:
    return next((line for line in _explain(cur, sql) if line.startswith("Served by:")), "")


def _mirrored(cur, sql: str) -> None:
    """Wait until the datamap answering `sql` is served from the mirror (its segments'
    copies made after the publish, in the background)."""
    wait_until(lambda: _served_by(cur, sql) == MIRRORED, timeout=60, interval=0.3,
               what="the datamap's segments mirrored", detail=lambda: _served_by(cur, sql))


def _timed(cur, sql: str) -> tuple[float, list[tuple]]:
    t0 = time.monotonic()
    rows = pyhive_execute(cur, sql).rows
    return time.monotonic() - t0, rows


def test_datamaps_end_to_end_through_a_remote_mode_proxy(topology):
    """What a platform team runs: datamaps created, refreshed and queried through a proxy in
    remote mode (proxy.sh: its pipeline session on the cluster and the shared metastore),
    with writes both through the proxy and directly to the Thrift server, and a restart.
    The warehouse is on viewfs://: after each publish the answers are served in-process
    from the proxy's mirror of the datamap's segments, equal to Spark's."""
    env, _ = topology
    sts_host, sts_port = _sts(topology)
    mirror = Path(env["DIR"]) / "proxy" / "state" / "serving-mirror"
    figures: dict[str, float] = {}
    t0 = time.monotonic()
    started = _run("proxy.sh", env["DIR"], env=env["SCRIPTS"], timeout=120)
    assert started.returncode == 0, started.stdout + started.stderr
    figures["proxy start"] = time.monotonic() - t0
    port = int((Path(env["DIR"]) / "ports" / "proxy").read_text())
    q = "SELECT region, SUM(amount), COUNT(*) FROM rm_sales GROUP BY region"
    q_lazy = "SELECT region, MAX(qty) FROM rm_sales GROUP BY region"
    conn = None
    try:
        conn = pyhive_connect("127.0.0.1", port)
        cur = conn.cursor()
        pyhive_execute(cur, "CREATE TABLE rm_sales (id INT, region STRING, amount DOUBLE, "
                            "qty INT) USING parquet")
        pyhive_execute(cur, "INSERT INTO rm_sales VALUES (1, 'north', 10.5, 3), "
                            "(2, 'south', NULL, 1), (3, 'north', -2.25, NULL), (4, 'east', 4.0, 7)")
        # Non-lazy: built at CREATE by the pipeline session (its first use opens it).
        figures["CREATE DATAMAP (incl. pipeline session start)"], _ = _timed(
            cur, "CREATE DATAMAP rm_agg USING 'mv' AS SELECT region, SUM(amount), COUNT(*) "
                 "FROM rm_sales GROUP BY region")
        datamaps = {r[0]: r for r in pyhive_execute(cur, "SHOW DATAMAP").rows}
        assert datamaps["rm_agg"][2:5:2] == ("default.rm_agg_table", "ENABLED"), datamaps
        assert "Hit mv DataMap: rm_agg" in _explain(cur, q)
        t0 = time.monotonic()
        _mirrored(cur, q)
        figures["CREATE DATAMAP until served from the mirror"] = time.monotonic() - t0
        want = [("east", 4.0, 1), ("north", 8.25, 2), ("south", None, 1)]
        assert sorted(pyhive_execute(cur, q).rows, key=repr) == _base_rows(port, q) == want
        # Its files were written through viewfs:// (the proxy's Python cannot open them)
        # into the mounted directory; the copies are local, byte for byte.
        written = sorted(p.read_bytes() for p in (Path(env["DIR"]) / "cluster").rglob(
            "*.parquet") if "rm_agg_table" in str(p))
        assert written and written == sorted(p.read_bytes() for p in mirror.rglob("*.parquet"))
        assert not (Path(env["DIR"]) / "warehouse").exists()

        # Loads through the proxy: each one an incremental segment mapped to its base segment.
        for i, values in enumerate(["(5, 'north', 1.75, 2)",
                                    "(6, 'west', 3.0, 5), (7, 'south', 2.5, 4)"], start=1):
            seconds, _ = _timed(cur, f"INSERT INTO rm_sales VALUES {values}")
            figures[f"INSERT {i} + incremental refresh"] = seconds
            segs = pyhive_execute(cur, "SHOW SEGMENTS FOR TABLE rm_agg_table").rows
            assert [s[0] for s in segs] == [str(k) for k in range(i, -1, -1)], segs
            assert segs[0][1] == "Success", segs
            assert json.loads(segs[0][6]) == {"default.rm_sales": [str(i)]}, segs
            assert "Hit mv DataMap: rm_agg" in _explain(cur, q)
            t0 = time.monotonic()
            _mirrored(cur, q)       # the new segment's copy: served in-process again
            figures[f"load {i}'s segment until served from the mirror"] = time.monotonic() - t0
            assert sorted(pyhive_execute(cur, q).rows, key=repr) == _base_rows(port, q)

        # A lazy datamap: DISABLED until REBUILD.
        pyhive_execute(cur, "CREATE DATAMAP rm_lazy USING 'mv' WITH DEFERRED REBUILD AS "
                            "SELECT region, MAX(qty) FROM rm_sales GROUP BY region")
        datamaps = {r[0]: r for r in pyhive_execute(cur, "SHOW DATAMAP").rows}
        assert datamaps["rm_lazy"][4:6] == ("DISABLED", "NA"), datamaps
        assert "No datamap hit" in _explain(cur, q_lazy)
        pyhive_execute(cur, "REBUILD DATAMAP rm_lazy")
        assert "Hit mv DataMap: rm_lazy" in _explain(cur, q_lazy)
        assert sorted(pyhive_execute(cur, q_lazy).rows, key=repr) == _base_rows(port, q_lazy)

        # A write straight to the Thrift server: the proxy learns of it from SYNC DATAMAPS.
        _query(sts_host, sts_port, "INSERT INTO rm_sales VALUES (8, 'east', 100.0, 9)")
        t0 = time.monotonic()
        synced = pyhive_execute(cur, "SYNC DATAMAPS ON TABLE rm_sales").rows
        figures["SYNC DATAMAPS (1 new file)"] = time.monotonic() - t0
        assert len(synced) == 1 and synced[0][:3] == ("default.rm_sales", "3", 1), synced
        assert json.loads(synced[0][4]) == {"default.rm_agg": "refreshed",
                                            "default.rm_lazy": "disabled"}, synced
        segs = pyhive_execute(cur, "SHOW SEGMENTS FOR TABLE rm_agg_table").rows
        assert json.loads(segs[0][6]) == {"default.rm_sales": ["3"]}, segs
        assert "Hit mv DataMap: rm_agg" in _explain(cur, q)
        got = sorted(pyhive_execute(cur, q).rows, key=repr)
        assert got == _base_rows(port, q) and ("east", 104.0, 2) in got, got
        assert "No datamap hit" in _explain(cur, q_lazy)

        # Query time through the proxy: from the datamap vs from the base table.
        for label, rewrite in (("query from datamap", "true"), ("query from base", "false")):
            pyhive_execute(cur, f"SET datamap.rewrite.enabled={rewrite}")
            _timed(cur, q)
            figures[label] = min(_timed(cur, q)[0] for _ in range(3))
        pyhive_execute(cur, "SET datamap.rewrite.enabled=true")
        conn.close()
        conn = None

        # Restart the proxy on the same state dir: the datamap still answers. This time
        # with the periodic sync on ([datamaps] sync_interval_s, from the environment).
        stopped = _run("stop.sh", env["DIR"], "proxy", timeout=60)
        assert stopped.returncode == 0, stopped.stderr
        t0 = time.monotonic()
        started = _run("proxy.sh", env["DIR"], timeout=120,
                       env={**env["SCRIPTS"], "DATAMAP_PROXY_DATAMAPS_SYNC_INTERVAL_S": "2"})
        assert started.returncode == 0, started.stdout + started.stderr
        conn = pyhive_connect("127.0.0.1", port)
        cur = conn.cursor()
        wait_until(lambda: "Hit mv DataMap: rm_agg" in _explain(cur, q), timeout=90,
                   interval=0.5, what="rm_agg to answer", detail=lambda: _explain(cur, q))
        figures["restart until the datamap answers"] = time.monotonic() - t0
        _mirrored(cur, q)           # the copies kept in the state dir, checked at start
        assert sorted(pyhive_execute(cur, q).rows, key=repr) == _base_rows(port, q)
        assert [s[0] for s in pyhive_execute(cur, "SHOW SEGMENTS FOR TABLE rm_agg_table").rows
                if s[1] == "Success"] == ["3", "2", "1", "0"]

        # Another write straight to the Thrift server: the periodic sync finds it, with no
        # statement from anyone, and the datamap answers with the new rows.
        east = {r[0]: r for r in pyhive_execute(cur, q).rows}["east"]
        _query(sts_host, sts_port, "INSERT INTO rm_sales VALUES (9, 'east', 6.5, 2)")
        t0 = time.monotonic()
        segments = lambda: pyhive_execute(cur, "SHOW SEGMENTS FOR TABLE rm_agg_table").rows  # noqa: E731
        wait_until(lambda: [s[0] for s in segments() if s[1] == "Success"] == ["4", "3", "2", "1", "0"],
                   timeout=90, interval=0.5, what="the periodic sync's segment", detail=segments)
        figures["periodic sync (2 s interval) until refreshed"] = time.monotonic() - t0
        assert "Hit mv DataMap: rm_agg" in _explain(cur, q)
        assert sorted(pyhive_execute(cur, q).rows, key=repr) == _base_rows(port, q)
        assert ("east", east[1] + 6.5, east[2] + 1) in pyhive_execute(cur, q).rows

        # DROP TABLE through the proxy cascades to the datamaps and their tables.
        pyhive_execute(cur, "DROP TABLE rm_sales")
        assert not [r for r in pyhive_execute(cur, "SHOW DATAMAP").rows
                    if r[0] in ("rm_agg", "rm_lazy")]
        tables = {r[1] for r in _query(sts_host, sts_port, "SHOW TABLES")[0]}
        assert not tables & {"rm_sales", "rm_agg_table", "rm_lazy_table"}, tables
        wait_until(lambda: not list(mirror.rglob("*.parquet")), timeout=30, interval=0.3,
                   what="the dropped datamaps' copies removed",
                   detail=lambda: list(mirror.rglob("*")))
    finally:
        if conn is not None:
            conn.close()
        print("remote-mode datamap figures (s): " + ", ".join(
            f"{k} {v:.2f}" for k, v in figures.items()))
        stopped = _run("stop.sh", env["DIR"], "proxy", timeout=60)
        assert stopped.returncode == 0, stopped.stderr
