"""What every password checker shares: the `Authenticator` protocol, its errors, and
`AllowAll`. A leaf: the users file (proxy/gateway/auth/plain.py), LDAP
(proxy/gateway/auth/ldap.py) and the server import it; it imports nothing of the proxy.

`Authenticator.check(user, password)` returns None when accepted, else a reason.
"""
from __future__ import annotations

from typing import Protocol


class AuthError(Exception):
    pass


class AuthUnavailable(AuthError):
    """The password could not be checked (e.g. the directory is down): the login is refused,
    and it is not counted as a failed login. The message (hosts, the service account, TLS
    errors) goes to the log; the client, not logged in yet, is told only `public`."""

    def __init__(self, message: str, public: str = "LDAP directory unavailable"):
        super().__init__(message)
        self.public = public


class Authenticator(Protocol):
    def check(self, user: str, password: str) -> str | None: ...


class AllowAll:
    """auth=none without a users file: any non-empty user and password (like HS2 NONE)."""

    def check(self, user: str, password: str) -> str | None:
        return None
