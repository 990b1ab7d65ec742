"""`datamap-proxy doctor`: check the installation and the configured topology.

Each check returns PASS, WARN or FAIL with what it found and, unless it passed, the fix.
The verdict is the last line; the exit code is 0 when nothing FAILed (warnings allowed),
1 otherwise, 2 for a bad command line or config. Settings come from the same places as
`serve` (config file, DATAMAP_PROXY_* environment, flags).

Checks: Python; Java (17+, the one Spark will use); pyspark and Spark jars (versions match,
Thrift server and Hive jars present); the listen address is free; the state directory is
usable (writable, not locked by a running engine, disk space); in remote mode the upstream
(TCP, then a real HiveServer2 OpenSession/CloseSession, its default session time zone
against the pipeline session's) and the Hive metastore(s) the
pipeline session will use (TCP, then a real get_all_databases call); in embedded mode the
Derby metastore in the state directory.
"""
from __future__ import annotations

import argparse
import fcntl
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable
from urllib.parse import urlparse

from proxy.timezone import TIME_ZONE_KEY

PASS, WARN, FAIL = "PASS", "WARN", "FAIL"
MIN_JAVA = 17


@dataclass(frozen=True)
class Check:
    name: str
    status: str
    detail: str
    fix: str = ""


@dataclass(frozen=True)
class Target:
    """What doctor checks, resolved from the settings."""
    listen_host: str
    listen_port: int
    state_dir: Path
    upstream: tuple[str, int] | None          # None = embedded mode
    upstream_auth: str                        # plain | nosasl
    upstream_user: str
    upstream_password: str
    metastore_uris: tuple[str, ...]
    timeout: float
    # The pipeline session's zone as configured ([spark] conf), or this machine's default,
    # and where that comes from; compared with the upstream's (proxy/timezone.py).
    pipeline_time_zone: str | None = None
    pipeline_time_zone_source: str = ""


# --------------------------------------------------------------------------- environment

def check_python() -> Check:
    v = sys.version_info
    if v >= (3, 11):
        return Check("python", PASS, f"Python {v.major}.{v.minor}.{v.micro}")
    return Check("python", FAIL, f"Python {v.major}.{v.minor} is too old",
                 "install Python 3.11 or newer")


def _java_binary() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


def parse_java_version(text: str) -> int | None:
    """The feature version from `java -version` output: 'version "17.0.15"' -> 17,
    'version "1.8.0_392"' -> 8."""
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def check_java() -> Check:
    java = _java_binary()
    fix = ("install Java 17 (e.g. apt-get install openjdk-17-jre-headless) and put it on PATH "
           "or set JAVA_HOME")
    if java is None:
        return Check("java", FAIL, "no java on PATH and JAVA_HOME not set", fix)
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return Check("java", FAIL, f"{java} -version failed: {exc}", fix)
    version = parse_java_version(out.stderr + out.stdout)
    if version is None:
        return Check("java", FAIL, f"cannot read the version from {java} -version", fix)
    if version < MIN_JAVA:
        return Check("java", FAIL, f"{java} is Java {version}; Spark 4 needs {MIN_JAVA}+", fix)
    return Check("java", PASS, f"Java {version} ({java})")


def check_spark() -> list[Check]:
    try:
        import pyspark
    except ImportError as exc:
        return [Check("pyspark", FAIL, f"pyspark is not importable: {exc}",
                      "pip install 'pyspark>=4,<5'")]
    home = Path(pyspark.__file__).resolve().parent
    checks = []
    major = int(pyspark.__version__.split(".")[0])
    if major != 4:
        checks.append(Check("pyspark", FAIL, f"pyspark {pyspark.__version__}; need 4.x",
                            "pip install 'pyspark>=4,<5'"))
    else:
        checks.append(Check("pyspark", PASS, f"pyspark {pyspark.__version__} ({home})"))
    spark_home = Path(os.environ["SPARK_HOME"]) if os.environ.get("SPARK_HOME") else home
    jars = spark_home / "jars"
    core = sorted(jars.glob("spark-core_*.jar"))
    if not core:
        checks.append(Check("spark jars", FAIL, f"no spark-core jar in {jars}",
                            "unset SPARK_HOME or point it at a Spark 4 distribution"))
        return checks
    jar_version = re.sub(r"^spark-core_[\d.]+-|\.jar$", "", core[0].name)
    missing = [p for p in ("spark-hive-thriftserver_*.jar", "spark-hive_*.jar",
                           "hive-metastore-*.jar", "derby-*.jar") if not list(jars.glob(p))]
    if missing:
        checks.append(Check("spark jars", FAIL, f"{jars} lacks {', '.join(missing)} "
                            "(no Hive / Thrift server support)",
                            "use the pyspark wheel's own jars (unset SPARK_HOME) or a Spark "
                            "build with -Phive -Phive-thriftserver"))
    elif jar_version != pyspark.__version__:
        checks.append(Check("spark jars", WARN, f"Spark jars {jar_version} in {jars} but "
                            f"pyspark {pyspark.__version__}",
                            "make SPARK_HOME match the pyspark version (or unset it)"))
    else:
        checks.append(Check("spark jars", PASS, f"Spark {jar_version} with Hive and Thrift "
                            f"server jars ({jars})"))
    return checks


