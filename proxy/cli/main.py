"""Command line: `datamap-proxy serve | sync | advise | users add | doctor | docs`."""
from __future__ import annotations

import argparse
import asyncio
import dataclasses
import getpass
import logging
import signal
import sys
from pathlib import Path

from proxy.cli import advise as advise_cli
from proxy import config as cfg
from proxy.auth_base import AuthError
from proxy.cli.remote import _target, run_statements

log = logging.getLogger("proxy")


def _hostport(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host, int(port)


def _client_flags(p: argparse.ArgumentParser) -> None:
    """How a client command (sync, advise) reaches the running proxy: see _target."""
    p.add_argument("--config", metavar="FILE", help="TOML settings file of the running proxy")
    p.add_argument("--host", help="proxy address (default: [server] host; 127.0.0.1 for 0.0.0.0)")
    p.add_argument("--port", type=int, help="proxy port (default: [server] port, 10000)")
    p.add_argument("--auth", choices=["plain", "nosasl"],
                   help="transport (default: plain, or nosasl when [server] auth is nosasl)")
    p.add_argument("--user", help="user name (default: the login name)")
    p.add_argument("--password", help="password (needed when the proxy has a users file)")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="datamap-proxy",
                                description="HiveServer2 proxy in front of Spark Thrift Server "
                                            "that answers BI queries from datamaps")
    sub = p.add_subparsers(dest="command", required=True)

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

    u = sub.add_parser("users", help="manage the PLAIN users file")
    usub = u.add_subparsers(dest="users_command", required=True)
    ua = usub.add_parser("add", help="add or replace a user (password from stdin or prompt)")
    ua.add_argument("name")
    ua.add_argument("--users-file", metavar="FILE", help="default: [server] users_file or <state dir>/users")
    ua.add_argument("--config", metavar="FILE")

    y = sub.add_parser("sync", help="find files written to base tables outside the proxy",
                       description="Connects to the running proxy and runs SYNC DATAMAPS [ON "
                                   "TABLE t]: files that other applications wrote into base "
                                   "tables of datamaps become new segments, non-lazy datamaps "
                                   "are refreshed (rebuilt when files vanished), lazy ones "
                                   "disabled. Defaults come from the serve settings (--config, "
                                   "environment).")
    _client_flags(y)
    y.add_argument("--table", action="append", metavar="DB.TABLE",
                   help="only this base table (repeatable); default: every base table of a "
                        "datamap")
    y.add_argument("--timeout", type=float, default=3600.0, metavar="SECONDS",
                   help="how long one sync may take (default 3600)")

    advise_cli.add_parser(sub, _client_flags)

    sub.add_parser("doctor", help="check the installation", add_help=False)
    sub.add_parser("docs", help="print where the documentation pages are installed")
    return p


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
    """reload_from: (config file, flags) that SIGHUP reads again (proxy/reload.py)."""
    as_loaded = settings
    # SIGHUP's default action ends the process: one sent while starting (an embedded Spark
    # takes a minute) is kept, and the reload runs once serving
    early_reload = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, early_reload.set)
    from proxy.auth import build_authenticator
    from proxy.server import ProxyServer

    from proxy.audit_log import AuditLog, AuditLogError
    from proxy.console import ConsoleRefused, check as check_console
    try:
        AuditLog(settings.server.audit_log).close()    # an unwritable file stops us here
        check_console(settings)                        # before a minute of Spark start
        authenticator = await asyncio.to_thread(build_authenticator, settings)
    except (AuthError, AuditLogError, ConsoleRefused) as e:
        log.error("%s", e)
        return 2
    kerberos = None
    if settings.server.auth == "kerberos":
        from proxy.kerberos import Acceptor, KerberosError
        try:
            kerberos = Acceptor(settings.server)
        except KerberosError as e:
            log.error("%s", e)
            return 2
    engine = None
    if settings.upstream.host is None:
        try:
            from proxy.engine import EmbeddedEngine
        except ImportError as e:
            log.error("no --upstream given and the embedded engine is unavailable (%s); "
                      "start with --upstream HOST:PORT", e)
            return 2
        engine = EmbeddedEngine(Path(settings.state.dir), settings.spark)
        log.info("starting embedded Spark (state dir %s)", settings.state.dir)
        try:
            host, port = await asyncio.to_thread(engine.start)
        except Exception as e:  # noqa: BLE001 - report and exit non-zero
            log.error("embedded Spark failed to start: %s", e)
            await asyncio.to_thread(engine.stop)
            return 1
        settings = dataclasses.replace(settings, upstream=dataclasses.replace(
            settings.upstream, host=host, port=port))
    from proxy.app import build_router
    from proxy.router import share_the_interpreter
    try:
        router, close_router = await build_router(settings, engine)
    except cfg.ConfigError as e:      # a setting that cannot be honoured ([metrics] port)
        log.error("%s", e)
        if engine is not None:
            await asyncio.to_thread(engine.stop)
        return 2
    except Exception as e:  # noqa: BLE001 - e.g. an unreadable catalog: report, exit non-zero
        log.error("cannot set up datamaps: %s", e)
        if engine is not None:
            await asyncio.to_thread(engine.stop)
        return 1
    server = ProxyServer(settings, router, authenticator=authenticator, kerberos=kerberos)
    for hook in getattr(router, "with_service", ()):    # proxy/app.py: query log, metrics, ...
        hook(server.service)
    from proxy.recovery import HEALTH_FILE    # for doctor; build_router made the directory
    server.service.health.path = Path(settings.state.dir).expanduser().resolve() / HEALTH_FILE
    try:
        host, port = await server.start()
    except OSError as e:
        log.error("cannot listen on %s:%s: %s", settings.server.host, settings.server.port, e.strerror or e)
        await close_router()
        if engine is not None:
            await asyncio.to_thread(engine.stop)
        return 1
    console = None
    if settings.console.port is not None:
        from proxy.console import start_console
        try:     # querylog / advisor / serving: set on the router by their wiring (proxy/app.py)
            console = await start_console(settings, server, router.datamap_service,
                                          getattr(router, "querylog", None),
                                          getattr(router, "advisor", None),
                                          getattr(router, "serving", None))
        except OSError as e:
            log.error("cannot listen for the web console on port %s: %s",
                      settings.console.port, e.strerror or e)
            await server.shutdown(0)
            await close_router()
            if engine is not None:
                await asyncio.to_thread(engine.stop)
            return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    from proxy.reload import Reloader, apply_to_server
    reloader = Reloader(settings, *(reload_from or (None, None)), loaded=as_loaded)
    reloader.register(apply_to_server(server))
    server.reloader = reloader        # other components register their own reload callbacks
    loop.add_signal_handler(signal.SIGHUP, reloader.reload)
    if early_reload.is_set():
        log.info("SIGHUP received while starting: reloading the settings now")
        reloader.reload()
    log.info("listening on %s:%d (auth=%s%s), upstream %s:%d (%s)", host, port, settings.server.auth,
             ", TLS" if settings.server.tls_cert else "", settings.upstream.host,
             settings.upstream.port, settings.upstream.auth)
    share_the_interpreter()
    log.info("ready")
    registration = _register(settings, port, server.http_address)
    await stop.wait()
    if registration is not None:
        log.info("shutting down: leaving ZooKeeper first, so no new client is sent here")
        await registration.deregister()
    log.info("shutting down: draining for up to %.0fs", settings.server.shutdown_grace)
    if console is not None:
        await console.close()       # its running actions first: they use the datamaps
    await server.shutdown()
    await close_router()
    if engine is not None:
        await asyncio.to_thread(engine.stop)
    log.info("stopped")
    return 0


