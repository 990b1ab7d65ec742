"""Impersonation rules, the audit log and redaction: pure logic first, then the proxy as a
subprocess without Spark (a refused impersonation never reaches the upstream; a port
nobody listens on stands in for it). The allowed path, against a real Spark Thrift Server,
is in tests/proxy/clients/test_ldap_clients.py."""
from __future__ import annotations

import asyncio
import json
import logging
import os
import stat

import pytest

from proxy import config
from proxy.config import UpstreamSettings, parse_rules
from proxy.doctor import report
from proxy.doctor.checks import FAIL, Check
from proxy.errors import ClientError, to_status
from proxy.hs2.identity import ImpersonationPolicy, ImpersonationRefused
from proxy.hs2.session import Session
from proxy.logsafe import MASK, RedactingFilter, redact, redact_conf, secret_key
from proxy.observability.audit_log import AuditLog, AuditLogError, decision_of
from proxy.observability.observe import SessionDetail, StatementEvent
from proxy.upstream.client import UpstreamSession
from tests.support.ports import free_port
from tests.support.proxy_proc import start_proxy

# --------------------------------------------------------------------------- identity


def test_rules_say_who_may_act_as_whom():
    p = ImpersonationPolicy(["superset:*", "hue:alice, bob", "hue:carol"])
    assert p.allows("superset", "anyone") and p.allows("hue", "carol")
    assert not p.allows("hue", "dave") and not p.allows("alice", "bob")
    assert p.allows("dave", "dave")             # being oneself needs no rule
    ident = p.resolve("hue", {"hive.server2.proxy.user": "bob", "use:database": "x"})
    assert (ident.user, ident.real_user, ident.configuration) == ("bob", "hue",
                                                                  {"use:database": "x"})
    assert p.resolve("hue", {"hive.server2.proxy.user": " "}).real_user is None
    assert p.resolve("bob", None).user == "bob"
    with pytest.raises(ImpersonationRefused) as e:
        p.resolve("alice", {"hive.server2.proxy.user": "bob"})
    status = to_status(e.value)
    assert status.sqlState == "28000"
    assert status.errorMessage.startswith("User alice is not allowed to impersonate bob")


def test_update_swaps_rules_and_a_bad_rule_changes_nothing():
    p = ImpersonationPolicy(["hue:alice"])
    p.update(["hue:bob"])
    assert p.allows("hue", "bob") and not p.allows("hue", "alice")
    with pytest.raises(ValueError, match="'nocolon'"):
        p.update(["hue:alice", "nocolon"])
    assert p.allows("hue", "bob") and not p.allows("hue", "alice")


@pytest.mark.parametrize("rule", ["hue", "hue:", ":bob", "*:bob", "hue: , "])
def test_malformed_rules_are_refused(rule):
    with pytest.raises(ValueError):
        parse_rules([rule])


def test_rules_are_checked_when_settings_load():
    s = config.load(env={"DATAMAP_PROXY_SERVER_IMPERSONATION": "superset:*;hue:a,b"})
    assert s.server.impersonation == ("superset:*", "hue:a,b")
    with pytest.raises(config.ConfigError, match="DATAMAP_PROXY_SERVER_IMPERSONATION.*'hue'"):
        config.load(env={"DATAMAP_PROXY_SERVER_IMPERSONATION": "hue"})


# --------------------------------------------------------------------------- redaction

SECRET = "hunter2"


@pytest.mark.parametrize("text", [
    f"SET spark.hadoop.fs.s3a.secret.key={SECRET}",
    f"set my.password = '{SECRET}'",
    f"SET hivevar:api_token=\"{SECRET}\"",
    f"jdbc:hive2://h:10000/db;user=u;password={SECRET};ssl=true",
    f"jdbc:postgresql://h/db?user=u&password={SECRET}&sslmode=require",
    f"postgresql://bob:{SECRET}@db:5432/catalog",
    f"CREATE TABLE t USING jdbc OPTIONS (url 'jdbc:mysql://h/d', user 'u', password '{SECRET}')",
    f"ALTER TABLE t SET TBLPROPERTIES ('fs.azure.account.key.credential'='{SECRET}')",
    f'{{"ldap_bind_password": "{SECRET}"}}',
    f"ldap_bind_password='{SECRET}' ldap_url='ldap://h'",
    f"SET spark.hadoop.fs.s3a.access.key={SECRET}",
    f"SET x.password='{SECRET}",                     # cut short, quote left open
])
def test_secrets_are_masked(text):
    out = redact(text)
    assert SECRET not in out and MASK in out, out


