"""Real clients log in with Kerberos (SASL GSSAPI) through a proxy with auth = kerberos in
front of the session's Spark Thrift Server: the identity Spark sees is the short name of
the client's principal, whatever user name the client also sends; over HTTP the same
ticket logs in by SPNEGO (`Authorization: Negotiate`) for the HTTP/ service principal.
Realm: the session KDC (tests/proxy/conftest.py `kdc`); alice's ticket is the default cache.
"""
from __future__ import annotations

import pytest

from tests.support.clients import impyla_execute, run_beeline
from tests.support.kdc import kerberos_env
from tests.support.proxy_proc import start_proxy

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]
WHO = "SELECT current_user()"


@pytest.fixture(scope="module")
def krb_proxy(kdc, sts, tmp_path_factory):
    p = start_proxy(tmp_path_factory.mktemp("krb-sts-proxy"), (sts.host, sts.port),
                    auth="kerberos", env=kerberos_env(kdc), http=True)
    yield p
    assert p.stop(check=True) == 0


def test_pyhive_kerberos(krb_proxy):
    # PyHive's username is ignored: the ticket says who the client is
    from pyhive import hive
    conn = hive.connect(host="localhost", port=krb_proxy.port, auth="KERBEROS", username="mallory",
                        kerberos_service_name="hive")
    try:
        cur = conn.cursor()
        cur.execute(WHO)
        assert cur.fetchall() == [("alice",)]
    finally:
        conn.close()


def test_impyla_gssapi_with_another_users_ticket(kdc, krb_proxy, monkeypatch, tmp_path):
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{kdc.kinit('bob', tmp_path / 'bob.ccache')}")
    from impala import dbapi
    conn = dbapi.connect(host="localhost", port=krb_proxy.port, auth_mechanism="GSSAPI",
                         kerberos_service_name="hive", timeout=60)
    cur = conn.cursor()
    try:
        assert impyla_execute(cur, WHO).rows == [("bob",)]
    finally:
        # closed here, not by impyla's __del__ at some later garbage collection: run inside
        # pytest's assertion rewriting, that one broke CPython 3.11's AST recursion counter
        # (SystemError at the end of the session)
        cur.close()
        conn.close()


def test_beeline_with_principal(kdc, krb_proxy, tmp_path):
    env = {**kdc.env, "JAVA_TOOL_OPTIONS": kdc.java_opts()}
    url = f"jdbc:hive2://localhost:{krb_proxy.port}/default;principal=hive/localhost@DMP.TEST"
    run = run_beeline(url, [WHO], user="", password="", workdir=tmp_path, env=env)
    assert run.errors == [], run.stderr[-2000:]
    assert run.results[0].rows == [("alice",)]
    # Hive JDBC sends service/host of `principal` and drops its realm: the instance matters
    wrong = url.replace("hive/localhost", "HTTP/localhost")
    run = run_beeline(wrong, [WHO], user="", password="", workdir=tmp_path, env=env)
    assert run.results == [] and len(run.errors) == 1, run.stderr[-2000:]
    assert "Cannot decrypt ticket for HTTP/localhost@DMP.TEST using keytab key for hive/" \
        in run.errors[0][1]
    # the proxy offers QOP auth only: the JVM's SASL refuses to go on
    run = run_beeline(url + ";saslQop=auth-conf", [WHO], user="", password="", workdir=tmp_path,
                      env=env)
    assert run.results == [] and len(run.errors) == 1, run.stderr[-2000:]
    assert "No common protection layer between client and server" in run.errors[0][1]
    assert "Kerberos login failed: client aborted SASL GSSAPI (BAD): No common protection " \
        "layer" in krb_proxy.log_path.read_text()
    no_ticket = {**env, "KRB5CCNAME": f"FILE:{tmp_path}/empty.ccache"}
    run = run_beeline(url, [WHO], user="", password="", workdir=tmp_path, env=no_ticket)
    assert run.results == [] and len(run.errors) == 1, run.stderr[-2000:]
    assert "GSS initiate failed" in run.errors[0][1]


def test_beeline_over_http_logs_in_by_spnego(kdc, krb_proxy, tmp_path):
    env = {**kdc.env, "JAVA_TOOL_OPTIONS": kdc.java_opts()}
    url = (f"jdbc:hive2://localhost:{krb_proxy.http_port}/default;transportMode=http;"
           "httpPath=cliservice;principal=HTTP/localhost@DMP.TEST")
    run = run_beeline(url, [WHO, "SELECT 1 + 1"], user="", password="", workdir=tmp_path,
                      env=env)
    assert run.errors == [], run.stderr[-2000:]
    assert [r.rows for r in run.results] == [[("alice",)], [("2",)]]
    # a ticket for the binary port's service is not one for HTTP/: refused, named
    wrong = url.replace("HTTP/localhost", "hive/localhost")
    run = run_beeline(wrong, [WHO], user="", password="", workdir=tmp_path, env=env)
    assert run.results == [] and len(run.errors) == 1, run.stderr[-2000:]
    assert "401" in run.errors[0][1]


def test_pyhive_over_http_with_a_spnego_header_from_gssapi(kdc, krb_proxy):
    """PyHive's http scheme sends whatever Authorization header it is given: a SPNEGO token
    made with python-gssapi from bob's ticket, as a Kerberos-aware HTTP client would."""
    import base64

    import gssapi
    from pyhive import hive
    from thrift.transport import THttpClient

    ccache = kdc.kinit("bob", kdc.workdir / "bob-http.ccache")
    bob = gssapi.Credentials(name=gssapi.Name("bob@DMP.TEST", gssapi.NameType.user),
                             usage="initiate", store={"ccache": f"FILE:{ccache}"})
    ctx = gssapi.SecurityContext(
        name=gssapi.Name("HTTP@localhost", gssapi.NameType.hostbased_service), creds=bob,
        usage="initiate", mech=gssapi.OID.from_int_seq("1.3.6.1.5.5.2"))
    token = base64.b64encode(ctx.step()).decode()
    transport = THttpClient.THttpClient(f"http://localhost:{krb_proxy.http_port}/cliservice")
    transport.setCustomHeaders({"Authorization": f"Negotiate {token}"})
    conn = hive.connect(thrift_transport=transport)
    try:
        cur = conn.cursor()
        cur.execute(WHO)
        # thrift's THttpClient keeps no cookies: each request carries the same token (the
        # test realm keeps no replay cache)
        assert cur.fetchall() == [("bob",)]
    finally:
        conn.close()


def test_impyla_over_http_with_gssapi(kdc, krb_proxy, monkeypatch, tmp_path):
    """impyla's http transport makes the SPNEGO header itself (kerberos package) and keeps
    the hive.server2.auth cookie for the requests after the first."""
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{kdc.kinit('bob', tmp_path / 'bob.ccache')}")
    from impala import dbapi
    conn = dbapi.connect(host="localhost", port=krb_proxy.http_port, auth_mechanism="GSSAPI",
                         kerberos_service_name="HTTP", use_http_transport=True,
                         http_path="cliservice", timeout=60)
    cur = conn.cursor()
    try:
        assert impyla_execute(cur, WHO).rows == [("bob",)]
        assert impyla_execute(cur, "SELECT 1 + 1").rows == [(2,)]
    finally:
        cur.close()        # not left to __del__ (see test_impyla_gssapi_with_another_users_ticket)
        conn.close()
