"""`[server] auth = ldap`: PLAIN (and HTTP Basic) credentials checked by an LDAP bind.

ldap3 rather than python-ldap: ldap3 is pure Python, so it installs from a wheel anywhere;
python-ldap publishes no Linux wheel and needs a C toolchain plus the OpenLDAP and SASL
headers at install time.

Finding the user's DN, as HiveServer2 does:
  * `ldap_user_dn_pattern` "uid=%s,ou=people,dc=example,dc=com", several separated by `:`,
    tried in order (HS2's userDNPattern); or
  * a search under `ldap_base_dn` for `(ldap_user_attribute=user)`, bound as
    `ldap_bind_dn` when set (else anonymously); exactly one entry must match.
Then a bind as that DN with the client's password. `ldap_group_filter` lists group names
(cn); the user must be a `ldap_group_member_attribute` of one of them under
`ldap_group_base_dn` (looked up as the service account when set, else as the user).

The user name is escaped wherever it goes into a DN or a filter, so `*`, `)(`, `,` or `=`
in it match nothing but themselves. An empty password is refused before any bind: LDAP
treats a simple bind with a DN and no password as an anonymous bind, which succeeds.

Outcomes of `check`: None (accepted); one generic reason for a wrong password, an unknown
user and a user in none of the groups (the log says which); `AuthUnavailable` when no URL
answers, which the server reports without counting it as a failed login.
"""
from __future__ import annotations

import logging
import math
import os
import ssl
from urllib.parse import urlsplit

import ldap3
from ldap3.core import exceptions as lx
from ldap3.utils.conv import escape_filter_chars
from ldap3.utils.dn import escape_rdn

from proxy.gateway.auth.base import AuthError, AuthUnavailable
from proxy.config import ServerSettings
from proxy.logsafe import safe

log = logging.getLogger("proxy.ldap")

# The directory did not answer (as opposed to answering "no").
_DOWN = (lx.LDAPSocketOpenError, lx.LDAPCommunicationError, lx.LDAPResponseTimeoutError,
         lx.LDAPSessionTerminatedByServerError, lx.LDAPStartTLSError, ssl.SSLError)


class ServiceBindRefused(AuthUnavailable):
    """ldap_bind_dn / ldap_bind_password are wrong: no user can log in until fixed."""


class _Refused(Exception):
    """A reason for the log; the client only sees the generic message."""


def parse_urls(text: str | None) -> list[str]:
    urls = (text or "").replace(",", " ").split()
    if not urls:
        raise AuthError("auth = ldap needs [server] ldap_url (ldap://host:389 or ldaps://host:636)")
    for url in urls:
        u = urlsplit(url)
        if u.scheme not in ("ldap", "ldaps") or not u.hostname:
            raise AuthError(f"[server] ldap_url: {url!r} is not ldap://host[:port] or "
                            f"ldaps://host[:port]")
        try:
            u.port
        except ValueError:
            raise AuthError(f"[server] ldap_url: bad port in {url!r}") from None
    return urls


def _patterns(text: str | None) -> list[str]:
    patterns = [p.strip() for p in (text or "").split(":") if p.strip()]
    for p in patterns:
        if p.count("%s") != 1:
            raise AuthError(f"[server] ldap_user_dn_pattern: {p!r} must contain %s once "
                            f"(where the user name goes)")
    return patterns


