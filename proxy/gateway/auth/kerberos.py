"""Kerberos for clients (`[server] auth = kerberos`): SASL GSSAPI on the binary port
(RFC 4752) and SPNEGO for HTTP, both accepted with the proxy's own keytab (python-gssapi
over MIT Kerberos). The proxy terminates Kerberos: towards Spark it still speaks PLAIN.

`Acceptor(settings.server)` loads the keytab once (start-up fails naming the file or the
principal it lacks). `_HOST` in a principal becomes the server's host name, as in
HiveServer2: `host` itself when it is a name, else (0.0.0.0, ::, an address) this
machine's fully qualified name, lower-cased.

The identity is the client principal's short name (Hadoop's DEFAULT auth_to_local rule):
`alice@REALM` and `alice/admin@REALM` are both user `alice`, provided REALM is the
service principal's realm; a principal of another realm (cross-realm trust) is refused
rather than mapped onto a local user of the same name.

SASL GSSAPI is a state machine without I/O (`GssapiServer`): the server feeds it the
negotiation messages and writes what it returns. Only QOP `auth` is offered: after login
the frames are plain, exactly as with PLAIN, so a client asking for `auth-int` or
`auth-conf` (Hive JDBC `saslQop=`) is refused by its own SASL library ("no common
protection layer"); use TLS for confidentiality.

gssapi calls are blocking (keytab reads, crypto): callers run them in a worker thread.
"""
from __future__ import annotations

import re
import socket
import struct
from dataclasses import dataclass

from proxy.logsafe import safe
from proxy.thrift.sasl import BAD, COMPLETE, ERROR, OK, START, STATUS_NAMES, encode_negotiation

MECHANISM = "GSSAPI"
MAX_TOKEN_BYTES = 65536     # largest GSSAPI negotiation message, whatever max_negotiation_bytes
_LAYER_NONE = 1           # RFC 4752 security-layer bit: no integrity, no confidentiality


class KerberosError(Exception):
    """A Kerberos failure, with a message fit for the client and the log (never a key)."""


def expand_host(principal: str, host: str | None) -> str:
    """`principal` with `_HOST` replaced as HiveServer2 does (lower-case FQDN)."""
    if "_HOST" not in principal:
        return principal
    name = (host or "").strip()
    if not name or name in ("0.0.0.0", "::") or _is_address(name):
        name = socket.getfqdn()
    return principal.replace("_HOST", name.lower())


def _is_address(name: str) -> bool:
    for family in (socket.AF_INET, socket.AF_INET6):
        try:
            socket.inet_pton(family, name)
            return True
        except OSError:
            pass
    return False


def short_name(principal: str, realm: str | None) -> str:
    """The user name of a client principal: instance and realm stripped. Raises
    KerberosError for a principal outside `realm` (when known)."""
    primary, _, prealm = principal.partition("@")
    if realm and prealm and prealm != realm:
        raise KerberosError(f"Kerberos principal {principal} is not of realm {realm}; "
                            f"no rule maps it to a user")
    user = primary.split("/", 1)[0]
    if not user:
        raise KerberosError(f"Kerberos principal {principal!r} has no user name")
    return user


def _realm_of(principal: str) -> str | None:
    return principal.partition("@")[2] or None


def _describe(e: Exception) -> str:
    """A GSS error as one line: the major and minor messages (the minor one says e.g.
    'Ticket expired' or 'Wrong principal in request')."""
    gen = getattr(e, "gen_message", None)
    text = " ".join(str(gen() if callable(gen) else e).split())
    parts = [p for p in re.split(r",? ?(?:Major|Minor) \(\d+\): ", text) if p]
    # SPNEGO leaves minor codes unresolved ("Success"); the major one is all there is then.
    useful = [p for p in parts if p not in ("Success", "Unknown error")
              and not p.startswith("Unspecified GSS failure")]
    return ", ".join(useful or parts) or text


class Acceptor:
    """The proxy's Kerberos service credentials, read from the keytab once."""

    def __init__(self, server) -> None:
        try:
            import gssapi
        except ImportError:
            raise KerberosError("auth = kerberos needs python-gssapi: "
                                "pip install 'datamap-proxy[kerberos]'") from None
        self._gssapi = gssapi
        keytab = server.kerberos_keytab
        if not keytab:
            raise KerberosError("auth = kerberos needs [server] kerberos_keytab")
        try:
            with open(keytab, "rb"):
                pass
        except OSError as e:
            raise KerberosError(f"cannot read Kerberos keytab {keytab}: {e.strerror}") from None
        self.keytab = keytab
        if not server.kerberos_principal:
            raise KerberosError("auth = kerberos needs [server] kerberos_principal (hive/_HOST@REALM)")
        self.principal = expand_host(server.kerberos_principal, server.host)
        self.spnego_principal = (expand_host(server.kerberos_spnego_principal, server.host)
                                 if server.kerberos_spnego_principal else None)
        krb5 = gssapi.MechType.kerberos
        self._sasl_creds = self._acquire(self.principal, [krb5])
        self._spnego_creds = (self._acquire(self.spnego_principal, None)
                              if self.spnego_principal else None)
        # the realm users must belong to: the service's, as the library completed it
        # (a principal written without @REALM gets the default realm)
        self._realm = _realm_of(str(self._sasl_creds.name))

    def _acquire(self, principal: str, mechs):
        g = self._gssapi
        try:
            name = g.Name(principal, g.NameType.kerberos_principal)
            return g.Credentials(name=name, usage="accept", mechs=mechs,
                                 store={"keytab": self.keytab})
        except g.exceptions.GSSError as e:
            raise KerberosError(f"cannot use principal {principal} from keytab {self.keytab}: "
                                f"{_describe(e)}") from None

    # ------------------------------------------------------------------ binary: SASL GSSAPI

    def sasl(self) -> GssapiServer:
        ctx = self._gssapi.SecurityContext(creds=self._sasl_creds, usage="accept")
        return GssapiServer(ctx, self._realm, self._gssapi.exceptions.GSSError)

    # ------------------------------------------------------------------ HTTP: SPNEGO

    def spnego(self, token: bytes) -> tuple[str | None, bytes | None]:
        """Accept one `Authorization: Negotiate` token: (short user name when the context
        is complete, output token for `WWW-Authenticate: Negotiate`). HTTP requests are
        independent, so each token starts a new context; a Kerberos SPNEGO login takes one
        round. Raises KerberosError on a bad, expired or misaddressed token."""
        if self._spnego_creds is None:
            raise KerberosError("SPNEGO needs [server] kerberos_spnego_principal (HTTP/_HOST@REALM)")
        if token[:1] not in (b"\x60", b"\xa1"):     # GSS initial token / SPNEGO NegTokenResp
            what = "an NTLM token (NTLM is not supported)" if token.startswith(b"NTLMSSP") \
                else "not a Kerberos or SPNEGO token"
            raise KerberosError(f"Kerberos (SPNEGO) authentication failed: the Negotiate "
                                f"header carries {what}")
        g = self._gssapi
        ctx = g.SecurityContext(creds=self._spnego_creds, usage="accept")
        try:
            out = ctx.step(token)
            # SPNEGO keeps a failure for the next call on the context, to return its reject
            # token first: asking whether it is complete raises it.
            if not ctx.complete:
                return None, out
            principal = str(ctx.initiator_name)
        except g.exceptions.GSSError as e:
            raise KerberosError(f"Kerberos (SPNEGO) authentication failed: {_describe(e)}") from None
        return short_name(principal, self._realm), out


