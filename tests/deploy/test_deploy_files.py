"""Static checks of deploy/: the container and service files cannot run here (no docker,
no systemd), so check that they parse and say what the topology needs."""
from __future__ import annotations

import configparser
import re
import shlex
import subprocess
from pathlib import Path

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _compose() -> dict:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def _command(service: dict) -> str:
    cmd = service["command"]
    return cmd if isinstance(cmd, str) else " ".join(cmd)


def test_compose_services_and_wiring():
    doc = _compose()
    services = doc["services"]
    assert set(services) == {"metastore", "spark-master", "spark-worker", "thrift-server",
                             "proxy"}
    for name, svc in services.items():
        assert svc["image"] == "datamap-proxy:latest", name       # merged from x-image
        assert svc["build"]["dockerfile"] == "deploy/Dockerfile", name
    assert "org.apache.hadoop.hive.metastore.HiveMetaStore -p 9083" in \
        _command(services["metastore"])
    assert "deploy.master.Master --host spark-master --port 7077" in \
        _command(services["spark-master"])
    assert "Worker spark://spark-master:7077" in _command(services["spark-worker"])
    sts = _command(services["thrift-server"])
    for part in ("--master spark://spark-master:7077", "metastore.uris=thrift://metastore:9083",
                 "HiveThriftServer2", "hive.server2.thrift.port=10001", "spark-internal"):
        assert part in sts, part
    proxy = services["proxy"]
    assert proxy["command"][:2] == ["datamap-proxy", "serve"]
    assert "thrift-server:10001" in proxy["command"]
    assert proxy["environment"]["DATAMAP_PROXY_SPARK_METASTORE_URIS"] == "thrift://metastore:9083"
    assert proxy["ports"] == ["10000:10000"]
    assert proxy["depends_on"]["thrift-server"]["condition"] == "service_healthy"
    # Everything that touches table files shares one warehouse volume.
    for name in ("metastore", "spark-worker", "thrift-server", "proxy"):
        assert any(v.startswith("warehouse:/data/warehouse") for v in services[name]["volumes"])
    assert set(doc["volumes"]) == {"warehouse", "metastore", "proxy-state"}


def test_compose_shell_commands_are_valid_sh():
    for name, svc in _compose()["services"].items():
        cmd = svc["command"]
        if isinstance(cmd, list) and cmd[:2] == ["sh", "-c"]:
            script = cmd[2].replace("$$", "$")   # compose's escape for a literal $
            proc = subprocess.run(["sh", "-n", "-c", script], capture_output=True, text=True)
            assert proc.returncode == 0, (name, proc.stderr)


def test_dockerfile_basics():
    lines = [l for l in (DEPLOY / "Dockerfile").read_text().splitlines()
             if l.strip() and not l.lstrip().startswith("#")]
    text = "\n".join(lines)
    assert lines[0] == "FROM python:3.11-slim"
    assert "openjdk-17-jre-headless" in text and "pip install ." in text
    assert re.search(r"^USER datamap-proxy$", text, re.M)          # not root
    assert re.search(r"^EXPOSE 10000$", text, re.M)
    entry = re.search(r"^ENTRYPOINT (\[.*\])$", text, re.M)
    cmd = re.search(r"^CMD (\[.*\])$", text, re.M)
    assert entry and cmd                                           # exec form: signals reach us
    assert yaml.safe_load(entry.group(1)) == ["datamap-proxy"]
    assert yaml.safe_load(cmd.group(1))[0] == "serve"
    for copied in re.findall(r"^COPY (\S+)", text, re.M):
        assert (DEPLOY.parent / copied).exists() or copied == "README.md", copied
    # Every RUN is valid sh.
    for run in re.findall(r"^RUN (.*?)(?<!\\)$", text.replace("\\\n", " "), re.M):
        proc = subprocess.run(["sh", "-n", "-c", run], capture_output=True, text=True)
        assert proc.returncode == 0, (run, proc.stderr)


def test_systemd_unit():
    unit = configparser.ConfigParser(strict=False, interpolation=None)
    unit.optionxform = str
    unit.read_string((DEPLOY / "datamap-proxy.service").read_text())
    svc = unit["Service"]
    argv = shlex.split(svc["ExecStart"])
    assert argv[0].endswith("/datamap-proxy") and argv[1] == "serve"
    assert svc["KillMode"] == "mixed" and svc["KillSignal"] == "SIGTERM"
    assert int(svc["TimeoutStopSec"]) > 30                 # longer than the drain grace
    assert svc["User"] == "datamap-proxy" and svc["StateDirectory"] == "datamap-proxy"
    assert unit["Install"]["WantedBy"] == "multi-user.target"