def check_listen(host: str, port: int) -> Check:
    name = f"listen {host}:{port}"
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError as exc:
        return Check(name, FAIL, f"cannot bind: {exc.strerror or exc}",
                     "stop whatever listens there (is a proxy already running?) or choose "
                     "another --port / --host")
    return Check(name, PASS, "free")


def check_state_dir(state: Path) -> list[Check]:
    name = f"state dir {state}"
    try:
        state.mkdir(parents=True, exist_ok=True)
        probe = state / ".doctor-probe"
        probe.write_text("ok")
        probe.unlink()
    except OSError as exc:
        return [Check(name, FAIL, f"not writable: {exc.strerror or exc}",
                      f"create it and give this user write access (chown/chmod {state}), "
                      "or choose another --state-dir")]
    checks = [Check(name, PASS, "writable")]
    lock = state / "engine.lock"
    if lock.exists():
        try:
            with open(lock, "a+") as fh:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                fcntl.flock(fh, fcntl.LOCK_UN)
        except OSError:
            owner = lock.read_text().strip() or "?"
            checks.append(Check("state dir lock", WARN,
                                f"an engine (pid {owner}) is using {state} right now",
                                "a second embedded proxy on this state dir will refuse to "
                                "start; stop that one or use another --state-dir"))
    free = shutil.disk_usage(state).free
    if free < 1 << 30:
        checks.append(Check("disk space", WARN, f"{free >> 20} MiB free under {state}",
                            "free some space: the warehouse and Spark's temp files live here"))
    return checks


def check_embedded_metastore(state: Path) -> Check:
    db = state / "metastore_db"
    if not db.exists():
        return Check("metastore (embedded Derby)", PASS,
                     f"{db} will be created at the first start")
    if not os.access(db, os.R_OK | os.W_OK | os.X_OK):
        return Check("metastore (embedded Derby)", FAIL, f"{db} is not readable/writable",
                     f"chown -R this user {db}")
    return Check("metastore (embedded Derby)", PASS, f"{db}")


# --------------------------------------------------------------------------- upstream

def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        buf += chunk
    return buf


class _SaslPlainTransport:
    """Just enough of a Thrift transport for one OpenSession: SASL PLAIN negotiation,
    then u32-length frames (HiveServer2 binary mode); or raw bytes for NOSASL."""

    def __init__(self, sock: socket.socket, user: str, password: str, sasl: bool):
        self.sock, self.sasl = sock, sasl
        self._wbuf = b""
        self._rbuf = b""
        if sasl:
            self._negotiate(user, password)

    def _negotiate(self, user: str, password: str) -> None:
        def msg(status: int, payload: bytes) -> bytes:
            return struct.pack(">BI", status, len(payload)) + payload
        token = b"\0" + user.encode() + b"\0" + password.encode()
        self.sock.sendall(msg(1, b"PLAIN") + msg(5, token))
        status, length = struct.unpack(">BI", _recv_exact(self.sock, 5))
        payload = _recv_exact(self.sock, length) if length < 1 << 20 else b""
        if status != 5:
            raise PermissionError(f"SASL PLAIN refused (status {status}): "
                                  f"{payload.decode(errors='replace')}")

    # the subset of TTransportBase the binary protocol uses
    def isOpen(self) -> bool: return True
    def write(self, data: bytes) -> None: self._wbuf += data

    def flush(self) -> None:
        data, self._wbuf = self._wbuf, b""
        self.sock.sendall(struct.pack(">I", len(data)) + data if self.sasl else data)

    def read(self, n: int) -> bytes:
        while len(self._rbuf) < n:
            if self.sasl:
                (length,) = struct.unpack(">I", _recv_exact(self.sock, 4))
                self._rbuf += _recv_exact(self.sock, length)
            else:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise ConnectionError("the server closed the connection")
                self._rbuf += chunk
        out, self._rbuf = self._rbuf[:n], self._rbuf[n:]
        return out

    def readAll(self, n: int) -> bytes: return self.read(n)


