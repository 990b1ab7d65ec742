"""The console over real HTTP on loopback, in-process: a real ProxyServer (not listening:
its authenticator, login throttle and audit log), a real catalog and DatamapService (no
Spark: the actions here are the catalog-only rewrite switch), a real query log on that
catalog fed statement events, an in-memory advisor. Checks sign-in, cookies, CSRF, escaping, routing and the audit."""
from __future__ import annotations

import asyncio
import base64
import http.client
import json
import re
import threading
import time
from urllib.parse import urlencode

import pytest

from proxy.advisor.core import Suggestion
from proxy.config import ConsoleSettings, ServerSettings, Settings
from proxy.config import QueryLogSettings
from proxy.console import start_console
from proxy.gateway.auth import build_authenticator
from proxy.gateway.auth import plain as auth
from proxy.gateway.server import ProxyServer
from proxy.observability.observe import StatementEvent
from proxy.observability.querylog.log import QueryLog
from proxy.routing.router import Router
from tests.support.console_fakes import FakeAdvisor
from tests.support.datamaps import add_datamap, decision_service
from tests.support.spnego import Acceptor, negotiate

SCHEMAS = {"db1": {"sales": {"id": "int", "country": "string", "qty": "int"}}}
AGG = "SELECT country, sum(qty) FROM db1.sales GROUP BY country"


