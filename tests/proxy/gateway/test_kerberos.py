"""auth = kerberos against a real MIT KDC (tests/support/kdc.py): SASL GSSAPI on the binary
port through the proxy as a subprocess, the SPNEGO acceptor HTTP uses, start-up errors. No
Spark: the proxy points at a port nobody listens on, since nothing before OpenSession
touches the upstream (OpenSession then fails with 08S01, which proves the login is over
and the data phase works). Real clients against Spark: tests/proxy/clients/test_kerberos_clients.py.
"""
from __future__ import annotations

import socket
import struct
import sys

import gssapi
import pytest

from proxy.config import ServerSettings
from proxy.gateway.auth.kerberos import Acceptor, KerberosError, expand_host, short_name
from proxy.thrift import sasl
from tests.support.kdc import kerberos_env
from tests.support.ports import free_port
from tests.support.proxy_proc import ProxyStartError, start_proxy
from tests.support.waiting import wait_until

pytestmark = pytest.mark.timeout(120)
SPNEGO = gssapi.OID.from_int_seq("1.3.6.1.5.5.2")


def test_the_user_is_the_short_name_of_a_principal_of_the_service_realm():
    assert short_name("alice@DMP.TEST", "DMP.TEST") == "alice"
    assert short_name("alice/admin@DMP.TEST", "DMP.TEST") == "alice"
    with pytest.raises(KerberosError, match="alice@OTHER.TEST is not of realm DMP.TEST"):
        short_name("alice@OTHER.TEST", "DMP.TEST")


def test_host_in_a_principal_is_the_listen_name_or_this_machines_fqdn():
    assert expand_host("hive/_HOST@R", "GW.Example.com") == "hive/gw.example.com@R"
    assert expand_host("hive/_HOST@R", "0.0.0.0") == f"hive/{socket.getfqdn().lower()}@R"
    assert expand_host("hive/gw@R", "0.0.0.0") == "hive/gw@R"


def _settings(kdc, **kw) -> ServerSettings:
    base = dict(host="localhost", auth="kerberos", kerberos_keytab=str(kdc.keytab),
                kerberos_principal="hive/_HOST@DMP.TEST",
                kerberos_spnego_principal="HTTP/_HOST@DMP.TEST")
    return ServerSettings(**{**base, **kw})


def test_acceptor_refuses_a_missing_keytab_or_principal(kdc, tmp_path):
    with pytest.raises(KerberosError, match=f"cannot read Kerberos keytab {tmp_path}/none.keytab"):
        Acceptor(_settings(kdc, kerberos_keytab=str(tmp_path / "none.keytab")))
    with pytest.raises(KerberosError, match="principal hbase/localhost@DMP.TEST from keytab .*"
                                            "No key table entry found"):
        Acceptor(_settings(kdc, kerberos_principal="hbase/_HOST@DMP.TEST"))
    with pytest.raises(KerberosError, match="needs \\[server\\] kerberos_principal"):
        Acceptor(_settings(kdc, kerberos_principal=None))


def test_spnego_accepts_a_ticket_and_says_why_it_refuses_others(kdc):
    acceptor = Acceptor(_settings(kdc))
    assert acceptor.principal == "hive/localhost@DMP.TEST"
    client = gssapi.SecurityContext(usage="initiate", mech=SPNEGO, name=gssapi.Name(
        "HTTP@localhost", gssapi.NameType.hostbased_service))
    user, out = acceptor.spnego(client.step())
    assert user == "alice"
    client.step(out)                     # mutual authentication: the client checks the proxy
    assert client.complete
    # a ticket for another service (the binary port's) is not a login for HTTP
    wrong = gssapi.SecurityContext(usage="initiate", mech=SPNEGO, name=gssapi.Name(
        "hive@localhost", gssapi.NameType.hostbased_service))
    with pytest.raises(KerberosError, match="Cannot decrypt ticket for hive/localhost"):
        acceptor.spnego(wrong.step())
    with pytest.raises(KerberosError, match="SPNEGO.*not a Kerberos or SPNEGO token"):
        acceptor.spnego(b"not a token")
    with pytest.raises(KerberosError, match="SPNEGO.*NTLM is not supported"):
        acceptor.spnego(b"NTLMSSP\x00\x01")
    with pytest.raises(KerberosError, match=r"\(SPNEGO\) authentication failed: Invalid token"):
        acceptor.spnego(b"\x60\x03garbage")
    with pytest.raises(KerberosError, match="needs \\[server\\] kerberos_spnego_principal"):
        Acceptor(_settings(kdc, kerberos_spnego_principal=None)).spnego(b"x")


