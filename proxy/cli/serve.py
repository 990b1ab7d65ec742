"""`datamap-proxy serve`: its flags, the settings they make, and the run."""
from __future__ import annotations

import argparse
import asyncio
import logging
import sys

from proxy import config as cfg
from proxy.logsafe import RedactingFilter

log = logging.getLogger("proxy")


def _hostport(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


def add_parser(sub) -> None:
    s = sub.add_parser("serve", help="run the proxy",
                       description="Settings: defaults < TOML file (--config) < environment "
                                   "DATAMAP_PROXY_<SECTION>_<KEY> < these flags.")
    s.add_argument("--config", metavar="FILE", help="TOML settings file")
    s.add_argument("--host", help="listen address [server] host (default 127.0.0.1)")
    s.add_argument("--port", type=int, help="listen port [server] port (default 10000; 0 = any)")
    s.add_argument("--auth", choices=["none", "nosasl", "ldap", "kerberos"],
                   help="client authentication: none = SASL PLAIN (any user unless --users-file), "
                        "nosasl = raw, ldap = PLAIN checked against [server] ldap_*, kerberos = "
                        "SASL GSSAPI / SPNEGO")
    s.add_argument("--http-port", type=int, help="also serve Thrift over HTTP on this port "
                                                 "([server] http_port; HiveServer2's transportMode=http)")
    s.add_argument("--users-file", metavar="FILE", help="PLAIN users file (datamap-proxy users add)")
    s.add_argument("--tls-cert", metavar="FILE", help="PEM certificate: serve TLS")
    s.add_argument("--tls-key", metavar="FILE", help="PEM private key for --tls-cert")
    s.add_argument("--max-frame-bytes", type=int, help="largest Thrift message/frame accepted")
    s.add_argument("--idle-session-timeout", type=float, metavar="SECONDS")
    s.add_argument("--idle-operation-timeout", type=float, metavar="SECONDS")
    s.add_argument("--shutdown-grace", type=float, metavar="SECONDS",
                   help="how long SIGTERM waits for running statements")
    s.add_argument("--login-timeout", type=float, metavar="SECONDS",
                   help="connect to logged in, in total (default 20)")
    s.add_argument("--idle-connection-timeout", type=float, metavar="SECONDS",
                   help="close a logged-in connection without a session after this (default 300)")
    s.add_argument("--max-connections", type=int, metavar="N",
                   help="concurrent client connections (default 1000; 0 = no cap)")
    s.add_argument("--max-connections-per-address", type=int, metavar="N",
                   help="concurrent connections from one client address (default 100)")
    s.add_argument("--max-login-failures", type=int, metavar="N",
                   help="failed logins per user name before a lockout (default 5; 0 = never)")
    s.add_argument("--upstream", type=_hostport, metavar="HOST:PORT",
                   help="existing Spark Thrift Server; without it an embedded Spark is started")
    s.add_argument("--upstream-auth", choices=["plain", "nosasl"], help="transport towards Spark")
    s.add_argument("--upstream-user", help="connect to Spark as this user (default: the client's)")
    s.add_argument("--upstream-password", help="password for --upstream-user")
    s.add_argument("--upstream-max-protocol", type=int, metavar="N",
                   help="cap the protocol version sent upstream (0..10 = V1..V11)")
    s.add_argument("--upstream-call-timeout", type=float, metavar="SECONDS")
    s.add_argument("--upstream-max-reply-bytes", type=int, metavar="N",
                   help="largest reply accepted from Spark (a result page; default 1 GiB)")
    s.add_argument("--upstream-max-sessions", type=int, metavar="N",
                   help="cap on upstream sessions in all (default 400; 0 = none)")
    s.add_argument("--upstream-max-sessions-per-user", type=int, metavar="N",
                   help="cap on upstream sessions per user (default 0 = none)")
    s.add_argument("--spark-master", help="[spark] master for the embedded engine / pipeline")
    s.add_argument("--state-dir", metavar="DIR", help="[state] dir (default ./.datamap-proxy)")
    s.add_argument("--sync-interval", type=float, metavar="SECONDS",
                   help="[datamaps] sync_interval_s: run SYNC DATAMAPS this often (default 0 = off)")
    s.add_argument("--auto-compaction", choices=["true", "false"],
                   help="[datamaps] auto_compaction: default of DMPROPERTIES 'auto_compaction'")
    s.add_argument("--zookeeper", metavar="HOST:PORT,...",
                   help="[discovery] zookeeper: register here as HiveServer2 does "
                        "(serviceDiscoveryMode=zooKeeper)")
    s.add_argument("--zookeeper-namespace", metavar="NS",
                   help="[discovery] namespace (default datamap-proxy)")
    s.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING (default INFO)")



def run(a: argparse.Namespace) -> int:
    logging.basicConfig(level=getattr(logging, str(a.log_level).upper(), logging.INFO),
                        stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(RedactingFilter())
    try:
        settings = cfg.load(a.config, flags=_flags(a))
    except cfg.ConfigError as e:
        log.error("%s", e)
        return 2
    try:
        return asyncio.run(_serve(settings, (a.config, _flags(a))))
    except KeyboardInterrupt:
        return 0


def _flags(a: argparse.Namespace) -> dict:
    up_host = up_port = None
    if a.upstream:
        up_host, up_port = a.upstream
    return {
        "server": {"host": a.host, "port": a.port, "auth": a.auth, "users_file": a.users_file,
                   "http_port": a.http_port,
                   "tls_cert": a.tls_cert, "tls_key": a.tls_key, "max_frame_bytes": a.max_frame_bytes,
                   "idle_session_timeout": a.idle_session_timeout,
                   "idle_operation_timeout": a.idle_operation_timeout,
                   "shutdown_grace": a.shutdown_grace, "login_timeout": a.login_timeout,
                   "idle_connection_timeout": a.idle_connection_timeout,
                   "max_connections": a.max_connections,
                   "max_connections_per_address": a.max_connections_per_address,
                   "max_login_failures": a.max_login_failures},
        "upstream": {"host": up_host, "port": up_port, "auth": a.upstream_auth,
                     "user": a.upstream_user, "password": a.upstream_password,
                     "max_protocol": a.upstream_max_protocol, "call_timeout": a.upstream_call_timeout,
                     "max_reply_bytes": a.upstream_max_reply_bytes,
                     "max_sessions": a.upstream_max_sessions,
                     "max_sessions_per_user": a.upstream_max_sessions_per_user},
        "spark": {"master": a.spark_master},
        "state": {"dir": a.state_dir},
        "datamaps": {"sync_interval_s": a.sync_interval, "auto_compaction": a.auto_compaction},
        "discovery": {"zookeeper": a.zookeeper, "namespace": a.zookeeper_namespace},
    }


async def _serve(settings: cfg.Settings, reload_from: tuple | None = None) -> int:
    """reload_from: (config file, flags) that SIGHUP reads again (proxy/gateway/reload.py)."""
    from proxy.app import App, StartFailed     # the whole proxy: not for the other commands
    try:
        async with App(settings, reload_from=reload_from) as app:
            code = await app.run()
    except cfg.ConfigError as e:     # a setting that cannot be honoured
        log.error("%s", e)
        return 2
    except StartFailed as e:
        log.error("%s", e)
        return 1
    log.info("stopped")
    return code
