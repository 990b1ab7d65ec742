"""auth = ldap end to end: beeline and PyHive log in through the proxy (binary SASL PLAIN,
and HTTP Basic on the HTTP transport) against a real slapd, in front of the session's shared Spark Thrift Server; who Spark
thinks the user is (`current_user()`) with and without impersonation and with a service
user towards Spark; the audit log those sessions leave."""
from __future__ import annotations

import json

import pytest

from tests.support import slapd as sd
from tests.support.clients import _pyhive_error, jdbc_url, run_beeline
from tests.support.jdbc import run_jdbc
from tests.support.proxy_proc import start_proxy

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

SECRET = "hunter2"


@pytest.fixture(scope="module")
def ldap_proxy(directory, sts, tmp_path_factory):
    work = tmp_path_factory.mktemp("ldap-proxy")
    conf = work / "proxy.toml"
    conf.write_text(f'[server]\nauth = "ldap"\nldap_url = "{directory.url}"\n'
                    f'ldap_user_dn_pattern = "uid=%s,{sd.PEOPLE}"\n'
                    f'impersonation = ["alice:bob"]\naudit_log = "{work / "audit.jsonl"}"\n')
    p = start_proxy(work, (sts.host, sts.port), extra_args=["--config", str(conf)], http=True)
    yield p
    assert p.stop(check=True) == 0


def _pyhive(p, user: str, password: str, sql: str, configuration=None):
    from pyhive import exc, hive
    conn = hive.connect(host=p.host, port=p.port, auth="LDAP", username=user,
                        password=password, configuration=configuration)
    try:
        cur = conn.cursor()
        try:
            cur.execute(sql)
            return cur.fetchall()
        except exc.OperationalError as e:
            raise _pyhive_error(e) from e
    finally:
        conn.close()


def _audit(p) -> list[dict]:
    return [json.loads(ln) for ln in (p.workdir / "audit.jsonl").read_text().splitlines()]


def test_beeline_logs_in_through_ldap(ldap_proxy, tmp_path):
    run = run_beeline(jdbc_url(ldap_proxy.host, ldap_proxy.port), [
        "SELECT current_user() AS u", f"SET my.password={SECRET}", "SELECT 40 + 2 AS answer"],
        user="alice", password="alice-pw", workdir=tmp_path)
    assert run.errors == [], run.stderr[-2000:]
    assert run.results[0].rows == [("alice",)]
    assert run.results[2].rows == [("42",)]
    bad = run_beeline(jdbc_url(ldap_proxy.host, ldap_proxy.port), ["SELECT 1"],
                      user="alice", password="wrong", workdir=tmp_path)
    assert bad.results == [] and len(bad.errors) == 1       # beeline --force exits 0
    assert "Peer indicated failure: LDAP authentication failed for user alice" in bad.errors[0][1]
    # Hive JDBC puts ;hive.server2.proxy.user=... in the OpenSession configuration
    as_bob = run_beeline(jdbc_url(ldap_proxy.host, ldap_proxy.port,
                                  params="hive.server2.proxy.user=bob"),
                         ["SELECT current_user() AS u"], user="alice", password="alice-pw",
                         workdir=tmp_path)
    assert as_bob.errors == [] and as_bob.results[0].rows == [("bob",)], as_bob.stderr[-2000:]
    statements = [e for e in _audit(ldap_proxy)
                  if e["event"] == "statement" and e["user"] == "alice"]
    assert {e["decision"] for e in statements} >= {"forwarded"}
    set_line = [e for e in statements if "my.password" in e["statement"]]
    assert set_line and set_line[0]["statement"] == "SET my.password=***"
    assert all(e["client"].startswith("127.0.0.1:") and e["outcome"] == "ok" for e in statements)
    assert SECRET not in ldap_proxy.log_path.read_text()
    assert SECRET not in (ldap_proxy.workdir / "audit.jsonl").read_text()


