"""Spark behind the proxy: the embedded engine and the pipeline session of remote mode.

Embedded mode (no `--upstream`): one PySpark application per proxy process, with Hive
support, a Derby metastore and a warehouse under the state directory, and Spark's own
HiveThriftServer2 started *inside* that application on an ephemeral 127.0.0.1 port. The
proxy forwards client traffic to that port; pipeline jobs use the same SparkSession, so
both see the same tables through the same metastore.

Remote mode (`--upstream HOST:PORT`): the Thrift server is someone else's; pipeline jobs
get a SparkSession from `open_pipeline_session`, configured by the `[spark]` settings
(master, conf, metastore URIs) so that it shares the Thrift server's Hive metastore.

Everything here blocks (py4j); the asyncio side calls it through `asyncio.to_thread`.
What the JVM is started with (the checked `[spark]` settings, the Spark conf, the state
paths) is decided in proxy/engine/sparkconf.py, which starts nothing.

State directory layout (all absolute, nothing lands in the current directory):
    metastore_db/   Derby metastore (derby.system.home = state dir)
    warehouse/      spark.sql.warehouse.dir
    conf/log4j2.properties    written at each start; Spark logs go to logs/spark.log
    logs/spark.log, logs/jvm.out (the JVM's own stdout/stderr), logs/derby.log
    tmp/            spark.local.dir, Hive scratch dirs, Thrift operation logs
    engine.lock     held (flock) while an engine owns this state directory
"""
from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Mapping

from proxy.config import SparkSettings
from proxy.engine.sparkconf import (
    EngineError, StatePaths, build_conf, spark_settings, write_fair_pools, write_log4j2,
)

if TYPE_CHECKING:  # pyspark is imported lazily: the proxy must start fast in remote mode
    from pyspark.sql import SparkSession

log = logging.getLogger("proxy.engine")

THRIFT_SERVER_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
PORT_WAIT_S = 30.0