def test_a_stale_ticket_is_refused_naming_the_cause(kdc, tmp_path):
    cache = tmp_path / "short.ccache"
    kdc.kinit("alice", cache, lifetime="2s")
    client = gssapi.SecurityContext(
        usage="initiate", creds=gssapi.Credentials(usage="initiate", store={"ccache": f"FILE:{cache}"}),
        mech=gssapi.MechType.kerberos, name=gssapi.Name("hive@localhost", gssapi.NameType.hostbased_service))
    token = client.step()                # made while the ticket is valid, sent once it is not

    def refused():
        # a fresh acceptor each time (the replay cache is off): refused once the lifetime
        # and the realm's clock skew (2 s each) have passed
        server = Acceptor(_settings(kdc)).sasl()
        assert server.on_message(sasl.START, b"GSSAPI").error is None
        step = server.on_message(sasl.OK, token)
        return step if step.error is not None else None
    step = wait_until(refused, timeout=30, interval=0.25, what="the ticket to go stale")
    # MIT checks the ticket's end time and the authenticator's age (both stale here) in
    # either order
    assert step.error in ("Kerberos authentication failed: Ticket expired",
                          "Kerberos authentication failed: Clock skew too great")
    assert step.reply == sasl.encode_negotiation(sasl.BAD, step.error.encode())


def test_proxy_start_fails_naming_an_unreadable_keytab(kdc, tmp_path):
    env = {**kerberos_env(kdc), "DATAMAP_PROXY_SERVER_KERBEROS_KEYTAB": str(tmp_path / "gone.keytab")}
    with pytest.raises(ProxyStartError, match=f"(?s)exited with code 2.*cannot read Kerberos keytab "
                                              f"{tmp_path}/gone.keytab"):
        start_proxy(tmp_path / "p", ("127.0.0.1", free_port()), auth="kerberos", env=env,
                    timeout=30)


@pytest.fixture(scope="module")
def krb_proxy(kdc, tmp_path_factory):
    p = start_proxy(tmp_path_factory.mktemp("krb-proxy"), ("127.0.0.1", free_port()),
                    auth="kerberos", env=kerberos_env(kdc))
    yield p
    assert p.stop(check=True) == 0


class GssapiClient:
    """SASL GSSAPI (RFC 4752) written out on the proxy's codec, so a test can pick what a
    library client would not: the protection layer, the authorization id, the credentials."""

    def __init__(self, port: int, *, service: str = "hive@localhost", creds=None):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.ctx = gssapi.SecurityContext(
            usage="initiate", creds=creds, mech=gssapi.MechType.kerberos,
            name=gssapi.Name(service, gssapi.NameType.hostbased_service),
            flags=[gssapi.RequirementFlag.mutual_authentication])

    def _send(self, status: int, payload: bytes = b"") -> None:
        self.s.sendall(sasl.encode_negotiation(status, payload))

    def _recv(self) -> tuple[int, bytes]:
        buf = b""
        while (got := sasl.decode_negotiation(buf, 1 << 20)) is None:
            chunk = self.s.recv(65536)
            if not chunk:
                raise EOFError("proxy closed the connection")
            buf += chunk
        return got[0], got[1]

    def login(self, layer: int = 1, authzid: bytes = b"") -> tuple[int, bytes]:
        """The proxy's last negotiation message: (COMPLETE, b"") on success."""
        self._send(sasl.START, b"GSSAPI")
        self._send(sasl.OK, self.ctx.step())
        while True:
            status, payload = self._recv()
            if status != sasl.OK:
                return status, payload
            if not self.ctx.complete:
                self._send(sasl.OK, self.ctx.step(payload) or b"")
                continue
            offer = self.ctx.unwrap(payload).message
            assert offer[0] & 1, offer            # the proxy offers "no security layer"
            choice = struct.pack("!I", layer << 24) + authzid
            self._send(sasl.OK, self.ctx.wrap(choice, False).message)

    def close(self) -> None:
        self.s.close()


def _login(port: int, **kw) -> tuple[int, bytes]:
    c = GssapiClient(port, **{k: v for k, v in kw.items() if k in ("service", "creds")})
    try:
        return c.login(**{k: v for k, v in kw.items() if k in ("layer", "authzid")})
    finally:
        c.close()


def test_pyhive_logs_in_with_its_ticket_and_the_identity_is_the_short_name(krb_proxy):
    from pyhive import hive
    with pytest.raises(Exception, match="08S01|Cannot connect to Spark"):
        hive.connect(host="localhost", port=krb_proxy.port, auth="KERBEROS",
                     kerberos_service_name="hive")
    assert "Kerberos login as alice (principal alice@DMP.TEST)" in krb_proxy.log_path.read_text()


def test_each_client_is_the_user_of_its_own_ticket(kdc, krb_proxy, tmp_path):
    bob_cache = kdc.kinit("bob", tmp_path / "bob.ccache")
    bob = gssapi.Credentials(usage="initiate", store={"ccache": f"FILE:{bob_cache}"})
    assert _login(krb_proxy.port, creds=bob) == (sasl.COMPLETE, b"")
    assert _login(krb_proxy.port, authzid=b"alice@DMP.TEST") == (sasl.COMPLETE, b"")
    assert "Kerberos login as bob (principal bob@DMP.TEST)" in krb_proxy.log_path.read_text()


