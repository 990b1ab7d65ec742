"""The Spark configuration of one application, decided before its JVM starts. Pure but
for write_log4j2: no process, no socket (proxy/engine/spark.py launches what this describes).

`spark_settings` accepts the `[spark]` settings in any shape callers hold (proxy.config's
SparkSettings, a whole Settings, a mapping) and returns a checked SparkSettings;
`build_conf` turns it plus the state directory into the spark-submit conf.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from proxy.config import SparkSettings

_DEFAULTS = SparkSettings()


class EngineError(RuntimeError):
    """The engine could not start or stop. The message names the cause and where to look."""


def spark_settings(obj: Any) -> SparkSettings:
    """Accept a SparkSettings, the gateway's settings object (attributes), or a mapping.

    A whole config object with a `.spark` section is accepted too."""
    if obj is None:
        return SparkSettings()
    if not isinstance(obj, Mapping) and hasattr(obj, "spark") and not hasattr(obj, "master"):
        obj = obj.spark

    def get(key: str, default: Any) -> Any:
        if isinstance(obj, Mapping):
            value = obj.get(key, default)
        else:
            value = getattr(obj, key, default)
        return default if value is None else value

    uris = get("metastore_uris", ())
    if isinstance(uris, str):
        uris = [u.strip() for u in uris.split(",")]
    ui = get("ui", False)
    if isinstance(ui, str):
        ui = ui.strip().lower() in ("1", "true", "yes", "on")
    conf = get("conf", {}) or {}
    if not isinstance(conf, Mapping):
        raise EngineError(f"[spark] conf must be a table of key = value, got {type(conf).__name__}")
    memory = str(get("driver_memory", _DEFAULTS.driver_memory)).strip()
    if memory and not re.fullmatch(r"\d+[kKmMgGtT]?[bB]?", memory):
        raise EngineError(f"[spark] driver_memory {memory!r} is not a size like 2g or 768m")
    return SparkSettings(
        master=str(get("master", "") or "local[*]"),
        driver_memory=memory,
        conf={str(k): _conf_value(v) for k, v in conf.items()},
        metastore_uris=tuple(u for u in uris if u),
        ui=bool(ui),
    )


def _conf_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class StatePaths:
    root: Path

    @property
    def warehouse(self) -> Path: return self.root / "warehouse"
    @property
    def metastore_db(self) -> Path: return self.root / "metastore_db"
    @property
    def conf_dir(self) -> Path: return self.root / "conf"
    @property
    def log4j2(self) -> Path: return self.conf_dir / "log4j2.properties"
    @property
    def fair_pools(self) -> Path: return self.conf_dir / "fairscheduler.xml"
    @property
    def logs(self) -> Path: return self.root / "logs"
    @property
    def spark_log(self) -> Path: return self.logs / "spark.log"
    @property
    def jvm_out(self) -> Path: return self.logs / "jvm.out"
    @property
    def tmp(self) -> Path: return self.root / "tmp"
    @property
    def lock(self) -> Path: return self.root / "engine.lock"

    def create(self) -> None:
        for d in (self.root, self.warehouse, self.conf_dir, self.logs, self.tmp):
            d.mkdir(parents=True, exist_ok=True)


def build_conf(state: StatePaths, settings: SparkSettings, *, embedded: bool,
               app_name: str = "datamap-proxy") -> dict[str, str]:
    """The Spark conf for one application. Pure: no I/O, unit-tested.

    Everything that must be decided before the JVM starts (driver memory, Java options:
    Derby home, log4j2 file) is here, because it goes on spark-submit's command line."""
    root = state.root
    java_opts = [
        _java_property("derby.system.home", root),
        _java_property("derby.stream.error.file", state.logs / "derby.log"),
        _java_property("log4j2.configurationFile", state.log4j2),
        _java_property("java.io.tmpdir", state.tmp),
    ]
    user = dict(settings.conf)
    extra = user.pop("spark.driver.extraJavaOptions", "")
    if extra:
        java_opts.append(extra)  # the user's options come last so they win
    conf: dict[str, str] = {
        "spark.app.name": app_name,
        "spark.master": settings.master,
        "spark.ui.enabled": "true" if settings.ui else "false",
        "spark.sql.catalogImplementation": "hive",
        "spark.sql.warehouse.dir": str(state.warehouse),
        "spark.local.dir": str(state.tmp / "spark-local"),
        "spark.driver.extraJavaOptions": " ".join(java_opts),
        "spark.hadoop.hive.exec.scratchdir": str(state.tmp / "hive-scratch"),
        "spark.hadoop.hive.exec.local.scratchdir": str(state.tmp / "hive-local-scratch"),
        "spark.hadoop.hive.downloaded.resources.dir": str(state.tmp / "hive-resources"),
        # Datamap audits (pipeline/audit.py) run in a pool that yields to everything else;
        # clients, builds and refreshes keep their FIFO order in the default pool.
        "spark.scheduler.mode": "FAIR",
        # file: so that a default file system (HDFS) does not apply to it; the path spelt
        # raw: Spark reads it as a Hadoop Path, which takes the %20 of Path.as_uri()
        # literally (a state directory with a space failed to start)
        "spark.scheduler.allocation.file": f"file:{state.fair_pools}",
    }
    if settings.driver_memory:
        conf["spark.driver.memory"] = settings.driver_memory
    if settings.metastore_uris:
        conf["spark.hadoop.hive.metastore.uris"] = ",".join(settings.metastore_uris)
    else:
        # An absolute Derby URL: the metastore lands in the state dir whatever the cwd.
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"] = (
            f"jdbc:derby:;databaseName={state.metastore_db};create=true")
    if embedded:
        # Port 0: the Thrift service binds an ephemeral port and reports it back.
        conf.update({
            "spark.hadoop.hive.server2.thrift.port": "0",
            "spark.hadoop.hive.server2.thrift.bind.host": "127.0.0.1",
            "spark.hadoop.hive.server2.transport.mode": "binary",
            "spark.hadoop.hive.server2.logging.operation.log.location":
                str(state.tmp / "operation_logs"),
        })
    conf.update(user)
    return conf


