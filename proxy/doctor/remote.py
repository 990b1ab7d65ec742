"""doctor's checks of the remote topology: the upstream HiveServer2 (TCP, then a real
OpenSession through proxy/upstream/client.py's client, its metastore, default time zone and
result-affecting settings) and the
Hive metastore(s) the pipeline session will use (TCP, then a real get_all_databases call)."""
from __future__ import annotations

import socket
from typing import Mapping
from urllib.parse import urlparse

from thrift.protocol.TBase import TBase
from thrift.Thrift import TType

from proxy.doctor.checks import FAIL, PASS, SKIP, WARN, Check, Target
from proxy.engine.semantics import differences
from proxy.engine.timezone import TIME_ZONE_KEY, same_zone

METASTORE_KEY = "spark.hadoop.hive.metastore.uris"


def _uri_set(text: str) -> set[str]:
    return {u.strip().rstrip("/") for u in text.split(",") if u.strip()}


def probe_upstream(t: Target, show: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """(protocol name, SET key -> value) from a session of doctor's own on the upstream."""
    from proxy.thrift.gen.TCLIService.ttypes import TProtocolVersion
    from proxy.upstream.client import run_blocking, show_settings

    assert t.upstream is not None
    protocol, found = run_blocking(show_settings(
        t.upstream[0], t.upstream[1], show, auth=t.upstream_auth, user=t.upstream_user,
        password=t.upstream_password, timeout=t.timeout))
    return str(TProtocolVersion._VALUES_TO_NAMES.get(protocol, protocol)), found


def check_upstream(t: Target) -> list[Check]:
    assert t.upstream is not None
    host, port = t.upstream
    name = f"upstream {host}:{port}"
    try:
        socket.create_connection((host, port), timeout=t.timeout).close()
    except OSError as exc:
        return [Check(name, FAIL, f"TCP connect failed: {exc.strerror or exc}",
                      "start the Spark Thrift Server (deploy/local/thrift-server.sh DIR, or "
                      "sbin/start-thriftserver.sh) or fix --upstream HOST:PORT"),
                *not_checked("the upstream does not accept connections")]
    from proxy.upstream.client import UpstreamAuthError
    try:
        protocol, found = probe_upstream(t, (METASTORE_KEY, TIME_ZONE_KEY, ""))
    except UpstreamAuthError as exc:
        return [Check(name, FAIL, str(exc), "set [upstream] user/password for the server's "
                      "authentication, or --upstream-auth nosasl if it runs NOSASL"),
                *not_checked("doctor could not log in to the upstream")]
    except Exception as exc:  # a protocol mismatch shows up as a closed connection / timeout
        other = "nosasl" if t.upstream_auth != "nosasl" else "plain"
        return [Check(name, FAIL, f"port open but HiveServer2 OpenSession failed "
                      f"({type(exc).__name__}: {exc})",
                      f"is it a HiveServer2 binary endpoint? if the server uses "
                      f"hive.server2.authentication={'NOSASL' if other == 'nosasl' else 'NONE'}"
                      f", use --upstream-auth {other}; HTTP transport mode is not supported "
                      "upstream"),
                *not_checked("no session could be opened on the upstream")]
    checks = [Check(name, PASS, f"OpenSession ok (protocol {protocol})"),
              check_time_zone(found.get(TIME_ZONE_KEY), t),
              check_engine_settings(found, "the upstream", "the Thrift server's "
                                    "spark-defaults.conf or --conf flags")]
    theirs = found.get(METASTORE_KEY, "")
    if METASTORE_KEY not in found:
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


def not_checked(why: str) -> list[Check]:
    """The checks that read the upstream's settings, said to be left out and why (a missing
    line would read as nothing to check)."""
    return [Check("time zone", SKIP, f"not checked: {why}; the upstream's "
                  f"{TIME_ZONE_KEY} is compared with the pipeline session's once it answers"),
            Check("engine settings", SKIP, f"not checked: {why}; the upstream's "
                  "result-affecting settings are compared with Spark's defaults once it answers"),
            Check("shared metastore", SKIP, f"not checked: {why}; the upstream's "
                  f"{METASTORE_KEY} is compared with [spark] metastore_uris once it answers")]


def check_time_zone(upstream_zone: str | None, t: Target) -> Check:
    """The upstream's default session time zone against the pipeline session's."""
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


def check_engine_settings(listed: Mapping[str, str], where: str, source: str) -> Check:
    """The result-affecting settings the engine runs with (`listed`, what `SET` lists, or
    [spark] conf) against Spark's defaults, which datamap answers are proven under
    (proxy/engine/semantics.py)."""
    name = "engine settings"
    if where == "the upstream" and not set(listed) - {METASTORE_KEY, TIME_ZONE_KEY}:
        return Check(name, WARN, "could not list the upstream's settings (`SET`): serve will "
                     "not answer from datamaps until it can",
                     "check that `SET` works on the Thrift server")
    diffs = differences(listed)
    if not diffs:
        return Check(name, PASS, f"{where} runs with Spark's defaults of the result-affecting "
                     "settings")
    shown = ", ".join(f"{d} (default {d.default})" if d.default is not None else
                      f"{d} (serve asks its JVM for the default)" for d in diffs)
    return Check(name, WARN, f"{where} runs with {shown}: serve will not answer from "
                 "datamaps, whose answers are proven under Spark's defaults",
                 f"remove these settings from {source}, or accept that Spark answers every "
                 "query")


def probe_metastore(host: str, port: int, timeout: float = 10.0) -> list[str]:
    """Call ThriftHiveMetastore.get_all_databases (no SASL); return the database names."""
    from thrift.protocol.TBinaryProtocol import TBinaryProtocol
    from thrift.Thrift import TApplicationException, TMessageType
    from thrift.transport.TSocket import TSocket
    from thrift.transport.TTransport import TBufferedTransport

    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        handle = TSocket()
        handle.setHandle(sock)
        transport = TBufferedTransport(handle)
        proto = TBinaryProtocol(transport)
        proto.writeMessageBegin("get_all_databases", TMessageType.CALL, 1)
        _NoArgs().write(proto)
        proto.writeMessageEnd()
        transport.flush()
        _, mtype, _ = proto.readMessageBegin()
        if mtype == TMessageType.EXCEPTION:
            exc = TApplicationException()
            exc.read(proto)
            raise RuntimeError(f"metastore error: {exc.message}")
        result = _GetAllDatabasesResult()
        result.read(proto)
        if result.o1 is not None:
            raise RuntimeError(f"MetaException: {result.o1.message}")
        return list(result.success or [])


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


# Just the three shapes of ThriftHiveMetastore that get_all_databases needs (thrift_spec is
# indexed by field id), instead of the metastore's generated code.
class _NoArgs(TBase):
    thrift_spec = ()


class _MetaException(TBase):
    message = None
    thrift_spec = (None, (1, TType.STRING, "message", "UTF8", None))


class _GetAllDatabasesResult(TBase):
    success = o1 = None
    thrift_spec = ((0, TType.LIST, "success", (TType.STRING, "UTF8", False), None),
                   (1, TType.STRUCT, "o1", [_MetaException, None], None))