def test_refusals_name_the_cause(krb_proxy):
    status, why = _login(krb_proxy.port, layer=4)        # auth-conf
    assert status == sasl.BAD and b"offers only QOP auth" in why
    status, why = _login(krb_proxy.port, authzid=b"bob")
    assert status == sasl.BAD and b"alice@DMP.TEST may not act as bob" in why
    status, why = _login(krb_proxy.port, service="HTTP@localhost")   # the wrong service principal
    assert status == sasl.BAD
    assert b"Cannot decrypt ticket for HTTP/localhost@DMP.TEST using keytab key for hive/localhost" in why
    log = krb_proxy.log_path.read_text()
    assert "Kerberos login failed: SASL GSSAPI: client chose protection layer 4" in log


def test_a_big_token_is_read_and_a_broken_one_named(krb_proxy):
    """Tokens larger than PLAIN's max_negotiation_bytes (8 KiB) get to Kerberos: an Active
    Directory ticket with many groups is that big."""
    with socket.create_connection(("127.0.0.1", krb_proxy.port), timeout=30) as s:
        s.sendall(sasl.encode_negotiation(sasl.START, b"GSSAPI")
                  + sasl.encode_negotiation(sasl.OK, b"\x60" + bytes(20_000)))
        head = s.recv(5)
        status, n = struct.unpack("!BI", head)
        why = s.recv(n)
    assert status == sasl.BAD and why.startswith(b"Kerberos authentication failed: "), why
    assert krb_proxy.alive()


def test_clients_without_kerberos_get_a_clear_error(kdc, krb_proxy, monkeypatch, tmp_path):
    from pyhive import hive
    from thrift.transport.TTransport import TTransportException
    with pytest.raises(TTransportException, match="Unsupported mechanism type PLAIN: this server "
                                                  "requires Kerberos"):
        hive.connect(host="localhost", port=krb_proxy.port, auth="NONE", username="mallory")
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path}/empty.ccache")
    with pytest.raises(Exception, match="No Kerberos credentials available"):
        hive.connect(host="localhost", port=krb_proxy.port, auth="KERBEROS",
                     kerberos_service_name="hive")
    assert krb_proxy.alive()


def test_a_rotated_keytab_is_used_without_a_restart(kdc, tmp_path):
    """The keytab is read at each login: a new key written into it works at once, and a
    stale keytab names the key it lacks. Its own principal, so the shared one keeps its key."""
    keytab = tmp_path / "rotating.keytab"
    kdc.kadmin("addprinc -randkey hive/127.0.0.1@DMP.TEST")
    kdc.kadmin(f"ktadd -k {keytab} hive/127.0.0.1@DMP.TEST")
    env = {**kdc.env, "DATAMAP_PROXY_SERVER_KERBEROS_KEYTAB": str(keytab),
           "DATAMAP_PROXY_SERVER_KERBEROS_PRINCIPAL": "hive/127.0.0.1@DMP.TEST"}
    p = start_proxy(tmp_path / "p", ("127.0.0.1", free_port()), auth="kerberos", env=env)

    def login(name: str):
        # a fresh ticket cache each time, so the client asks the KDC for the current key
        cache = kdc.kinit("alice", tmp_path / name)
        creds = gssapi.Credentials(usage="initiate", store={"ccache": f"FILE:{cache}"})
        return _login(p.port, service="hive@127.0.0.1", creds=creds)
    try:
        assert login("c1") == (sasl.COMPLETE, b"")
        kdc.kadmin("cpw -randkey hive/127.0.0.1@DMP.TEST")          # rotated in the KDC only
        status, why = login("c2")
        assert status == sasl.BAD
        assert b"Cannot find key for hive/127.0.0.1@DMP.TEST kvno 3 in keytab" in why
        kdc.kadmin(f"ktadd -k {keytab} hive/127.0.0.1@DMP.TEST")    # and in the keytab
        assert login("c3") == (sasl.COMPLETE, b"")
    finally:
        assert p.stop(check=True) == 0


def test_without_python_gssapi_auth_kerberos_names_the_extra_to_install(monkeypatch):
    """python-gssapi is the optional `kerberos` extra, imported only when auth = kerberos
    starts: without it the proxy refuses with what to install, not an ImportError."""
    monkeypatch.setitem(sys.modules, "gssapi", None)     # `import gssapi` raises ImportError
    with pytest.raises(KerberosError, match=r"pip install 'datamap-proxy\[kerberos\]'"):
        Acceptor(ServerSettings(auth="kerberos"))
