"""Who is asking: the console's sign-in, on the proxy's own authenticator.

  auth = none | ldap | password file   a sign-in form; the password is checked by the
        (PLAIN)                        proxy's authenticator through ProxyServer's login
                                       path (its worker pool, login throttle and lockout:
                                       a guess here counts as one on the Thrift ports)
  auth = nosasl                        no sign-in: everyone is "anonymous", as on the port
  auth = kerberos                      SPNEGO (Authorization: Negotiate), by the same
                                       acceptor and code as the HTTP transport

A success sets a signed cookie (httpwire.CookieSigner under a key of this process: a
restart signs everyone out) that is HttpOnly, SameSite=Strict, and Secure under TLS. The
CSRF token of every form is derived from that cookie, so it is per sign-in and never
stored."""
from __future__ import annotations

import hmac
from dataclasses import dataclass

from proxy.http import wire as hw

COOKIE = "datamap_console"
SESSION_S = 8 * 3600.0
ANONYMOUS = "anonymous"


@dataclass(frozen=True)
class Who:
    user: str
    cookie: str           # the signed cookie value this request carried ("" if none yet)


class Login:
    def __init__(self, server, key: bytes | None = None):
        self.server = server            # proxy.gateway.server.ProxyServer: authenticator, throttle
        self.mode = server.settings.server.auth
        self.signer = hw.CookieSigner(SESSION_S, key, name=COOKIE, attrs="SameSite=Strict")

    @property
    def form(self) -> bool:
        """True when sign-in is by the form (user and password)."""
        return self.mode not in ("nosasl", "kerberos")

    def who(self, req: hw.Request) -> Who | None:
        """The signed-in user of the request, or None."""
        for value in hw.cookie_value(req.headers.get("cookie", ""), COOKIE):
            user = self.signer.user(value)
            if user is not None:
                return Who(user, value)
        return None

    def issue(self, user: str, secure: bool) -> tuple[Who, str]:
        """(who, Set-Cookie header value) of a new sign-in."""
        header = self.signer.issue(user, secure)
        value = header.split(";", 1)[0].partition("=")[2]
        return Who(user, value), header

    def sign_out(self, secure: bool) -> str:
        return (f"{COOKIE}=; Max-Age=0; Path=/; HttpOnly; SameSite=Strict"
                + ("; Secure" if secure else ""))

    def csrf(self, who: Who) -> str:
        return self.signer.derive("csrf", who.cookie)

    def csrf_ok(self, who: Who, token: str) -> bool:
        return bool(token) and hmac.compare_digest(   # bytes: the token is the client's text
            self.csrf(who).encode(), token.encode("utf-8", "replace"))

    async def password(self, peer: str, user: str, password: str) -> str | None:
        """None when the user may sign in, else why not (the proxy's login path)."""
        if not user:
            return "empty user name"
        conn = _Peer(peer)
        address = peer.rpartition(":")[0] or peer
        return await self.server._authenticate(conn, address, user, password)

    async def negotiate(self, peer: str, authorization: str) -> tuple[str, dict[str, str]]:
        """SPNEGO: (user, response headers); hw.HttpError(401) with the challenge else."""
        return await self.server.http._negotiate(_Peer(peer), authorization)


@dataclass
class _Peer:
    """What the proxy's login path logs a connection by."""
    peer: str