class Running:
    """The console on a loop in a thread of its own (the test talks to it with http.client)."""

    def __init__(self, settings, service, querylog=None, advisor=None, kerberos=None):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="console-test-loop")
        self.thread.start()
        self.server = ProxyServer(settings, Router(), kerberos=kerberos,
                                  authenticator=build_authenticator(settings))
        self.console = self._call(start_console(settings, self.server, service, querylog,
                                                advisor))
        self.port = self.console.address[1]

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def close(self):
        self._call(self.console.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def request(self, method, path, *, cookie=None, form=None, headers=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        h = dict(headers or {})
        body = None
        if cookie:
            h["Cookie"] = cookie
        if form is not None:
            body = urlencode(form)
            h.setdefault("Content-Type", "application/x-www-form-urlencoded")
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        text = resp.read().decode()
        conn.close()
        return resp, text


def _settings(tmp_path, **server):
    return Settings(server=ServerSettings(audit_log=str(tmp_path / "audit.jsonl"), **server),
                    console=ConsoleSettings(port=0, host="127.0.0.1"))


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path / "state", SCHEMAS)


@pytest.fixture
def users(tmp_path):
    path = tmp_path / "users"
    auth.add_user(path, "ann", "s3cret")
    return path


def _sign_in(console, user="ann", password="s3cret"):
    resp, _ = console.request("POST", "/login", form={"user": user, "password": password})
    assert resp.status == 303 and resp.getheader("Location") == "/datamaps"
    return resp.getheader("Set-Cookie")


def _csrf(page: str) -> str:
    return re.search(r'name="csrf" value="([0-9a-f]+)"', page).group(1)


def test_sign_in_pages_and_the_rewrite_switch(tmp_path, service, users):
    add_datamap(service, SCHEMAS, "db1", "agg", AGG)
    now = time.time()
    log = QueryLog(service.catalog.path, QueryLogSettings())
    hit = "SELECT country, sum(qty) FROM sales GROUP BY 1"
    for ev in [   # the base tables took 10 s, the datamap 7.5 s: 2.5 s saved
            StatementEvent(now - 9, "s1", "bob", "Excel", hit, "db1", "forwarded",
                           duration_s=10.0),
            StatementEvent(now - 5, "s1", "bob", "Tableau", hit, "db1", "rewritten",
                           ("db1.agg",), duration_s=7.5),
            StatementEvent(now - 3, "s2", "eve<script>", "x",
                           "SELECT * FROM t -- password=hunter2", "db1", "forwarded",
                           why_not=(("db1.agg", "columns: no <b>qty2"),))]:
        log.statement(ev)
    log.flush()
    advisor = FakeAdvisor([Suggestion("create", "sug_1", "CREATE DATAMAP sug_1 AS SELECT 1",
                                      7, 12.0, 10.0, 40, 1.5, "answers 7 queries")])
    console = Running(_settings(tmp_path, users_file=str(users)), service, log, advisor)
    try:
        resp, _ = console.request("GET", "/datamaps")
        assert resp.status == 303 and resp.getheader("Location") == "/login"
        resp, page = console.request("GET", "/login")
        assert resp.status == 200 and 'type="password"' in page
        assert "default-src 'none'" in resp.getheader("Content-Security-Policy")

        resp, page = console.request("POST", "/login", form={"user": "ann", "password": "no"})
        assert resp.status == 401 and "Sign-in refused" in page and resp.getheader("Set-Cookie") is None
        set_cookie = _sign_in(console)
        assert "HttpOnly" in set_cookie and "SameSite=Strict" in set_cookie
        assert "Secure" not in set_cookie                     # plain http
        cookie = set_cookie.split(";", 1)[0]

        resp, page = console.request("GET", "/datamaps", cookie=cookie)
        assert resp.status == 200 and "db1.agg" in page and "signed in as <b>ann</b>" in page
        assert ">on<" in page and "≈ 2.50 s<" in page        # rewrite on; time saved,
        assert "Time saved (estimate)" in page                 # an estimate
        forged = cookie.replace("cu=ann", "cu=root")
        assert console.request("GET", "/datamaps", cookie=forged)[0].status == 303

        resp, page = console.request("GET", "/datamaps/db1.agg", cookie=cookie)
        assert resp.status == 200 and "<svg" in page and "Segments" in page
        assert "db1.sales: 0" in page                          # its base segments
        assert "Tableau" in page                               # a query it answered
        csrf = _csrf(page)

        resp, page = console.request("GET", "/queries?decision=forwarded", cookie=cookie)
        assert "eve&lt;script&gt;" in page and "<script>" not in page
        assert "hunter2" not in page and "columns" in page and "no &lt;b&gt;qty2" in page
        assert "Excel" in page and "Tableau" not in page       # the decision filter
        resp, page = console.request("GET", "/queries?datamap=agg&user=bob", cookie=cookie)
        assert "Tableau" in page and "Excel" not in page and "eve" not in page
        resp, page = console.request("GET", "/suggestions", cookie=cookie)
        assert "CREATE DATAMAP sug_1 AS SELECT 1" in page and "answers 7 queries" in page

        resp, page = console.request(
            "GET", "/datamaps/db1.agg/confirm?action=disable_rewrite", cookie=cookie)
        assert "ALTER DATAMAP db1.agg DISABLE QUERY REWRITE" in page
        assert service.catalog.rewrite_off() == frozenset()       # a GET changes nothing
        for token in ("", "0" * 32):                               # CSRF
            resp, page = console.request("POST", "/datamaps/db1.agg/action", cookie=cookie,
                                         form={"action": "disable_rewrite", "csrf": token})
            assert resp.status == 403 and "token" in page
        assert service.catalog.rewrite_off() == frozenset()
        resp, _ = console.request("POST", "/datamaps/db1.agg/action", cookie=cookie,
                                  form={"action": "disable_rewrite", "csrf": csrf})
        assert resp.status == 303
        assert service.catalog.rewrite_off() == {"db1.agg"}
        resp, page = console.request("GET", resp.getheader("Location"), cookie=cookie)
        assert "DISABLE QUERY REWRITE</code> done" in page and "rewrite_disabled" in page
        assert "by ann" in page and "ENABLE QUERY REWRITE" in page

        # an action that fails is shown with its SQLSTATE
        service.catalog.drop_datamap("db1", "agg")
        add_datamap(service, SCHEMAS, "db1", "agg", AGG)
        resp, _ = console.request("POST", "/datamaps/db1.ghost/action", cookie=cookie,
                                  form={"action": "enable_rewrite", "csrf": csrf})
        assert resp.status == 404
        resp, _ = console.request("POST", "/datamaps/db1.agg/action", cookie=cookie,
                                  form={"action": "drop", "csrf": csrf})
        assert resp.status == 400

        resp, _ = console.request("POST", "/logout", cookie=cookie, form={"csrf": csrf})
        assert resp.status == 303 and "Max-Age=0" in resp.getheader("Set-Cookie")
    finally:
        console.close()
        log.close()
    lines = [json.loads(x) for x in (tmp_path / "audit.jsonl").read_text().splitlines()]
    acts = [x for x in lines if x["event"] == "console_action"]
    assert [(a["outcome"], a["user"], a["statement"]) for a in acts] == [
        ("started", "ann", "ALTER DATAMAP db1.agg DISABLE QUERY REWRITE"),
        ("ok", "ann", "ALTER DATAMAP db1.agg DISABLE QUERY REWRITE")]


def test_failures_show_their_sqlstate(tmp_path, service, users):
    add_datamap(service, SCHEMAS, "db1", "idx", AGG)
    console = Running(_settings(tmp_path, users_file=str(users)), service)
    try:
        cookie = _sign_in(console).split(";", 1)[0]
        resp, page = console.request("GET", "/datamaps/db1.idx", cookie=cookie)
        csrf = _csrf(page)
        # REBUILD runs on Spark, which this service has not: the failure is the action's
        resp, _ = console.request("POST", "/datamaps/db1.idx/action", cookie=cookie,
                                  form={"action": "rebuild", "csrf": csrf})
        location = resp.getheader("Location")
        for _ in range(100):
            page = console.request("GET", location, cookie=cookie)[1]
            if "failed" in page:
                break
            time.sleep(0.05)
        assert "REBUILD DATAMAP db1.idx</code> failed: SQLSTATE <code>" in page
        resp, page = console.request("GET", "/queries", cookie=cookie)
        assert "query log is off" in page
        resp, page = console.request("GET", "/suggestions", cookie=cookie)
        assert "advisor is off" in page
        resp, page = console.request("GET", "/nothing", cookie=cookie)
        assert resp.status == 404 and "no page at /nothing" in page
        resp, _ = console.request("DELETE", "/datamaps", cookie=cookie)
        assert resp.status == 405
        resp, _ = console.request("POST", "/datamaps/db1.idx/action", cookie=cookie,
                                  headers={"Content-Type": "application/json"},
                                  form={"csrf": csrf})
        assert resp.status == 415
    finally:
        console.close()


def test_wrong_passwords_count_in_the_proxys_lockout(tmp_path, service, users):
    console = Running(_settings(tmp_path, users_file=str(users), max_login_failures=2),
                      service)
    try:
        for _ in range(2):
            resp, _ = console.request("POST", "/login", form={"user": "ann", "password": "x"})
            assert resp.status == 401
        resp, page = console.request("POST", "/login", form={"user": "ann", "password": "s3cret"})
        assert resp.status == 401 and "too many" in page.lower()
    finally:
        console.close()


def test_nosasl_needs_no_sign_in(tmp_path, service):
    log = QueryLog(service.catalog.path)
    console = Running(_settings(tmp_path, auth="nosasl"), service, log, FakeAdvisor())
    try:
        resp, page = console.request("GET", "/datamaps")
        assert resp.status == 200 and "signed in as <b>anonymous</b>" in page
        assert "no datamaps yet" in page and "datamap_console=" in resp.getheader("Set-Cookie")
        assert console.request("GET", "/login")[0].status == 303
    finally:
        console.close()
        log.close()


def test_kerberos_signs_in_by_spnego(tmp_path, service):
    """The acceptor is the HTTP transport tests' stand-in (fixed tokens): what is checked is
    the console's use of the transport's SPNEGO code (challenge, mutual token, cookie)."""
    console = Running(_settings(tmp_path, auth="kerberos"), service, kerberos=Acceptor())
    try:
        resp, page = console.request("GET", "/datamaps")
        assert resp.status == 401 and resp.getheader("WWW-Authenticate") == "Negotiate"
        assert "SPNEGO" in page
        resp, page = console.request("GET", "/datamaps", headers=negotiate(b"junk"))
        assert resp.status == 401 and "Invalid token" in page
        resp, page = console.request("GET", "/datamaps", headers=negotiate(b"good"))
        assert resp.status == 200 and "signed in as <b>alice</b>" in page
        assert resp.getheader("WWW-Authenticate") == "Negotiate " + base64.b64encode(b"mutual").decode()
        cookie = resp.getheader("Set-Cookie").split(";")[0]
        assert console.request("GET", "/queries", cookie=cookie)[0].status == 200
    finally:
        console.close()


def test_non_ascii_cookie_or_token_is_refused_not_an_error(tmp_path, service, users):
    # hmac.compare_digest raises TypeError on non-ASCII text: a forged cookie or form
    # token was a 500 with a traceback in the log instead of "not signed in" / 403
    console = Running(_settings(tmp_path, users_file=str(users)), service)
    try:
        resp, _ = console.request("GET", "/datamaps", cookie="datamap_console=cu=ann&e=9999999999&s=\xe9")
        assert resp.status == 303 and resp.getheader("Location") == "/login"
        cookie = _sign_in(console).split(";")[0]
        resp, page = console.request("POST", "/logout", cookie=cookie, form={"csrf": "\xe9"})
        assert resp.status == 403 and "token does not match" in page
    finally:
        console.close()