@pytest.mark.parametrize("text", ["SET spark.sql.shuffle.partitions=4",
                                  "SELECT a, b FROM sales WHERE region = 'EU'",
                                  "jdbc:hive2://h:10000/default;ssl=true",
                                  "unknown column secret_token: expected int"])
def test_other_text_is_left_alone(text):
    assert redact(text) == text


def test_configuration_keys_and_long_inputs():
    assert secret_key("set:hiveconf:fs.s3a.secret.key") and not secret_key("use:database")
    assert redact_conf({"set:hiveconf:javax.jdo.option.ConnectionPassword": SECRET,
                        "use:database": "d"}) == {
        "set:hiveconf:javax.jdo.option.ConnectionPassword": MASK, "use:database": "d"}
    long = "a." * 200_000 + f" password={SECRET}"   # linear: no backtracking blow-up
    assert redact(long).endswith(f"password={MASK}")


def test_a_settings_dump_holds_no_password():
    s = config.load(env={"DATAMAP_PROXY_SERVER_LDAP_BIND_PASSWORD": SECRET,
                         "DATAMAP_PROXY_UPSTREAM_PASSWORD": SECRET})
    assert s.server.ldap_bind_password == SECRET and SECRET not in repr(s)


def test_a_connections_repr_holds_no_password():
    # one per HTTP request, and under auth = ldap the password is a directory password
    from proxy.hs2.connection import ClientConnection
    conn = ClientConnection(peer="10.0.0.7:5123", sasl_user="alice", sasl_password=SECRET)
    assert conn.sasl_password == SECRET and SECRET not in repr(conn)


def test_log_lines_errors_and_doctor_output_are_redacted(caplog):
    logger = logging.getLogger("proxy.test.redaction")
    handler_filter = RedactingFilter()
    record = logger.makeRecord(logger.name, logging.WARNING, __file__, 1,
                               "connecting to %s failed", (f"postgresql://u:{SECRET}@h/db",),
                               None)
    handler_filter.filter(record)
    assert SECRET not in record.getMessage() and "postgresql://u:***@h/db" in record.getMessage()
    status = to_status(ClientError(f"bad value in SET db.password={SECRET}", "42000"))
    assert SECRET not in status.errorMessage
    lines: list[str] = []
    report([Check("catalog", FAIL, f"cannot reach postgresql://u:{SECRET}@h/db", "fix it")],
           lines.append)
    assert lines and not [ln for ln in lines if SECRET in ln]


# --------------------------------------------------------------------------- audit log


def _session(**kw) -> Session:
    s = Session(user="bob", protocol=5, client_protocol=5, peer="10.0.0.7:5123", **kw)
    s.handle = type("H", (), {"guid": b"\x01" * 16})()
    return s


def _statement(s: Session, operation, label, state, sqlstate, duration_s, sql) -> StatementEvent:
    """The statement event the operation manager hands the audit log (an observer)."""
    return StatementEvent(at=0.0, session_id=s.id, user=s.user, client="", statement=sql,
                          current_db="default", decision="forwarded", duration_s=duration_s,
                          outcome=state, sqlstate=sqlstate, note=label, real_user=s.real_user,
                          peer=s.peer, operation=operation)


def test_audit_lines_are_json_in_a_private_file(tmp_path):
    path = tmp_path / "audit.jsonl"
    audit = AuditLog(str(path))
    s = _session(real_user="superset", configuration={"set:hiveconf:fs.s3a.secret.key": SECRET,
                                                      "use:database": "sales"})
    audit.session("open", s.user, "", SessionDetail(
        peer=s.peer, session_id=s.id, real_user=s.real_user, configuration=s.configuration,
        duration_s=0.0123))
    audit.statement(_statement(s, "ab12", "rewrite:mv:sales.agg_by_day served=local",
                               "FINISHED", None, 0.004, f"SET x.password={SECRET}; SELECT 1"))
    audit.statement(_statement(s, None, "pass", "ERROR", "42P01", 0.5, "SELECT * FROM nope"))
    audit.statement(_statement(s, "cd34", "reject", "ERROR", "0A000", 0.0, "x" * 5000))
    audit.session("refused", "eve", "", SessionDetail(
        peer="10.0.0.8:1", sqlstate="28000", reason="User eve is not allowed to impersonate bob"))
    audit.close()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    lines = [json.loads(ln) for ln in path.read_text().splitlines()]
    assert [ln["event"] for ln in lines] == ["session_open", "statement", "statement",
                                             "statement", "session_refused"]
    first, served, failed, refused, eve = lines
    assert first["user"] == "bob" and first["real_user"] == "superset"
    assert first["client"] == "10.0.0.7:5123" and first["duration_ms"] == 12.3
    assert first["configuration"] == {"set:hiveconf:fs.s3a.secret.key": MASK,
                                      "use:database": "sales"}
    assert served["decision"] == "served in-process"
    assert served["datamaps"] == ["sales.agg_by_day"] and served["outcome"] == "ok"
    assert SECRET not in served["statement"] and "sqlstate" not in served
    assert (failed["decision"], failed["outcome"], failed["sqlstate"]) == ("forwarded", "error",
                                                                          "42P01")
    assert refused["decision"] == "refused" and refused["statement"].endswith("(+1000 chars)")
    assert eve["sqlstate"] == "28000"
    assert SECRET not in path.read_text()


