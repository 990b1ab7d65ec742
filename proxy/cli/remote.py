"""The client side of `datamap-proxy sync` and `advise`: where the running proxy is
(`remote_target`), a HiveServer2 session on it, and running statements there."""
from __future__ import annotations

import argparse
import asyncio
import getpass
import logging
import sys

from proxy import config as cfg


def client_flags(p: argparse.ArgumentParser) -> None:
    """How a client command (sync, advise) reaches the running proxy: see remote_target."""
    p.add_argument("--config", metavar="FILE", help="TOML settings file of the running proxy")
    p.add_argument("--host", help="proxy address (default: [server] host; 127.0.0.1 for 0.0.0.0)")
    p.add_argument("--port", type=int, help="proxy port (default: [server] port, 10000)")
    p.add_argument("--auth", choices=["plain", "nosasl"],
                   help="transport (default: plain, or nosasl when [server] auth is nosasl)")
    p.add_argument("--user", help="user name (default: the login name)")
    p.add_argument("--password", help="password (needed when the proxy has a users file)")


def remote_target(a: argparse.Namespace, command: str, statement: str):
    """Where and as whom a client command (sync, advise) reaches the running proxy:
    (UpstreamSettings, user, password), or an exit code after printing why not."""
    try:
        settings = cfg.load(a.config)
    except cfg.ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if settings.server.tls_cert:
        print(f"error: the proxy serves TLS ([server] tls_cert); datamap-proxy {command} speaks "
              f"plain TCP only: run {statement} from a TLS client (beeline) instead",
              file=sys.stderr)
        return 2
    host = a.host or settings.server.host
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    port = settings.server.port if a.port is None else a.port
    auth = a.auth or ("nosasl" if settings.server.auth == "nosasl" else "plain")
    try:
        user = a.user or getpass.getuser()
    except (KeyError, OSError):     # no login name (a bare container)
        user = "datamap-proxy"
    password = a.password
    if password is None and settings.server.users_file and auth == "plain" and sys.stdin.isatty():
        password = getpass.getpass(f"Password for {user}: ")
    return cfg.UpstreamSettings(host=host, port=port, auth=auth, connect_timeout=10.0,
                                call_timeout=a.timeout), user, password


async def _open_session(up: cfg.UpstreamSettings, user: str, password: str | None):
    """A HiveServer2 session on the proxy, or None after printing why not."""
    from proxy.errors import UpstreamError
    from proxy.upstream.client import UpstreamSession
    from proxy.thrift.gen.TCLIService import ttypes as T

    session = UpstreamSession(up)
    session.conn.peer = "datamap-proxy"
    session.conn.nosasl_hint = "--auth nosasl"
    try:
        resp = await session.open(user, password or "",
                                  T.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10, None)
    except UpstreamError as e:
        print(f"error: no datamap-proxy answers at {up.host}:{up.port}: {e}. Is `datamap-proxy "
              "serve` running? (--host/--port, or the [server] settings of --config)",
              file=sys.stderr)
        return None
    if session.handle is None:
        st = resp.status
        print(f"error: the proxy at {up.host}:{up.port} refused the session: "
              f"{(st.errorMessage if st else None) or 'no reason given'}"
              f"{f' (SQLSTATE {st.sqlState})' if st and st.sqlState else ''}", file=sys.stderr)
        return False
    return session


def run_statements(up: cfg.UpstreamSettings, user: str, password: str | None,
                   statements: list[str], show) -> int:
    """Run each statement on one session of the proxy; `show(result)` prints a result and
    returns 1 when it reports a failure. Exit code: 0, 1 (a statement failed), 2 (no
    proxy answered)."""
    from proxy.errors import UpstreamError
    logging.getLogger("proxy").setLevel(logging.CRITICAL)   # errors are printed below

    async def run() -> int:
        session = await _open_session(up, user, password)
        if session is None or session is False:
            return 2 if session is None else 1
        rc = 0
        try:
            for sql in statements:
                try:
                    result = await session.run_sql(sql)
                except UpstreamError as e:
                    print(f"error: {sql[:200]}: {e} (SQLSTATE {e.sqlstate})", file=sys.stderr)
                    rc = 1
                    if session.conn.broken:
                        break
                    continue
                rc = max(rc, show(result))
        finally:
            await session.close()
        return rc
    return asyncio.run(run())