@dataclass(frozen=True)
class Hs2Probe:
    protocol: str
    settings: dict[str, str]          # SET key -> value as the server reports it


def probe_hiveserver2(host: str, port: int, *, auth: str = "plain", user: str = "doctor",
                      password: str = "doctor", timeout: float = 10.0,
                      show: tuple[str, ...] = ()) -> Hs2Probe:
    """OpenSession, `SET key` for each key in `show`, CloseSession. Raises on failure
    (ConnectionError/OSError, PermissionError for auth, RuntimeError for an error status)."""
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol

    from proxy.thrift.gen.TCLIService import TCLIService
    from proxy.thrift.gen.TCLIService.ttypes import (TCloseSessionReq, TOpenSessionReq,
                                                     TProtocolVersion)

    def ok(resp, what: str):
        if resp.status.statusCode not in (0, 1):
            raise RuntimeError(f"{what} failed: [{resp.status.sqlState}] "
                               f"{resp.status.errorMessage}")
        return resp

    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        transport = _SaslPlainTransport(sock, user, password, sasl=(auth != "nosasl"))
        client = TCLIService.Client(TBinaryProtocol(transport))
        resp = ok(client.OpenSession(TOpenSessionReq(
            client_protocol=TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10,
            username=user, password=password)), "OpenSession")
        session = resp.sessionHandle
        settings: dict[str, str] = {}
        try:
            for key in show:
                value = _show_setting(client, session, key)
                if value is not None:
                    settings[key] = value
            client.CloseSession(TCloseSessionReq(sessionHandle=session))
        except OSError:
            pass  # slow first statement: report what we have; the server drops the session
        version = TProtocolVersion._VALUES_TO_NAMES.get(resp.serverProtocolVersion,
                                                       resp.serverProtocolVersion)
        return Hs2Probe(str(version), settings)


def _show_setting(client, session, key: str) -> str | None:
    """`SET key` on an open session: the value, or None when the server refuses."""
    from proxy.thrift.gen.TCLIService.ttypes import (TCloseOperationReq, TExecuteStatementReq,
                                                     TFetchResultsReq)

    resp = client.ExecuteStatement(TExecuteStatementReq(
        sessionHandle=session, statement=f"SET {key}", runAsync=False))
    if resp.status.statusCode not in (0, 1):
        return None
    op = resp.operationHandle
    try:
        fetched = client.FetchResults(TFetchResultsReq(operationHandle=op, maxRows=10))
        rows = fetched.results if fetched.status.statusCode in (0, 1) else None
        if rows is not None and rows.columns and len(rows.columns) >= 2:
            col = rows.columns[1].stringVal
            if col is not None and col.values:
                return col.values[0]
        return None
    finally:
        client.CloseOperation(TCloseOperationReq(operationHandle=op))


METASTORE_KEY = "spark.hadoop.hive.metastore.uris"


def _uri_set(text: str) -> set[str]:
    return {u.strip().rstrip("/") for u in text.split(",") if u.strip()}