@pytest.mark.parametrize("label, expected", [
    ("pass", ("forwarded", [])), ("pass:stale:db.m", ("forwarded", [])),
    ("rewrite:mv:a,mv:db.b", ("rewritten", ["a", "db.b"])), ("rewrite:timeseries", ("rewritten", [])),
    ("local:set", ("local", [])), ("reject", ("refused", [])),
])
def test_decisions(label, expected):
    assert decision_of(label) == expected


def test_audit_goes_to_the_logger_without_a_file(caplog):
    caplog.set_level(logging.INFO, "proxy.audit")
    AuditLog(None).statement(_statement(_session(), None, "local", "FINISHED", None, 0.0,
                                        "SHOW DATAMAP"))
    assert json.loads(caplog.records[-1].getMessage())["decision"] == "local"
    with pytest.raises(AuditLogError, match="cannot open \\[server\\] audit_log /nonexistent/"):
        AuditLog("/nonexistent/dir/audit.jsonl")


# --------------------------------------------------------------------------- the proxy


async def _open(port: int, user: str, conf: dict):
    up = UpstreamSession(UpstreamSettings(host="127.0.0.1", port=port, connect_timeout=10))
    try:
        return await up.open(user, "x", 5, conf)
    finally:
        await up.close()


def test_proxy_refuses_impersonation_without_a_rule(tmp_path):
    audit = tmp_path / "audit.jsonl"
    conf = tmp_path / "proxy.toml"
    conf.write_text(f'[server]\nimpersonation = ["hue:alice"]\naudit_log = "{audit}"\n')
    p = start_proxy(tmp_path / "proxy", ("127.0.0.1", free_port()),
                    extra_args=["--config", str(conf)])
    try:
        resp = asyncio.run(_open(p.port, "eve", {"hive.server2.proxy.user": "alice",
                                                 "set:hiveconf:my.secret": SECRET}))
        assert resp.status.sqlState == "28000"
        assert resp.status.errorMessage.startswith("User eve is not allowed to impersonate alice")
        # hue may; the upstream is down, so the session fails later, with 08S01
        resp = asyncio.run(_open(p.port, "hue", {"hive.server2.proxy.user": "alice"}))
        assert resp.status.sqlState == "08S01"
    finally:
        assert p.stop(check=True) == 0
    events = [json.loads(ln) for ln in audit.read_text().splitlines()]
    assert [(e["event"], e["user"], e.get("real_user"), e["sqlstate"]) for e in events] == [
        ("session_refused", "eve", None, "28000"), ("session_refused", "alice", "hue", "08S01")]
    assert SECRET not in p.log_path.read_text()


def test_unwritable_audit_log_stops_the_start(tmp_path):
    with pytest.raises(Exception, match="cannot open \\[server\\] audit_log"):
        start_proxy(tmp_path / "proxy", ("127.0.0.1", free_port()),
                    extra_args=["--config", str(_toml(tmp_path, 'audit_log = "/nonexistent/a"'))],
                    timeout=20)


def _toml(tmp_path, line: str):
    path = tmp_path / "bad.toml"
    path.write_text(f"[server]\n{line}\n")
    return path


def test_calls_without_a_status_field_mask_secrets_in_their_exception_text():
    """GetQueryId / UploadData / DownloadData answer errors as TApplicationException text,
    which is masked like every other error."""
    from proxy.config import Settings
    from proxy.routing.router import Router
    from proxy.hs2.frontend import Frontend
    reply = Frontend(Settings(), Router())._error_reply(
        "GetQueryId", 7, RuntimeError("failed: SET spark.hadoop.fs.s3a.secret.key=hunter2"), None)
    assert b"hunter2" not in reply and b"failed" in reply
