"""`datamap-proxy doctor`: check the installation and the configured topology.

Each check returns PASS, WARN or FAIL with what it found and, unless it passed, the fix.
The verdict is the last line; the exit code is 0 when nothing FAILed (warnings allowed),
1 otherwise, 2 for a bad command line or config. Settings come from the same places as
`serve` (config file, DATAMAP_PROXY_* environment, flags).

Checks: Python; Java (17+, the one Spark will use); pyspark and Spark jars (versions match,
Thrift server and Hive jars present); the listen address is free; the state directory is
usable (writable, not locked by a running engine, disk space); in remote mode the upstream
(TCP, then a real HiveServer2 OpenSession/CloseSession, its default session time zone
against the pipeline session's, its result-affecting settings against Spark's defaults) and
the Hive metastore(s) the
pipeline session will use (TCP, then a real get_all_databases call); in embedded mode the
Derby metastore in the state directory and `[spark] conf` against Spark's defaults; and, when a proxy serves from that state
directory, the upstream health it recorded (up or down, last success and failure, reopened
sessions: proxy/hs2/recovery.py); the in-process serving engine (DuckDB with its Python UDF,
started and asked a query as serve would, and its segment mirror's directory: serving.py).

Layout: checks.py holds Check/Target and the checks of this machine, remote.py those of the
upstream and the metastores, serving.py the serving engine's; this module resolves the
target, runs them and reports.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Iterable

from proxy.logsafe import redact as _redact
from proxy.doctor.checks import (FAIL, MIN_JAVA, PASS, SKIP, WARN, Check, Target,
                                 check_embedded_metastore,
                                 check_java, check_listen, check_python, check_spark,
                                 check_state_dir, parse_java_version)
from proxy.doctor.health import beside_serving_proxy, check_upstream_health
from proxy.doctor.serving import check_serving_engine, check_serving_mirror
from proxy.doctor.remote import (METASTORE_KEY, check_engine_settings, check_metastores,
                                 check_time_zone, check_upstream,
                                 probe_metastore, probe_upstream)

__all__ = ["FAIL", "MIN_JAVA", "PASS", "SKIP", "WARN", "Check", "beside_serving_proxy", "Target", "METASTORE_KEY",
           "check_embedded_metastore", "check_java", "check_listen", "check_metastores",
           "check_python", "check_serving_engine", "check_serving_mirror", "check_spark", "check_state_dir",
           "check_engine_settings", "check_time_zone",
           "check_upstream", "check_upstream_health", "main", "parse_java_version",
           "probe_metastore", "probe_upstream",
           "report", "resolve_target", "run_checks"]


# --------------------------------------------------------------------------- driver

def _redacting(out: Callable[[str], None]) -> Callable[[str], None]:
    """Checks quote URLs and error texts: their secrets never reach the report."""
    return lambda line: out(_redact(line))


def resolve_target(argv: list[str]) -> Target:
    from proxy import config as cfg

    p = argparse.ArgumentParser(prog="datamap-proxy doctor",
                                description="Check Java, Spark, ports, the state directory, "
                                "the serving engine, the upstream and the metastore. Exit 0 "
                                "when all pass.")
    p.add_argument("--config", help="TOML settings file (as for serve)")
    p.add_argument("--host", help="listen address to check")
    p.add_argument("--port", type=int, help="listen port to check")
    p.add_argument("--upstream", help="HOST:PORT of the Spark Thrift Server (remote mode)")
    p.add_argument("--upstream-auth", choices=("plain", "nosasl"))
    p.add_argument("--state-dir")
    p.add_argument("--metastore-uris", help="comma-separated thrift://HOST:PORT")
    p.add_argument("--timeout", type=float, default=30.0,
                   help="seconds per network call (a Thrift server's first statement can be slow)")
    a = p.parse_args(argv)
    flags: dict[str, dict] = {"server": {"host": a.host, "port": a.port},
                              "upstream": {"auth": a.upstream_auth},
                              "state": {"dir": a.state_dir},
                              "spark": {"metastore_uris": a.metastore_uris}}
    if a.upstream:
        host, sep, port = a.upstream.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise cfg.ConfigError(f"--upstream {a.upstream!r}: expected HOST:PORT")
        flags["upstream"].update(host=host, port=int(port))
    s = cfg.load(a.config, flags=flags)
    uris = ",".join(s.spark.metastore_uris) or s.spark.conf.get("spark.hadoop.hive.metastore.uris", "")
    from proxy.engine.timezone import pipeline_zone
    zone, zone_source = pipeline_zone(s.spark.conf)
    return Target(
        listen_host=s.server.host, listen_port=s.server.port,
        state_dir=Path(s.state.dir).expanduser().resolve(),
        upstream=(s.upstream.host, s.upstream.port) if s.upstream.host else None,
        upstream_auth=s.upstream.auth, upstream_user=s.upstream.user or "doctor",
        upstream_password=s.upstream.password or "doctor",
        metastore_uris=tuple(u.strip() for u in uris.split(",") if u.strip()),
        timeout=a.timeout, pipeline_time_zone=zone, pipeline_time_zone_source=zone_source,
        spark_conf=tuple(sorted(s.spark.conf.items())),
        serving_enabled=s.serving.enabled, serving_threads=s.serving.threads,
        serving_memory_limit=s.serving.memory_limit, serving_mirror=s.serving.mirror,
        serving_mirror_max_bytes=s.serving.mirror_max_bytes)


def run_checks(t: Target) -> list[Check]:
    checks: list[Check] = [check_python(), check_java(), *check_spark(),
                           check_listen(t.listen_host, t.listen_port),
                           *check_state_dir(t.state_dir),
                           check_serving_engine(t.serving_enabled, t.serving_threads,
                                                t.serving_memory_limit),
                           check_serving_mirror(t.state_dir, t.serving_enabled,
                                                t.serving_mirror, t.serving_mirror_max_bytes)]
    if t.upstream is None:
        checks.append(Check("mode", PASS, "embedded: no upstream configured, serve starts "
                            "Spark and its Thrift server in-process"))
        checks.append(check_embedded_metastore(t.state_dir))
        checks.append(check_engine_settings(dict(t.spark_conf), "[spark] conf",
                                            "[spark] conf"))
    else:
        checks.append(Check("mode", PASS, f"remote: upstream {t.upstream[0]}:{t.upstream[1]}"))
        checks.extend(check_upstream(t))
        checks.extend(check_metastores(t))
    checks.extend(check_upstream_health(t.state_dir))
    return beside_serving_proxy(checks, t)


def report(checks: Iterable[Check], out: Callable[[str], None] = print) -> int:
    checks = list(checks)
    out = _redacting(out)
    width = max(len(c.name) for c in checks)
    for c in checks:
        out(f"[{c.status}] {c.name.ljust(width)}  {c.detail}")
        if c.status != PASS and c.fix:
            out(f"       {' ' * width}  fix: {c.fix}")
    failed = [c.name for c in checks if c.status == FAIL]
    warned = [c.name for c in checks if c.status == WARN]
    skipped = [c.name for c in checks if c.status == SKIP]
    not_run = f"; {len(skipped)} not run: {', '.join(skipped)}" if skipped else ""
    if failed:
        out(f"verdict: NOT READY - {len(failed)} check(s) failed: {', '.join(failed)}"
            + not_run)
        return 1
    out("verdict: READY" + (f" ({len(warned)} warning(s): {', '.join(warned)})" if warned
                            else " - all checks run passed" if skipped
                            else " - all checks passed") + not_run)
    return 0


def main(argv: list[str] | None = None) -> int:
    from proxy.config import ConfigError

    try:
        target = resolve_target(sys.argv[1:] if argv is None else argv)
    except ConfigError as exc:
        print(_redact(f"doctor: {exc}"), file=sys.stderr)
        return 2
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    return report(run_checks(target))