def _register(settings: cfg.Settings, port: int, http_address: tuple[str, int] | None):
    """The ZooKeeper registration ([discovery] zookeeper), started once ready; None without.
    It publishes the ports bound (http_port = 0 means any free one)."""
    if not settings.discovery.zookeeper:
        return None
    from proxy.discovery import Registration
    registration = Registration(settings.discovery, settings.server, port,
                                http_port=http_address[1] if http_address else None)
    registration.start()
    return registration


def _users_add(a: argparse.Namespace) -> int:
    from proxy.auth import add_user
    settings = cfg.load(a.config)
    path = a.users_file or settings.server.users_file or str(Path(settings.state.dir) / "users")
    if sys.stdin.isatty():
        pw = getpass.getpass(f"Password for {a.name}: ")
        if getpass.getpass("Again: ") != pw:
            print("error: passwords differ", file=sys.stderr)
            return 1
    else:
        pw = sys.stdin.readline().rstrip("\r\n")
    try:
        add_user(path, a.name, pw)
    except AuthError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"user {a.name} written to {path}", file=sys.stderr)
    return 0


def _sync(a: argparse.Namespace) -> int:
    """`datamap-proxy sync`: SYNC DATAMAPS on the running proxy, over HiveServer2 (in
    embedded mode the proxy owns the metastore and the catalog, so only it can do this)."""
    target = _target(a, "sync", "SYNC DATAMAPS")
    if isinstance(target, int):
        return target
    up, user, password = target
    tables = a.table or [None]
    for t in tables:
        if t is not None and not t.strip():
            print("error: --table needs a table name", file=sys.stderr)
            return 2

    def show(result) -> int:
        print(_format_rows([c[0] for c in result.columns], result.rows))
        if any(_has_failed(r[-1]) for r in result.rows):
            print("error: some datamaps could not be refreshed and are DISABLED "
                  "(see the rows above); REBUILD DATAMAP retries", file=sys.stderr)
            return 1
        return 0
    statements = ["SYNC DATAMAPS" + (f" ON TABLE {_quote_table(t)}" if t else "")
                  for t in tables]
    return run_statements(up, user, password, statements, show)


def _has_failed(actions) -> bool:
    """A SYNC DATAMAPS row's DataMaps column names a datamap that could not be refreshed."""
    import json

    from proxy.datamaps.maintenance import RefreshOutcome
    try:
        return any(str(v).startswith(RefreshOutcome.FAILED) for v in json.loads(actions).values())
    except (TypeError, ValueError, AttributeError):
        return False


def _quote_table(name: str) -> str:
    """A --table value as typed (`db.t`, `` `db`.`t` ``, with spaces) -> a quoted name."""
    from pipeline.files import quote_table
    return quote_table(".".join(p.strip().strip("`") for p in name.strip().split(".")))


def _format_rows(columns: list[str], rows) -> str:
    cells = [[str(c) for c in columns]] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    if not rows:
        lines.append("(no base tables with datamaps)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "doctor":
        try:
            from proxy.doctor import main as doctor_main
        except ImportError as e:
            print(f"error: doctor is not available in this build ({e})", file=sys.stderr)
            return 2
        return doctor_main(argv[1:]) or 0
    a = build_parser().parse_args(argv)
    if a.command == "users":
        return _users_add(a)
    if a.command == "sync":
        return _sync(a)
    if a.command == "advise":
        return advise_cli.advise(a)
    if a.command == "docs":
        from proxy.cli.docs import main as docs_main
        return docs_main()
    logging.basicConfig(level=getattr(logging, str(a.log_level).upper(), logging.INFO),
                        stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    from proxy.logsafe import RedactingFilter
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


if __name__ == "__main__":
    sys.exit(main())
