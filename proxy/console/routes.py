"""The console's requests -> replies: sign-in, the pages, and the actions (POST only,
with the CSRF token of the sign-in, after a confirmation page). No socket here
(server.py reads and writes); the catalog, the query log and the advisor are read in
worker threads, never on the event loop."""
from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from urllib.parse import parse_qs, unquote

from proxy.http import wire as hw
from proxy.console import pages, pages_log, views
from proxy.console.actions import ACTIONS, Actions, statement
from proxy.console.login import ANONYMOUS, Login, Who
from proxy.logsafe import safe

log = logging.getLogger("proxy.console")

HEADERS = {
    "Cache-Control": "no-store",
    # inline style is all a page has: no script, no frame, forms to this origin only
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; "
                               "img-src 'self' data:; form-action 'self'; "
                               "frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
RECENT_LIMIT = 200


@dataclass
class Reply:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


def html(status: int, text: str, **headers: str) -> Reply:
    return Reply(status, text.encode("utf-8"), {**HEADERS, **headers})


def redirect(location: str, **headers: str) -> Reply:
    return Reply(303, b"", {**HEADERS, "Location": location, **headers})


class ConsoleApp:
    """`service`: the DatamapService (its catalog too); `audit`: the proxy's AuditLog;
    `querylog`, `advisor`: part of proxy/observability/querylog/log.py and
    proxy/advisor/core.py, or None; `serving`: the ServingTier (its engine_status() and
    settings), or None."""

    def __init__(self, login: Login, service, audit, querylog=None, advisor=None,
                 serving=None):
        self.login = login
        self.service = service
        self.catalog = service.catalog
        self.querylog = querylog
        self.advisor = advisor
        self.serving = serving
        self.actions = Actions(service, audit)

    async def handle(self, req: hw.Request, body: bytes, peer: str, secure: bool) -> Reply:
        path = unquote(req.path)
        method = req.method
        if method not in ("GET", "HEAD", "POST"):
            return html(405, pages.message("Not allowed", f"{method} is not served here"),
                        Allow="GET, POST")
        form = _form(req, body) if method == "POST" else {}
        if path == "/login":
            return await self._login(req, form, peer, secure)
        who, cookie = self.login.who(req), {}
        if who is None:
            got = await self._sign_in_without_form(req, peer, secure)
            if isinstance(got, Reply):
                return got
            who, cookie = got
        reply = await self._route(method, path, _query(req), form, who, peer, secure)
        reply.headers.update(cookie)
        return reply

    async def _sign_in_without_form(self, req, peer: str, secure: bool):
        """(who, Set-Cookie) under nosasl and SPNEGO; else the reply that asks to sign in."""
        if self.login.mode == "nosasl":
            who, header = self.login.issue(ANONYMOUS, secure)
            return who, {"Set-Cookie": header}
        if self.login.mode == "kerberos":
            authz = req.headers.get("authorization", "")
            if hw.auth_scheme(authz) != "negotiate":
                return html(401, pages.login(kerberos=True), **{"WWW-Authenticate": "Negotiate"})
            try:
                user, extra = await self.login.negotiate(peer, authz)
            except hw.HttpError as e:
                return html(401, pages.login(e.message, kerberos=True), **e.headers)
            who, header = self.login.issue(user, secure)
            return who, {**extra, "Set-Cookie": header}
        return redirect("/login")

    async def _login(self, req, form, peer: str, secure: bool) -> Reply:
        if not self.login.form:
            return redirect("/datamaps")
        if req.method != "POST":
            return html(200, pages.login())
        user = form.get("user", "")
        reason = await self.login.password(peer, user, form.get("password", ""))
        if reason is not None:
            log.info("console %s: sign-in as %s refused", peer, safe(user))
            return html(401, pages.login(f"Sign-in refused: {reason}"))
        _, header = self.login.issue(user, secure)
        log.info("console %s: %s signed in", peer, safe(user))
        return redirect("/datamaps", **{"Set-Cookie": header})

    async def _route(self, method, path, query, form, who: Who, peer, secure) -> Reply:
        csrf = self.login.csrf(who)
        if method == "POST" and not self.login.csrf_ok(who, form.get("csrf", "")):
            return html(403, pages.message("Refused", "the form's token does not match this "
                                           "sign-in (a stale page or another site's form): "
                                           "reload the page and try again",
                                           user=who.user, csrf=csrf))
        if path in ("/", ""):
            return redirect("/datamaps")
        if path == "/logout" and method == "POST":
            return redirect("/login" if self.login.form else "/datamaps",
                            **{"Set-Cookie": self.login.sign_out(secure)})
        if path == "/datamaps" and method != "POST":
            rows = await asyncio.to_thread(views.summaries, self.catalog, self.querylog)
            return html(200, pages.datamaps(rows, user=who.user, csrf=csrf,
                                            log_on=self.querylog is not None,
                                            serving=views.serving(self.serving)))
        if path == "/queries" and method != "POST":
            return await self._queries(query, who, csrf)
        if path == "/suggestions" and method != "POST":
            return await self._suggestions(who, csrf)
        if path.startswith("/datamaps/"):
            qualified, _, verb = path[len("/datamaps/"):].partition("/")
            return await self._datamap(method, qualified, verb, query, form, who, csrf, peer)
        return html(404, pages.message("Not found", f"no page at {path[:100]}",
                                       user=who.user, csrf=csrf))

    async def _datamap(self, method, qualified, verb, query, form, who, csrf, peer) -> Reply:
        detail = await asyncio.to_thread(views.detail, self.catalog, self.querylog, qualified)
        if detail is None:
            return html(404, pages.message("Not found", f"no datamap {qualified}",
                                           user=who.user, csrf=csrf))
        if verb == "" and method != "POST":
            flash = _int(query.get("done"))
            return html(200, pages.datamap(
                detail, self.actions.recent(qualified), user=who.user, csrf=csrf,
                flash=self.actions.get(flash) if flash is not None else None))
        action = (form if method == "POST" else query).get("action", "")
        sql = statement(action, detail.summary.qualified)
        if sql is None:
            return html(400, pages.message("Bad request", f"no action {action[:40]!r} here",
                                           user=who.user, csrf=csrf))
        if verb == "confirm" and method != "POST":
            return html(200, pages.confirm(detail.summary.qualified, action, sql,
                                           user=who.user, csrf=csrf))
        if verb == "action" and method == "POST":
            rec = self.actions.begin(who.user, peer, detail.summary.qualified, action)
            if ACTIONS[action][1]:
                self.actions.start(rec, peer)
            else:
                await asyncio.to_thread(self.actions.run, rec, peer)
            return redirect(f"/datamaps/{detail.summary.qualified}?done={rec.id}")
        return html(405, pages.message("Not allowed", "actions are POSTed from their "
                                       "confirmation page", user=who.user, csrf=csrf))

    async def _queries(self, query, who, csrf) -> Reply:
        filters = {k: query.get(k, "").strip() for k in ("user", "decision", "datamap")}
        entries = None
        if self.querylog is not None:
            entries = await asyncio.to_thread(
                self.querylog.recent, RECENT_LIMIT, user=filters["user"] or None,
                decision=filters["decision"] or None, datamap=filters["datamap"] or None)
        return html(200, pages_log.queries(entries, user=who.user, csrf=csrf, filters=filters))

    async def _suggestions(self, who, csrf) -> Reply:
        if self.advisor is None:
            return html(200, pages_log.suggestions(None, user=who.user, csrf=csrf))
        try:
            items = await asyncio.to_thread(self.advisor.suggest)
        except Exception as e:  # noqa: BLE001 - the page says so; the console goes on
            log.exception("console: the advisor failed")
            return html(200, pages_log.suggestions(
                [], user=who.user, csrf=csrf, error=f"The advisor failed: {safe(e)}"))
        return html(200, pages_log.suggestions(items, user=who.user, csrf=csrf))

    def close(self) -> None:
        self.actions.close()


def _query(req: hw.Request) -> dict[str, str]:
    _, _, q = req.target.partition("?")
    return {k: v[0] for k, v in parse_qs(q, keep_blank_values=True).items()}


def _form(req: hw.Request, body: bytes) -> dict[str, str]:
    kind = req.headers.get("content-type", "").split(";")[0].strip().lower()
    if body and kind != "application/x-www-form-urlencoded":
        raise hw.HttpError(415, "forms are sent as application/x-www-form-urlencoded")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise hw.HttpError(400, "the form is not UTF-8") from None
    return {k: v[0] for k, v in parse_qs(text, keep_blank_values=True).items()}


def _int(value: str | None) -> int | None:
    return int(value) if value and value.isdigit() and len(value) < 12 else None