@dataclass
class Step:
    reply: bytes = b""              # negotiation bytes to send now
    user: str | None = None         # set once: the login succeeded (reply is COMPLETE)
    error: str | None = None        # the login failed: send `reply`, then close


class GssapiServer:
    """Server side of SASL GSSAPI (RFC 4752) on HiveServer2's negotiation messages:
    START "GSSAPI", context tokens both ways until the context is established (the last
    one, mutual authentication, answered by an empty message), the wrapped 4-byte
    security-layer offer and the client's wrapped choice, then COMPLETE."""

    def __init__(self, ctx, realm: str | None, gss_error: type[Exception]):
        self._ctx = ctx
        self._realm = realm
        self._gss_error = gss_error
        self._stage = "start"       # start -> context -> layer -> done | failed
        self.principal: str | None = None

    def _fail(self, status: int, reason: str) -> Step:
        self._stage = "failed"
        return Step(reply=encode_negotiation(status, reason.encode("utf-8", "replace")), error=reason)

    def on_message(self, status: int, payload: bytes) -> Step:
        if status in (BAD, ERROR):
            return self._fail(ERROR, f"client aborted SASL GSSAPI ({STATUS_NAMES[status]}): "
                                     f"{safe(payload.decode('utf-8', 'replace'))}")
        if self._stage == "start":
            if status != START:
                return self._fail(ERROR, f"expected SASL START, got {STATUS_NAMES.get(status, status)}")
            mech = payload.decode("ascii", "replace").strip().upper()
            if mech != MECHANISM:
                return self._fail(BAD, f"Unsupported mechanism type {safe(mech, 64)}: this server "
                                       f"requires Kerberos (SASL GSSAPI; auth = kerberos)")
            self._stage = "context"
            return Step()
        if status not in (OK, COMPLETE):
            return self._fail(ERROR, f"expected SASL OK/COMPLETE, got {STATUS_NAMES.get(status, status)}")
        try:
            if self._stage == "context":
                return self._on_token(payload)
            if self._stage == "offered":
                return self._on_layer(payload)
            if self._stage == "context-done":
                # The client has read the last context token (mutual auth); now offer layers.
                self._stage = "offered"
                offer = struct.pack("!I", _LAYER_NONE << 24)
                return Step(reply=encode_negotiation(OK, self._ctx.wrap(offer, False).message))
        except self._gss_error as e:
            return self._fail(BAD, f"Kerberos authentication failed: {_describe(e)}")
        return self._fail(ERROR, f"unexpected SASL message in stage {self._stage}")

    def _on_token(self, token: bytes) -> Step:
        if not token:
            return self._fail(BAD, "Kerberos authentication failed: empty GSSAPI token")
        out = self._ctx.step(token)
        if not self._ctx.complete:
            return Step(reply=encode_negotiation(OK, out or b""))
        self.principal = str(self._ctx.initiator_name)
        self._stage = "context-done"
        return Step(reply=encode_negotiation(OK, out or b""))

    def _on_layer(self, wrapped: bytes) -> Step:
        plain = self._ctx.unwrap(wrapped).message
        if len(plain) < 4:
            return self._fail(BAD, "SASL GSSAPI: security-layer reply shorter than 4 bytes")
        layer = plain[0]
        if layer != _LAYER_NONE:
            return self._fail(BAD, f"SASL GSSAPI: client chose protection layer {layer}; this "
                                   f"server offers only QOP auth (use TLS for confidentiality)")
        authzid = plain[4:].decode("utf-8", "replace")
        try:
            user = short_name(self.principal, self._realm)
        except KerberosError as e:
            return self._fail(BAD, str(e))
        if authzid and authzid not in (self.principal, user):
            return self._fail(BAD, f"SASL GSSAPI: {self.principal} may not act as {safe(authzid)} "
                                   f"(use hive.server2.proxy.user)")
        self._stage = "done"
        return Step(reply=encode_negotiation(COMPLETE), user=user)