class LdapAuthenticator:
    def __init__(self, s: ServerSettings):
        self.urls = parse_urls(s.ldap_url)
        self._answered = self.urls[0]
        self.patterns = _patterns(s.ldap_user_dn_pattern)
        self.base_dn = s.ldap_base_dn
        if not self.patterns and not self.base_dn:
            raise AuthError("auth = ldap needs [server] ldap_user_dn_pattern or ldap_base_dn "
                            "(where users are)")
        if bool(s.ldap_bind_dn) != bool(s.ldap_bind_password):
            raise AuthError("[server] ldap_bind_dn and ldap_bind_password go together")
        self.groups = [g.strip() for g in (s.ldap_group_filter or "").split(",") if g.strip()]
        self.group_base_dn = s.ldap_group_base_dn or self.base_dn
        if self.groups and not self.group_base_dn:
            raise AuthError("[server] ldap_group_filter needs ldap_group_base_dn (or "
                            "ldap_base_dn) to find the groups under")
        if s.ldap_starttls and any(u.startswith("ldaps:") for u in self.urls):
            raise AuthError("[server] ldap_starttls is for ldap:// URLs; ldaps:// is TLS already")
        if s.ldap_ca_file and not os.access(s.ldap_ca_file, os.R_OK):
            raise AuthError(f"[server] ldap_ca_file {s.ldap_ca_file}: not readable")
        if s.ldap_timeout <= 0:
            raise AuthError("[server] ldap_timeout must be > 0 seconds")
        self.user_attribute = s.ldap_user_attribute
        self.member_attribute = s.ldap_group_member_attribute
        self.bind_dn, self._bind_password = s.ldap_bind_dn, s.ldap_bind_password
        self.starttls = s.ldap_starttls
        self.timeout = s.ldap_timeout
        self._receive_timeout = max(1, math.ceil(s.ldap_timeout))   # ldap3 packs it as an int
        self._tls = ldap3.Tls(validate=ssl.CERT_REQUIRED, ca_certs_file=s.ldap_ca_file,
                              version=ssl.PROTOCOL_TLS_CLIENT)

    # ------------------------------------------------------------------ connections

    def _connect(self, url: str, dn: str | None, password: str | None) -> ldap3.Connection:
        """A bound connection, or _Refused (the directory said no), or a _DOWN error."""
        server = ldap3.Server(url, use_ssl=url.startswith("ldaps:"), tls=self._tls,
                              get_info=ldap3.NONE, connect_timeout=self.timeout)
        conn = ldap3.Connection(server, user=dn, password=password, read_only=True,
                                receive_timeout=self._receive_timeout, raise_exceptions=False)
        try:
            conn.open()
            if self.starttls and not conn.start_tls():
                raise lx.LDAPStartTLSError(f"StartTLS refused: {conn.result.get('description')}")
            if not conn.bind():
                why = (conn.result or {}).get("description") or "no reason"
                if why in ("unavailable", "busy"):
                    raise lx.LDAPCommunicationError(f"bind: {why}")
                raise _Refused(f"bind as {dn or 'anonymous'} refused: {why}")
        except BaseException:
            conn.unbind()       # never leave a socket behind a failed attempt
            raise
        return conn

    def _service(self, url: str) -> ldap3.Connection:
        try:
            return self._connect(url, self.bind_dn, self._bind_password)
        except _Refused as e:
            # the operator's mistake, not the user's: say so (without the password)
            raise ServiceBindRefused(f"LDAP service bind failed at {url}: {e}") from None

    def probe(self) -> None:
        """Start-up check: a wrong service account fails; an unreachable directory only
        warns (it may come up after the proxy)."""
        try:
            self._on_first_url(lambda url: self._service(url).unbind())
        except ServiceBindRefused as e:
            raise AuthError(str(e)) from None
        except AuthUnavailable as e:
            log.warning("%s; logins fail until it answers", e)

    def _on_first_url(self, fn):
        """fn(url) on each URL until one answers; AuthUnavailable if none does. The URL
        that answered last goes first, then the others in order: a primary that is down
        (or silently dropping packets) costs its timeout once, not on every login."""
        errors = []
        first = self._answered
        for url in [first] + [u for u in self.urls if u != first]:
            try:
                result = fn(url)
            except _DOWN as e:
                errors.append(f"{url}: {safe(e, 200) or type(e).__name__}")
                continue
            self._answered = url
            return result
        self._answered = self.urls[0]     # all down: back to the configured order
        raise AuthUnavailable("LDAP directory unavailable (" + "; ".join(errors) + ")")

    # ------------------------------------------------------------------ the check

    def check(self, user: str, password: str) -> str | None:
        generic = f"LDAP authentication failed for user {user}"
        if not user or not password:
            log.info("LDAP login refused for %s: empty %s", safe(user, 64) or "''",
                     "user name" if not user else "password")
            return generic
        try:
            self._on_first_url(lambda url: self._check_at(url, user, password))
        except _Refused as e:
            log.info("LDAP login refused for %s: %s", safe(user, 64), safe(e, 300))
            return generic
        except lx.LDAPException as e:   # ldap3 refusing the input itself (a DN it cannot send)
            log.info("LDAP login refused for %s: %s: %s", safe(user, 64), type(e).__name__,
                     safe(e, 300))
            return generic
        return None

    def _check_at(self, url: str, user: str, password: str) -> None:
        conn, dn = self._bind_user(url, user, password)
        try:
            if self.groups:
                self._check_groups(url, conn, user, dn)
        finally:
            conn.unbind()

    def _bind_user(self, url: str, user: str, password: str) -> tuple[ldap3.Connection, str]:
        if self.patterns:
            refused = []
            for pattern in self.patterns:
                dn = pattern.replace("%s", escape_rdn(user))
                try:
                    conn = self._connect(url, dn, password)
                except _Refused as e:
                    refused.append(str(e))
                    continue
                return conn, dn
            raise _Refused("; ".join(refused))
        dn = self._find_dn(url, user)
        return self._connect(url, dn, password), dn

    def _find_dn(self, url: str, user: str) -> str:
        svc = self._service(url) if self.bind_dn else self._connect(url, None, None)
        try:
            flt = f"({self.user_attribute}={escape_filter_chars(user)})"
            svc.search(self.base_dn, flt, attributes=[], size_limit=2,
                       time_limit=self._receive_timeout)
            found = [e["dn"] for e in svc.response or () if e.get("type") == "searchResEntry"]
        finally:
            svc.unbind()
        if len(found) != 1:
            raise _Refused(f"{len(found) or 'no'} entries match {flt} under {self.base_dn}"
                           + ("" if not found else " (ambiguous)"))
        return found[0]

    def _check_groups(self, url: str, user_conn: ldap3.Connection, user: str, dn: str) -> None:
        value = user if self.member_attribute.lower() == "memberuid" else dn
        names = "".join(f"(cn={escape_filter_chars(g)})" for g in self.groups)
        flt = f"(&(|{names})({self.member_attribute}={escape_filter_chars(value)}))"
        conn = self._service(url) if self.bind_dn else user_conn
        try:
            conn.search(self.group_base_dn, flt, attributes=["cn"], size_limit=1,
                        time_limit=self._receive_timeout)
            hit = any(e.get("type") == "searchResEntry" for e in conn.response or ())
        finally:
            if conn is not user_conn:
                conn.unbind()
        if not hit:
            raise _Refused(f"{dn} is in none of the groups {', '.join(self.groups)} "
                           f"under {self.group_base_dn}")