def check_upstream(t: Target) -> list[Check]:
    assert t.upstream is not None
    host, port = t.upstream
    name = f"upstream {host}:{port}"
    try:
        socket.create_connection((host, port), timeout=t.timeout).close()
    except OSError as exc:
        return [Check(name, FAIL, f"TCP connect failed: {exc.strerror or exc}",
                      "start the Spark Thrift Server (deploy/local/thrift-server.sh DIR, or "
                      "sbin/start-thriftserver.sh) or fix --upstream HOST:PORT")]
    try:
        probe = probe_hiveserver2(host, port, auth=t.upstream_auth, user=t.upstream_user,
                                  password=t.upstream_password, timeout=t.timeout,
                                  show=(METASTORE_KEY, TIME_ZONE_KEY))
    except PermissionError as exc:
        return [Check(name, FAIL, str(exc), "set [upstream] user/password for the server's "
                      "authentication, or --upstream-auth nosasl if it runs NOSASL")]
    except Exception as exc:  # a protocol mismatch shows up as a closed connection / timeout
        other = "nosasl" if t.upstream_auth != "nosasl" else "plain"
        return [Check(name, FAIL, f"port open but HiveServer2 OpenSession failed "
                      f"({type(exc).__name__}: {exc})",
                      f"is it a HiveServer2 binary endpoint? if the server uses "
                      f"hive.server2.authentication={'NOSASL' if other == 'nosasl' else 'NONE'}"
                      f", use --upstream-auth {other}; HTTP transport mode is not supported "
                      "upstream")]
    checks = [Check(name, PASS, f"OpenSession ok (protocol {probe.protocol})"),
              check_time_zone(probe.settings.get(TIME_ZONE_KEY), t)]
    theirs = probe.settings.get(METASTORE_KEY, "")
    if METASTORE_KEY not in probe.settings:
        checks.append(Check("shared metastore", WARN, "could not read the upstream's "
                            f"{METASTORE_KEY} (SET refused or too slow)",
                            "make sure the Thrift server and [spark] metastore_uris name the "
                            "same Hive metastore"))
    elif theirs in ("", "<undefined>"):
        checks.append(Check("shared metastore", WARN, "the upstream does not report "
                            f"{METASTORE_KEY}: it may use its own embedded Derby metastore, "
                            "which pipeline jobs cannot share",
                            "run the Thrift server with --conf spark.hadoop.hive.metastore."
                            "uris=thrift://HOST:9083 and give the proxy the same [spark] "
                            "metastore_uris (or ignore if it is set in its hive-site.xml)"))
    elif t.metastore_uris and _uri_set(theirs) != _uri_set(",".join(t.metastore_uris)):
        checks.append(Check("shared metastore", FAIL, f"the upstream uses {theirs} but "
                            f"[spark] metastore_uris is {','.join(t.metastore_uris)}",
                            f"set [spark] metastore_uris = \"{theirs}\""))
    elif t.metastore_uris:
        checks.append(Check("shared metastore", PASS, f"upstream and pipeline both use {theirs}"))
    return checks


def check_time_zone(upstream_zone: str | None, t: Target) -> Check:
    """The upstream's default session time zone against the pipeline session's."""
    from proxy.timezone import same_zone
    name = "time zone"
    ours, source = t.pipeline_time_zone, t.pipeline_time_zone_source or "the pipeline session"
    if not upstream_zone or upstream_zone == "<undefined>":
        return Check(name, WARN, f"could not read the upstream's {TIME_ZONE_KEY}: serve will "
                     "not answer from datamaps whose rows depend on the time zone "
                     "(timeseries, date_trunc, casts of timestamps, ...)",
                     "check that `SET spark.sql.session.timeZone` works on the Thrift server")
    if ours is None:
        return Check(name, PASS, f"upstream default {upstream_zone}; serve sets the pipeline "
                     "session to it")
    if same_zone(upstream_zone, ours):
        return Check(name, PASS, f"upstream and pipeline session both use {upstream_zone}")
    return Check(name, WARN, f"mismatch: the upstream's default {TIME_ZONE_KEY} is "
                 f"{upstream_zone}, the pipeline session's is {ours} ({source}); serve sets "
                 f"the pipeline session to {upstream_zone}, but datamaps built under {ours} "
                 "hold other time buckets",
                 f"set [spark] conf {TIME_ZONE_KEY} = \"{upstream_zone}\" and REBUILD DATAMAP "
                 "the time-dependent datamaps built before")


# --------------------------------------------------------------------------- metastore

def probe_metastore(host: str, port: int, timeout: float = 10.0) -> list[str]:
    """Call ThriftHiveMetastore.get_all_databases (no SASL); return the database names."""
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol
    from thrift.Thrift import TApplicationException, TMessageType, TType

    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        transport = _SaslPlainTransport(sock, "", "", sasl=False)
        proto = TBinaryProtocol(transport)
        proto.writeMessageBegin("get_all_databases", TMessageType.CALL, 1)
        proto.writeStructBegin("get_all_databases_args")
        proto.writeFieldStop()
        proto.writeStructEnd()
        proto.writeMessageEnd()
        transport.flush()
        _, mtype, _ = proto.readMessageBegin()
        if mtype == TMessageType.EXCEPTION:
            exc = TApplicationException()
            exc.read(proto)
            raise RuntimeError(f"metastore error: {exc.message}")
        names: list[str] = []
        error = None
        proto.readStructBegin()
        while True:
            _, ftype, fid = proto.readFieldBegin()
            if ftype == TType.STOP:
                break
            if fid == 0 and ftype == TType.LIST:
                _, size = proto.readListBegin()
                names = [proto.readString() for _ in range(size)]
                proto.readListEnd()
            elif fid == 1 and ftype == TType.STRUCT:  # MetaException {1: string message}
                proto.readStructBegin()
                while True:
                    _, t2, f2 = proto.readFieldBegin()
                    if t2 == TType.STOP:
                        break
                    if f2 == 1 and t2 == TType.STRING:
                        error = proto.readString()
                    else:
                        proto.skip(t2)
                    proto.readFieldEnd()
                proto.readStructEnd()
            else:
                proto.skip(ftype)
            proto.readFieldEnd()
        proto.readStructEnd()
        if error is not None:
            raise RuntimeError(f"MetaException: {error}")
        return names