class _StateLock:
    """One engine per state directory: Derby allows one process, and two proxies writing
    one warehouse would corrupt each other's datamaps."""

    def __init__(self, path: Path):
        self.path = path
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        fh = open(self.path, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            owner = fh.read().strip() or "unknown"
            fh.close()
            raise EngineError(
                f"state directory {self.path.parent} is in use by another engine "
                f"(pid {owner}); stop it or use another --state-dir") from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


def _tail(path: Path, since: int = 0, lines: int = 15) -> str:
    """What the JVM wrote to `path` after byte offset `since`: its error lines when there
    are some (spark-submit prints its usage text after the one line that matters), else
    the last `lines` lines."""
    try:
        with open(path, "rb") as fh:
            fh.seek(since)
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    all_lines = text.splitlines()
    errors = [l for l in all_lines
              if re.search(r"error|exception|invalid|could not|not allowed", l, re.I)]
    return "\n".join((errors or all_lines)[-lines:])


class _SparkApp:
    """One JVM + SparkSession launched with stdout/stderr going to a file."""

    def __init__(self, state: StatePaths, settings: SparkSettings, *, embedded: bool):
        self.state = state
        self.settings = settings
        self.embedded = embedded
        self.session: SparkSession | None = None
        self._gateway: Any = None
        self._out: IO[bytes] | None = None

    def alive(self) -> bool:
        proc = getattr(self._gateway, "proc", None)
        return self.session is not None and proc is not None and proc.poll() is None

    def launch(self) -> SparkSession:
        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway
        from pyspark.sql import SparkSession

        if SparkContext._active_spark_context is not None:
            raise EngineError("a SparkContext is already running in this process; "
                              "one engine per process")
        if SparkContext._gateway is not None:
            # Left by a session stopped without its JVM (session.stop()): SparkContext
            # would silently reuse that JVM and ignore this launch's configuration.
            SparkContext._gateway = None
            SparkContext._jvm = None
        conf_map = build_conf(self.state, self.settings, embedded=self.embedded)
        logging.getLogger("py4j").setLevel(logging.WARNING)  # per-connection chatter
        write_log4j2(self.state)
        write_fair_pools(self.state)
        conf = SparkConf(loadDefaults=False)
        for key, value in conf_map.items():
            conf.set(key, value)
        self._out = open(self.state.jvm_out, "ab")
        offset = self._out.tell()
        log.info("engine: starting Spark JVM (master %s); Spark logs in %s",
                 self.settings.master, self.state.spark_log)
        try:
            # Own session: a signal to the proxy's process group (Ctrl-C, kill -TERM -pgid)
            # must not kill Spark under running statements; the proxy stops it after
            # draining, and the JVM exits by itself when our stdin pipe closes.
            self._gateway = launch_gateway(conf=conf, popen_kwargs={
                "stdout": self._out, "stderr": self._out, "start_new_session": True})
        except Exception as exc:
            self._close_out()
            output = _tail(self.state.jvm_out, offset)
            hint = (f"its output ({self.state.jvm_out}):\n{output}" if output else
                    "it printed nothing; is Java 17+ on PATH or JAVA_HOME set?")
            raise EngineError(f"the Spark JVM exited during start-up ({exc}); {hint}") from exc
        try:
            sc = SparkContext(conf=conf, gateway=self._gateway)
            self.session = SparkSession.builder.getOrCreate()
        except Exception as exc:
            self.stop()
            raise EngineError(f"SparkContext failed to start: {exc}. See {self.state.spark_log}"
                              ) from exc
        log.info("engine: SparkSession up (Spark %s, master %s)", sc.version, sc.master)
        return self.session

    def stop(self) -> None:
        from pyspark import SparkContext

        session, self.session = self.session, None
        if session is not None:
            try:
                session.stop()
            except Exception:  # the JVM may already be gone; stopping must not fail
                log.warning("engine: SparkSession.stop failed", exc_info=True)
        gateway, self._gateway = self._gateway, None
        if gateway is not None:
            proc = getattr(gateway, "proc", None)
            try:
                gateway.shutdown()
            except Exception:
                log.debug("engine: gateway shutdown failed", exc_info=True)
            if proc is not None:
                try:
                    proc.stdin.close()  # the JVM exits when its stdin pipe breaks
                    proc.wait(timeout=20)
                except Exception:
                    proc.kill()
                    proc.wait(timeout=10)
            # Let a later engine in this process start a fresh JVM.
            SparkContext._gateway = None
            SparkContext._jvm = None
        self._close_out()

    def _close_out(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None


class EmbeddedEngine:
    """Local Spark with Hive support plus Spark's HiveThriftServer2, in this process."""

    def __init__(self, state_dir: Path, spark: SparkSettings | Mapping | Any = None):
        self.state = StatePaths(Path(state_dir).expanduser().resolve())
        self.settings = spark_settings(spark)
        self._lock = threading.Lock()
        self._state_lock = _StateLock(self.state.lock)
        self._app: _SparkApp | None = None
        self._server: Any = None
        self._address: tuple[str, int] | None = None

    @property
    def spark(self) -> "SparkSession":
        if self._app is None or self._app.session is None:
            raise EngineError("the embedded engine is not running")
        return self._app.session

    @property
    def address(self) -> tuple[str, int] | None:
        return self._address

    def alive(self) -> bool:
        """True while started and the Spark JVM process is still running (it can die on
        its own, e.g. out of memory; the proxy then reports upstream errors)."""
        return self._address is not None and self._app is not None and self._app.alive()

    def start(self) -> tuple[str, int]:
        """Start Spark and its Thrift server; return the Thrift server's (host, port).
        Blocking, tens of seconds. Idempotent while running."""
        with self._lock:
            if self._address is not None:
                return self._address
            t0 = time.monotonic()
            self.state.create()
            self._state_lock.acquire()
            log.info("engine: state directory %s", self.state.root)
            app = _SparkApp(self.state, self.settings, embedded=True)
            try:
                session = app.launch()
                self._app = app
                log.info("engine: starting Spark Thrift server")
                self._server, port = self._start_thrift_server(session)
            except BaseException:
                self._stop_locked()
                app.stop()
                raise
            self._address = ("127.0.0.1", port)
            log.info("engine: Spark Thrift server on 127.0.0.1:%d (%.1f s)",
                     port, time.monotonic() - t0)
            return self._address

    def _start_thrift_server(self, session: "SparkSession") -> tuple[Any, int]:
        jvm = session.sparkContext._jvm
        hts = jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2
        try:
            # Spark 4: (SparkSession, exitOnError). False: a failure raises here instead of
            # calling System.exit in our process.
            server = hts.startWithSparkSession(session._jsparkSession, False)
        except Exception as exc:
            if "startWithSparkSession" not in str(exc):
                raise EngineError(f"Spark Thrift server failed to start: {exc}. "
                                  f"See {self.state.spark_log}") from exc
            server = hts.startWithContext(session._jsparkSession.sqlContext())
        deadline = time.monotonic() + PORT_WAIT_S
        while True:
            port = self._thrift_port(server)
            if port:
                return server, port
            if time.monotonic() > deadline:
                raise EngineError("Spark Thrift server started but never bound a port; "
                                  f"see {self.state.spark_log}")
            time.sleep(0.1)

    @staticmethod
    def _thrift_port(server: Any) -> int:
        for service in server.getServices():
            name = service.getClass().getName()
            if name.endswith("ThriftBinaryCLIService") or name.endswith("ThriftHttpCLIService"):
                return int(service.getPortNumber())
        return 0

    def stop(self) -> None:
        """Stop the Thrift server, Spark and the JVM. Blocking; idempotent."""
        with self._lock:
            self._stop_locked()

    def _stop_locked(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            log.info("engine: stopping Spark Thrift server")
            try:
                server.stop()
            except Exception:
                log.warning("engine: Thrift server stop failed", exc_info=True)
        app, self._app = self._app, None
        if app is not None:
            log.info("engine: stopping Spark")
            app.stop()
        self._address = None
        self._state_lock.release()


def open_pipeline_session(state_dir: Path, spark: SparkSettings | Mapping | Any = None
                          ) -> "SparkSession":
    """Remote mode: a SparkSession for pipeline jobs, sharing the upstream's metastore.

    The JVM's output and Spark's logs go to the state dir as in embedded mode. Stop it with
    `session.stop()` (the JVM exits with this process)."""
    settings = spark_settings(spark)
    state = StatePaths(Path(state_dir).expanduser().resolve())
    state.create()
    if not settings.metastore_uris and "spark.hadoop.hive.metastore.uris" not in settings.conf:
        log.warning("engine: no [spark] metastore_uris: the pipeline session uses a private "
                    "Derby metastore in %s and will not see the upstream's tables", state.root)
    app = _SparkApp(state, settings, embedded=False)
    session = app.launch()
    session._datamap_proxy_app = app  # type: ignore[attr-defined]  # for close_pipeline_session
    return session


def close_pipeline_session(session: "SparkSession") -> None:
    """Stop a session from open_pipeline_session and its JVM, so that another can be opened
    in this process with a different configuration. Idempotent."""
    app = getattr(session, "_datamap_proxy_app", None)
    if app is not None:
        app.stop()
    else:
        session.stop()
