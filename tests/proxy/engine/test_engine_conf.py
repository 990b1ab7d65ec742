"""Pure parts of the engine (proxy/engine/sparkconf.py, proxy/engine/spark.py): settings duck-typing, the Spark conf, the state lock."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from proxy.config import SparkSettings
from proxy.engine.spark import _StateLock
from proxy.engine.sparkconf import (EngineError, StatePaths, _java_property, build_conf, spark_settings,
                             write_fair_pools, write_log4j2)


@dataclass(frozen=True)
class GatewaySparkSection:  # the shape the gateway's frozen config object has
    master: str = "spark://h:7077"
    driver_memory: str = "2g"
    conf: dict = field(default_factory=lambda: {"spark.sql.shuffle.partitions": 4})
    metastore_uris: str = "thrift://m1:9083, thrift://m2:9083"
    ui: bool = True


@dataclass(frozen=True)
class GatewayConfig:
    spark: GatewaySparkSection = GatewaySparkSection()


def test_settings_from_attributes_mapping_and_whole_config():
    expected = SparkSettings(master="spark://h:7077", driver_memory="2g",
                             conf={"spark.sql.shuffle.partitions": "4"},
                             metastore_uris=("thrift://m1:9083", "thrift://m2:9083"), ui=True)
    assert spark_settings(GatewaySparkSection()) == expected
    assert spark_settings(GatewayConfig()) == expected
    assert spark_settings({"master": "spark://h:7077", "driver_memory": "2g",
                           "conf": {"spark.sql.shuffle.partitions": 4},
                           "metastore_uris": ["thrift://m1:9083", "thrift://m2:9083"],
                           "ui": "true"}) == expected


def test_settings_defaults_for_missing_or_none():
    assert spark_settings(None) == SparkSettings()
    assert spark_settings({}) == SparkSettings(master="local[*]")
    assert spark_settings({"master": None, "conf": None}).master == "local[*]"


def test_settings_reject_non_table_conf_and_bad_memory():
    with pytest.raises(EngineError, match="conf must be a table"):
        spark_settings({"conf": "spark.x=1"})
    with pytest.raises(EngineError, match="driver_memory 'lots' is not a size"):
        spark_settings({"driver_memory": "lots"})
    assert spark_settings({"driver_memory": "768m"}).driver_memory == "768m"


def test_embedded_conf_keeps_everything_in_the_state_dir(tmp_path: Path):
    state = StatePaths(tmp_path)
    conf = build_conf(state, SparkSettings(master="local[2]", driver_memory="1g"), embedded=True)
    assert conf["spark.master"] == "local[2]"
    assert conf["spark.driver.memory"] == "1g"
    assert conf["spark.ui.enabled"] == "false"
    assert conf["spark.sql.catalogImplementation"] == "hive"
    assert conf["spark.sql.warehouse.dir"] == str(tmp_path / "warehouse")
    assert f"databaseName={tmp_path / 'metastore_db'};" in \
        conf["spark.hadoop.javax.jdo.option.ConnectionURL"]
    opts = conf["spark.driver.extraJavaOptions"]
    assert f"-Dderby.system.home={tmp_path}" in opts
    assert f"-Dlog4j2.configurationFile={tmp_path / 'conf' / 'log4j2.properties'}" in opts
    assert conf["spark.hadoop.hive.server2.thrift.port"] == "0"
    assert conf["spark.hadoop.hive.server2.thrift.bind.host"] == "127.0.0.1"
    # datamap audits yield to everything else (pipeline/audit.py's pool)
    assert conf["spark.scheduler.mode"] == "FAIR"
    state.create()
    pools = write_fair_pools(state)
    assert conf["spark.scheduler.allocation.file"] == f"file:{pools}"   # not %-encoded
    from pipeline.audit import POOL
    assert f'<pool name="{POOL}">' in pools.read_text() and '<pool name="default">' in \
        pools.read_text()
    for key, value in conf.items():  # nothing relative: the cwd must stay clean
        if key.endswith("dir") or key.endswith("location"):
            assert Path(value).is_absolute(), key


def test_java_options_survive_spaces_in_the_state_dir(tmp_path: Path):
    root = tmp_path / "my state"
    opts = build_conf(StatePaths(root), SparkSettings(), embedded=True)[
        "spark.driver.extraJavaOptions"]
    assert f'"-Dderby.system.home={root}"' in opts
    assert _java_property("a", 'x "y" \\z') == '"-Da=x \\"y\\" \\\\z"'
    assert _java_property("a", "/plain/path") == "-Da=/plain/path"


def test_remote_conf_uses_metastore_uris_and_no_thrift_server(tmp_path: Path):
    conf = build_conf(StatePaths(tmp_path),
                      SparkSettings(metastore_uris=("thrift://m:9083",), ui=True), embedded=False)
    assert conf["spark.hadoop.hive.metastore.uris"] == "thrift://m:9083"
    assert "spark.hadoop.javax.jdo.option.ConnectionURL" not in conf
    assert not any(k.startswith("spark.hadoop.hive.server2") for k in conf)
    assert conf["spark.ui.enabled"] == "true"


def test_user_conf_wins_and_java_options_are_appended(tmp_path: Path):
    settings = SparkSettings(conf={"spark.sql.warehouse.dir": "/data/wh",
                                   "spark.driver.extraJavaOptions": "-Dfoo=bar"})
    conf = build_conf(StatePaths(tmp_path), settings, embedded=True)
    assert conf["spark.sql.warehouse.dir"] == "/data/wh"
    opts = conf["spark.driver.extraJavaOptions"]
    assert opts.endswith("-Dfoo=bar") and "-Dderby.system.home=" in opts


def test_log4j2_file_points_at_the_state_log(tmp_path: Path):
    state = StatePaths(tmp_path)
    state.create()
    text = write_log4j2(state).read_text()
    assert f"appender.file.fileName = {tmp_path / 'logs' / 'spark.log'}" in text
    assert "rootLogger.appenderRef.file.ref = SparkFile" in text


def test_state_lock_is_exclusive_and_names_the_owner(tmp_path: Path):
    first, second = _StateLock(tmp_path / "engine.lock"), _StateLock(tmp_path / "engine.lock")
    first.acquire()
    try:
        with pytest.raises(EngineError, match=r"in use by another engine \(pid \d+\)"):
            second.acquire()
    finally:
        first.release()
    second.acquire()
    second.release()