def _java_property(name: str, value: object) -> str:
    """-Dname=value for spark.driver.extraJavaOptions, which Spark splits on whitespace
    unless quoted: a state dir with a space in its path stays one option."""
    option = f"-D{name}={value}"
    if re.search(r"[\s\"'\\]", option):
        return '"' + option.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return option


LOG4J2_TEMPLATE = """\
# Written by datamap-proxy at each engine start; edit [spark] conf instead.
status = warn
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = SparkFile
appender.file.type = File
appender.file.name = SparkFile
appender.file.fileName = {path}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{ISO8601}} %p %c{{1}}: %m%n%ex
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = warn
logger.hivemeta.name = org.apache.hadoop.hive.metastore.RetryingHMSHandler
logger.hivemeta.level = fatal
"""


# The pool name is pipeline/audit.py's POOL. Weights: while the default pool has tasks
# waiting, it gets a free core before the audits' pool does.
FAIR_POOLS = """\
<?xml version="1.0"?>
<!-- Written by datamap-proxy at each engine start; edit [spark] conf instead. -->
<allocations>
  <pool name="default"><schedulingMode>FIFO</schedulingMode><weight>1000</weight>
    <minShare>0</minShare></pool>
  <pool name="datamap_audit"><schedulingMode>FIFO</schedulingMode><weight>1</weight>
    <minShare>0</minShare></pool>
</allocations>
"""


def write_fair_pools(state: StatePaths) -> Path:
    state.fair_pools.write_text(FAIR_POOLS)
    return state.fair_pools


def write_log4j2(state: StatePaths, level: str = "info") -> Path:
    state.log4j2.write_text(LOG4J2_TEMPLATE.format(level=level, path=state.spark_log))
    return state.log4j2