def test_pyhive_identity_and_impersonation(ldap_proxy):
    assert _pyhive(ldap_proxy, "bob", "bob-pw", "SELECT current_user()") == [("bob",)]
    with pytest.raises(Exception, match="LDAP authentication failed for user bob"):
        _pyhive(ldap_proxy, "bob", "alice-pw", "SELECT 1")
    # alice may act as bob: Spark runs the statement as bob
    assert _pyhive(ldap_proxy, "alice", "alice-pw", "SELECT current_user()",
                   {"hive.server2.proxy.user": "bob"}) == [("bob",)]
    with pytest.raises(Exception, match="User bob is not allowed to impersonate alice"):
        _pyhive(ldap_proxy, "bob", "bob-pw", "SELECT 1", {"hive.server2.proxy.user": "alice"})
    events = _audit(ldap_proxy)
    opened = [e for e in events if e["event"] == "session_open" and e.get("real_user") == "alice"]
    assert opened and opened[0]["user"] == "bob"
    refused = [e for e in events if e["event"] == "session_refused"]
    assert [(e["user"], e["sqlstate"]) for e in refused] == [("bob", "28000")]
    closes = [e for e in events if e["event"] == "session_close"]
    assert closes and all("duration_ms" in e for e in closes)


def test_service_user_towards_spark_passes_the_end_user(directory, sts, tmp_path):
    """[upstream] user: the proxy logs in to Spark as its service account and names the
    end user in hive.server2.proxy.user, which the Spark Thrift Server honours."""
    conf = tmp_path / "proxy.toml"
    conf.write_text(f'[server]\nauth = "ldap"\nldap_url = "{directory.url}"\n'
                    f'ldap_user_dn_pattern = "uid=%s,{sd.PEOPLE}"\n'
                    f'[upstream]\nuser = "datamap-svc"\npassword = "{SECRET}"\n')
    p = start_proxy(tmp_path, (sts.host, sts.port), extra_args=["--config", str(conf)])
    try:
        assert _pyhive(p, "carol", "carol-pw", "SELECT current_user()") == [("carol",)]
    finally:
        assert p.stop(check=True) == 0
    assert SECRET not in p.log_path.read_text()


def test_impyla_identity_is_the_ldap_user_not_the_opensession_username(ldap_proxy):
    """impyla logs in as alice but sends OpenSession(username=<login name of this process>):
    the session is alice's all the same (hs2-protocol-notes, identity confusion)."""
    from impala.dbapi import connect
    binary = dict(port=ldap_proxy.port)
    http = dict(port=ldap_proxy.http_port, use_http_transport=True, http_path="cliservice")
    for how, user in ((binary, "alice"), (http, "bob")):    # HTTP: Basic against the directory
        conn = connect(host=ldap_proxy.host, auth_mechanism="LDAP", user=user,
                       password=f"{user}-pw", timeout=60, **how)
        try:
            cur = conn.cursor(user="mallory")
            cur.execute("SELECT current_user()")
            assert cur.fetchall() == [(user,)]
            cur.close()
        finally:
            conn.close()


def test_http_basic_logs_in_through_ldap(ldap_proxy, tmp_path):
    """The HTTP transport checks Basic credentials with the same LDAP authenticator."""
    from pyhive import hive
    conn = hive.connect(host=ldap_proxy.host, port=ldap_proxy.http_port, scheme="http",
                        username="bob", password="bob-pw")
    try:
        cur = conn.cursor()
        cur.execute("SELECT current_user() AS u")
        assert cur.fetchall() == [("bob",)]
    finally:
        conn.close()
    url = (f"jdbc:hive2://{ldap_proxy.host}:{ldap_proxy.http_port}/default;"
           "transportMode=http;httpPath=cliservice")
    run = run_beeline(url, ["SELECT current_user() AS u"], user="alice", password="alice-pw",
                      workdir=tmp_path)
    assert run.errors == [] and run.results[0].rows == [("alice",)], run.stderr[-2000:]
    bad = run_beeline(url, ["SELECT 1"], user="alice", password="wrong", workdir=tmp_path)
    assert bad.results == [] and "HTTP Response code: 401" in bad.errors[0][1]
    # Hive JDBC as DBeaver loads it (JayDeBeApi), binary and HTTP
    binary = f"jdbc:hive2://{ldap_proxy.host}:{ldap_proxy.port}/default"
    got = run_jdbc([(binary, "bob", "bob-pw", "SELECT current_user()"),
                    (url, "alice", "alice-pw", "SELECT current_user()"),
                    (binary, "bob", "wrong", "SELECT 1")])
    assert got[:2] == [{"rows": [["bob"]]}, {"rows": [["alice"]]}], got
    assert "LDAP authentication failed for user bob" in got[2]["error"]
