"""The web console (docs/console.md): server-rendered pages over the datamap catalog, the
query log and the advisor, plus a few safe actions, behind the proxy's own sign-in.

    login.py     who is asking: the proxy's authenticator and login throttle, a signed
                 cookie, the CSRF token derived from it
    server.py    the HTTP/1.1 listener on [console] host:port (TLS as the proxy's)
    routes.py    requests -> replies: pages and actions
    views.py     what a page shows, read from the catalog and the query log (blocking)
    pages.py, pages_log.py, markup.py, chart.py, style.py   HTML, inline SVG and CSS
    actions.py   REBUILD, COMPACT, ENABLE/DISABLE QUERY REWRITE: the SQL statements'
                 own code path, audited

`start_console(...)` is what `serve` calls once the proxy listens (proxy/cli/main.py)."""
from __future__ import annotations

from proxy.console.login import Login
from proxy.console.routes import ConsoleApp
from proxy.console.server import ConsoleRefused, ConsoleServer, check
from proxy.observability.audit_log import AuditLog

__all__ = ["ConsoleRefused", "ConsoleServer", "check", "start_console"]


async def start_console(settings, server, datamaps, querylog=None, advisor=None,
                        serving=None, audit: AuditLog | None = None) -> ConsoleServer:
    """The console of `server` (proxy.gateway.server.ProxyServer: its sign-in) over
    `datamaps` (the DatamapService), started; ConsoleRefused or OSError if it cannot be.
    `serving`: the ServingTier, whose engine's state the datamap list shows. `audit`: the
    audit log the actions are written to (serve's, which SIGHUP reopens), else one of
    its own on [server] audit_log."""
    if audit is None:
        audit = AuditLog(settings.server.audit_log)
    app = ConsoleApp(Login(server), datamaps, audit, querylog, advisor, serving)
    console = ConsoleServer(settings, app, server._ssl_context())
    await console.start()
    return console
