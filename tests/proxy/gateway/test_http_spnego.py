"""The HTTP transport's side of SPNEGO (auth=kerberos), against the acceptor interface
part C implements (proxy.gateway.auth.kerberos.Acceptor.spnego: token -> (user | None, out token)).
The acceptor here is a stand-in with fixed tokens: what is checked is the HTTP logic
(401 challenges, the continuation token, mutual authentication, the cookie); the real
acceptor with a real KDC is tested with Kerberos itself. At the end, in-process checks of
the other refusals (Basic, a raw token, 100 Continue)."""
from __future__ import annotations

import asyncio
import base64
from types import SimpleNamespace

import pytest

from proxy.config import ServerSettings, Settings
from proxy.gateway.http_transport import HttpTransport
from proxy.gateway.server import ProxyServer
from proxy.http import wire as hw
from proxy.routing.router import Router
from tests.support.spnego import Acceptor, negotiate


@pytest.fixture
def transport():
    server = ProxyServer(Settings(server=ServerSettings(auth="kerberos")), Router(),
                         kerberos=Acceptor())
    yield server.http
    server._auth_pool.shutdown()


def login(transport, headers: dict[str, str]):
    req = hw.Request("POST", "/cliservice", "HTTP/1.1", headers)
    conn = SimpleNamespace(peer="127.0.0.1:1")
    return asyncio.run(transport._authorise(conn, "127.0.0.1", req, True))


@pytest.mark.parametrize("headers,challenge,words", [
    ({}, "Negotiate", "Authorization header received from the client is empty"),
    ({"authorization": "Basic YTpi"}, "Negotiate", "Kerberos (SPNEGO) authentication needed"),
    (negotiate(b"round1"), "Negotiate " + base64.b64encode(b"more").decode(), "another round"),
    (negotiate(b"junk"), "Negotiate", "Kerberos: Invalid token"),
    ({"authorization": "Negotiate !!"}, "Negotiate", "malformed Negotiate token"),
])
def test_refusals_challenge_with_negotiate(transport, headers, challenge, words):
    with pytest.raises(hw.HttpError) as e:
        login(transport, headers)
    assert e.value.status == 401 and words in e.value.message
    assert e.value.headers["WWW-Authenticate"] == challenge


def test_hive_jdbcs_colon_separator_is_accepted(transport):
    # Hive JDBC's HttpKerberosRequestInterceptor sends "Negotiate : <base64>"
    headers = {"authorization": "Negotiate : " + base64.b64encode(b"good").decode()}
    assert login(transport, headers)[0] == "alice"


def test_tokens_are_checked_in_the_login_pool(transport):
    # as on the binary port: a flood of tokens queues for the login pool's two threads,
    # the default executor stays free for everyone else
    Acceptor.threads.clear()
    login(transport, negotiate(b"good"))
    assert Acceptor.threads and all(t.startswith("auth") for t in Acceptor.threads)


def test_accepted_token_mutual_auth_and_cookie(transport):
    user, password, headers, how = login(transport, negotiate(b"good"))
    assert (user, password, how) == ("alice", "", "SPNEGO")
    assert headers["WWW-Authenticate"] == "Negotiate " + base64.b64encode(b"mutual").decode()
    cookie = headers["Set-Cookie"].split(";", 1)[0]
    assert headers["Set-Cookie"].endswith("; Secure")
    assert login(transport, {"cookie": cookie})[0] == "alice"


@pytest.mark.parametrize("authz,named", [("Bearer eyJhbGciOi", "bearer"),
                                         ("tok-3f9a1c77e2b04d", "this")])
def test_a_refused_authorization_header_is_not_echoed(authz, named):
    # auth = none: only Basic is accepted; a header of one word may be a raw token
    settings = SimpleNamespace(server=ServerSettings(auth="none"))
    plain = HttpTransport(SimpleNamespace(settings=settings, kerberos=None))
    with pytest.raises(hw.HttpError) as e:
        login(plain, {"authorization": authz})
    assert e.value.status == 401 and f"{named} authorization is not accepted" in e.value.message
    assert authz.split()[-1] not in e.value.message


def test_basic_with_an_empty_user_name_is_refused_as_plain_refuses_it():
    # auth = none checks no password, but an empty name is nobody: OpenSession would fail
    # deep inside (the upstream login needs a name) with an internal error
    server = ProxyServer(Settings(server=ServerSettings(auth="none")), Router())
    try:
        with pytest.raises(hw.HttpError) as e:
            login(server.http, {"authorization": "Basic " + base64.b64encode(b":pw").decode()})
        assert e.value.status == 401 and "empty user name" in e.value.message
        assert login(server.http, {"authorization": "Basic " +
                                   base64.b64encode(b"alice:pw").decode()})[0] == "alice"
    finally:
        server._auth_pool.shutdown()


def test_a_refused_request_waiting_for_100_continue_is_answered_at_once(transport):
    # the client holds its body back until "100 Continue", which a refusal never sends:
    # waiting for that body would only delay the 401
    req = hw.Request("POST", "/cliservice", "HTTP/1.1",
                     {"content-length": "1000", "expect": "100-continue"})

    async def main():
        reader = asyncio.StreamReader()          # nothing comes
        task = asyncio.create_task(transport._discard_body(req, reader, bytearray()))
        for _ in range(10):
            await asyncio.sleep(0)
        done = task.done()
        task.cancel()
        return done
    assert asyncio.run(main())