def check_metastores(t: Target) -> list[Check]:
    if not t.metastore_uris:
        return [Check("metastore", WARN, "remote mode without [spark] metastore_uris: pipeline "
                      "jobs would use a private Derby metastore and not see the upstream's "
                      "tables", "set [spark] metastore_uris = \"thrift://HOST:9083\" (the one "
                      "the Thrift server uses: hive.metastore.uris)")]
    checks = []
    for uri in t.metastore_uris:
        name = f"metastore {uri}"
        parsed = urlparse(uri)
        if parsed.scheme != "thrift" or not parsed.hostname:
            checks.append(Check(name, FAIL, "not a thrift://HOST:PORT URI",
                                "write it as thrift://HOST:9083"))
            continue
        try:
            dbs = probe_metastore(parsed.hostname, parsed.port or 9083, t.timeout)
        except OSError as exc:
            checks.append(Check(name, FAIL, f"cannot reach it: {exc.strerror or exc}",
                                "start the Hive metastore (deploy/local/metastore.sh DIR) or "
                                "fix [spark] metastore_uris"))
            continue
        except Exception as exc:
            checks.append(Check(name, FAIL, f"port open but get_all_databases failed "
                                f"({type(exc).__name__}: {exc})",
                                "is it a Hive metastore Thrift port (SASL/Kerberos metastores "
                                "are not probed)?"))
            continue
        checks.append(Check(name, PASS, f"{len(dbs)} database(s): {', '.join(dbs[:5])}"))
    return checks


# --------------------------------------------------------------------------- driver

def resolve_target(argv: list[str]) -> Target:
    from proxy import config as cfg

    p = argparse.ArgumentParser(prog="datamap-proxy doctor",
                                description="Check Java, Spark, ports, the state directory, "
                                "the upstream and the metastore. Exit 0 when all pass.")
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
    from proxy.timezone import pipeline_zone
    zone, zone_source = pipeline_zone(s.spark.conf)
    return Target(
        listen_host=s.server.host, listen_port=s.server.port,
        state_dir=Path(s.state.dir).expanduser().resolve(),
        upstream=(s.upstream.host, s.upstream.port) if s.upstream.host else None,
        upstream_auth=s.upstream.auth, upstream_user=s.upstream.user or "doctor",
        upstream_password=s.upstream.password or "doctor",
        metastore_uris=tuple(u.strip() for u in uris.split(",") if u.strip()),
        timeout=a.timeout, pipeline_time_zone=zone, pipeline_time_zone_source=zone_source)


def run_checks(t: Target) -> list[Check]:
    checks: list[Check] = [check_python(), check_java(), *check_spark(),
                           check_listen(t.listen_host, t.listen_port),
                           *check_state_dir(t.state_dir)]
    if t.upstream is None:
        checks.append(Check("mode", PASS, "embedded: no upstream configured, serve starts "
                            "Spark and its Thrift server in-process"))
        checks.append(check_embedded_metastore(t.state_dir))
    else:
        checks.append(Check("mode", PASS, f"remote: upstream {t.upstream[0]}:{t.upstream[1]}"))
        checks.extend(check_upstream(t))
        checks.extend(check_metastores(t))
    return checks


def report(checks: Iterable[Check], out: Callable[[str], None] = print) -> int:
    checks = list(checks)
    width = max(len(c.name) for c in checks)
    for c in checks:
        out(f"[{c.status}] {c.name.ljust(width)}  {c.detail}")
        if c.status != PASS and c.fix:
            out(f"       {' ' * width}  fix: {c.fix}")
    failed = [c.name for c in checks if c.status == FAIL]
    warned = [c.name for c in checks if c.status == WARN]
    if failed:
        out(f"verdict: NOT READY - {len(failed)} check(s) failed: {', '.join(failed)}")
        return 1
    out("verdict: READY" + (f" ({len(warned)} warning(s): {', '.join(warned)})" if warned
                            else " - all checks passed"))
    return 0


def main(argv: list[str] | None = None) -> int:
    from proxy.config import ConfigError

    try:
        target = resolve_target(sys.argv[1:] if argv is None else argv)
    except ConfigError as exc:
        print(f"doctor: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    return report(run_checks(target))


if __name__ == "__main__":
    sys.exit(main())
