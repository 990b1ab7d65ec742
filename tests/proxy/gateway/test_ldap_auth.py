"""`auth = ldap` against a real OpenLDAP slapd (tests/support/slapd.py) on loopback ports:
the authenticator itself, then the proxy as a subprocess (SASL PLAIN, no Spark needed:
nothing before OpenSession touches the upstream)."""
from __future__ import annotations

import dataclasses
import json
import logging
import re
import socket
from pathlib import Path

import pytest

from proxy import config
from proxy.config import ServerSettings
from proxy.gateway.auth import build_authenticator
from proxy.gateway.auth.base import AllowAll, AuthError, AuthUnavailable
from proxy.gateway.auth.plain import DenyAll, UsersFile, add_user
from proxy.thrift import sasl
from tests.support import slapd as sd
from tests.support.ports import free_port
from tests.support.proxy_proc import ProxyStartError, start_proxy
from tests.support.wire import sasl_login

pytestmark = [pytest.mark.timeout(120)]

GENERIC = "LDAP authentication failed for user {}"


def settings(d: sd.Slapd, **kw) -> ServerSettings:
    base = dict(auth="ldap", ldap_url=d.url, ldap_timeout=5.0,
                ldap_user_dn_pattern=f"uid=%s,{sd.PEOPLE}")
    base.update(kw)
    return ServerSettings(**base)


def search_settings(d: sd.Slapd, **kw) -> ServerSettings:
    return settings(d, ldap_user_dn_pattern=None, ldap_base_dn=sd.SUFFIX,
                    ldap_bind_dn=sd.READER_DN, ldap_bind_password=sd.READER_PW, **kw)


def test_user_dn_pattern_right_wrong_unknown_and_empty(directory, caplog):
    a = build_authenticator(settings(directory, ldap_user_dn_pattern=(
        f"uid=%s,ou=nowhere,{sd.SUFFIX}:uid=%s,{sd.PEOPLE}")))   # the second pattern finds her
    caplog.set_level(logging.INFO, "proxy.ldap")
    assert a.check("alice", "alice-pw") is None
    assert a.check("alice", "wrong") == GENERIC.format("alice")
    assert a.check("zed", "zed-pw") == GENERIC.format("zed")
    # LDAP would take a DN with no password as an anonymous bind, and succeed
    assert a.check("alice", "") == GENERIC.format("alice")
    assert "empty password" in caplog.text
    assert "invalidCredentials" in caplog.text
    assert "alice-pw" not in caplog.text and "wrong" not in caplog.text


def test_search_under_base_dn_with_groups(directory, caplog):
    a = build_authenticator(search_settings(directory, ldap_group_filter="analysts, ops",
                                            ldap_group_base_dn=sd.GROUPS))
    caplog.set_level(logging.INFO, "proxy.ldap")
    assert a.check("alice", "alice-pw") is None
    assert a.check("bob", "bob-pw") is None
    assert a.check("carol", "carol-pw") == GENERIC.format("carol")     # in admins only
    assert a.check("dave", "dave-pw") == GENERIC.format("dave")        # in no group
    assert a.check("nobody", "x") == GENERIC.format("nobody")
    assert "is in none of the groups analysts, ops" in caplog.text
    assert "no entries match (uid=nobody)" in caplog.text
    assert sd.READER_PW not in caplog.text


@pytest.mark.parametrize("user", ["*", "alice)(uid=*", "*)(|(uid=*", "alice\\2a", "al*"])
def test_filter_injection_matches_nothing(directory, user):
    a = build_authenticator(search_settings(directory))
    assert a.check(user, "alice-pw") == GENERIC.format(user)


@pytest.mark.parametrize("user", ["alice,ou=people", f"alice,{sd.PEOPLE}", "x+uid=alice",
                                  "alice\x00"])
def test_dn_injection_binds_nobody(directory, user):
    a = build_authenticator(settings(directory))
    assert a.check(user, "alice-pw") == GENERIC.format(user)


def test_ldaps_and_starttls_check_the_certificate(directory, tmp_path):
    ca = str(directory.ca_file)
    assert build_authenticator(settings(directory, ldap_url=directory.ldaps_url,
                                        ldap_ca_file=ca)).check("bob", "bob-pw") is None
    starttls = build_authenticator(settings(directory, ldap_starttls=True, ldap_ca_file=ca))
    assert starttls.check("bob", "bob-pw") is None
    other = tmp_path / "other-ca.pem"             # a CA that did not sign the server's cert
    sd._self_signed(tmp_path)
    (tmp_path / "cert.pem").rename(other)
    untrusted = build_authenticator(settings(directory, ldap_url=directory.ldaps_url,
                                             ldap_ca_file=str(other)))
    with pytest.raises(AuthUnavailable, match="certificate verify failed|CERTIFICATE"):
        untrusted.check("bob", "bob-pw")


def test_urls_are_tried_in_order_and_a_dead_directory_is_unavailable(directory):
    dead = f"ldap://127.0.0.1:{free_port()}"
    a = build_authenticator(settings(directory, ldap_url=f"{dead} {directory.url}"))
    assert a.check("alice", "alice-pw") is None
    assert a._answered == directory.url       # the next login asks it first
    assert a.check("bob", "wrong") == GENERIC.format("bob")
    alone = build_authenticator(settings(directory, ldap_url=dead))
    with pytest.raises(AuthUnavailable, match=f"LDAP directory unavailable \\({dead}"):
        alone.check("alice", "alice-pw")


@pytest.mark.parametrize("change, message", [
    (dict(ldap_url=None), "needs \\[server\\] ldap_url"),
    (dict(ldap_url="http://x"), "is not ldap://"),
    (dict(ldap_user_dn_pattern="uid=alice"), "must contain %s once"),
    (dict(ldap_user_dn_pattern=None), "ldap_user_dn_pattern or ldap_base_dn"),
    (dict(ldap_bind_dn="cn=x"), "go together"),
    (dict(ldap_group_filter="g"), "needs ldap_group_base_dn"),
    (dict(ldap_starttls=True, ldap_url="ldaps://h"), "ldaps:// is TLS already"),
    (dict(ldap_ca_file="/nonexistent.pem"), "not readable"),
    (dict(users_file="/tmp/users"), "exclude each other"),
])
def test_bad_configuration_fails_at_start(directory, change, message):
    with pytest.raises(AuthError, match=message):
        build_authenticator(settings(directory, **change))


def test_wrong_service_password_fails_at_start_without_echoing_it(directory):
    s = dataclasses.replace(search_settings(directory), ldap_bind_password="s3cr3t-guess")
    with pytest.raises(AuthError, match="service bind failed") as e:
        build_authenticator(s)
    assert "s3cr3t-guess" not in str(e.value)


def test_proxy_logs_in_through_ldap_and_a_down_directory_locks_nobody_out(directory, tmp_path):
    conf = tmp_path / "proxy.toml"
    conf.write_text(f'[server]\nauth = "ldap"\nldap_url = "{directory.url}"\n'
                    f'ldap_base_dn = "{sd.SUFFIX}"\nldap_bind_dn = "{sd.READER_DN}"\n'
                    f'ldap_bind_password = "{sd.READER_PW}"\nldap_group_filter = "analysts"\n'
                    f'ldap_timeout = 3\nmax_login_failures = 2\n')
    p = start_proxy(tmp_path / "proxy", ("127.0.0.1", free_port()),
                    extra_args=["--config", str(conf)])
    try:
        assert sasl_login(p.host, p.port, "alice", "alice-pw")[0] == sasl.COMPLETE
        status, msg = sasl_login(p.host, p.port, "carol", "carol-pw")
        assert (status, msg) == (sasl.BAD, GENERIC.format("carol").encode())
        directory.stop()
        try:
            for _ in range(4):      # more than max_login_failures: none of them counts
                status, msg = sasl_login(p.host, p.port, "bob", "bob-pw")
                assert status == sasl.BAD
                assert msg.startswith(b"08S01: authentication service unavailable: "
                                      b"LDAP directory unavailable"), msg
                # not logged in yet: the directory's address is for the log only
                assert directory.url.split("//")[1].encode() not in msg, msg
        finally:
            directory.start()
        assert sasl_login(p.host, p.port, "bob", "bob-pw")[0] == sasl.COMPLETE
    finally:
        assert p.stop(check=True) == 0
    log = p.log_path.read_text()
    assert "cannot check the password of bob: LDAP directory unavailable" in log
    assert "too many failed logins for bob" not in log
    assert sd.READER_PW not in log and "bob-pw" not in log
    with socket.socket() as s:      # the port is closed: the proxy is gone
        assert s.connect_ex((p.host, p.port)) != 0


def _doc_blocks(kind: str) -> list[str]:
    text = (Path(__file__).resolve().parents[3] / "docs" / "security.md").read_text()
    return re.findall(rf"```{kind}\n(.*?)```", text, re.S)


def test_the_examples_of_docs_security_md(directory, tmp_path):
    ldap_example, rules_example = _doc_blocks("toml")
    conf = tmp_path / "example.toml"
    conf.write_text(ldap_example.replace("ldap://127.0.0.1:3890", directory.url))
    a = build_authenticator(config.load(conf, env={}))
    assert a.check("alice", "alice-pw") is None                        # in analysts: in
    assert a.check("carol", "carol-pw") == GENERIC.format("carol")     # admins only: out
    conf.write_text(rules_example)
    rules = config.load(conf, env={}).server.impersonation
    env = re.search(r'DATAMAP_PROXY_SERVER_IMPERSONATION="([^"]+)"', rules_example).group(1)
    assert config.load(env={"DATAMAP_PROXY_SERVER_IMPERSONATION": env}).server.impersonation \
        == rules == ("superset:*", "hue:alice,bob")
    line = json.loads(_doc_blocks("json")[0])
    assert line["event"] == "statement" and line["real_user"] == "alice"


def test_serve_stops_at_start_on_a_bad_ldap_setting(tmp_path):
    conf = tmp_path / "bad.toml"
    conf.write_text('[server]\nauth = "ldap"\nldap_url = "ldap://127.0.0.1:1"\n')
    with pytest.raises(ProxyStartError, match="exited with code 2(.|\n)*ldap_user_dn_pattern "
                                              "or ldap_base_dn"):
        start_proxy(tmp_path / "proxy", ("127.0.0.1", free_port()),
                    extra_args=["--config", str(conf)], timeout=30)


def test_the_plain_checker_follows_the_auth_setting(tmp_path):
    assert isinstance(build_authenticator(ServerSettings()), AllowAll)
    kerberos = build_authenticator(ServerSettings(auth="kerberos"))
    assert isinstance(kerberos, DenyAll) and "Kerberos" in kerberos.check("a", "b")
    users = tmp_path / "users"
    add_user(users, "alice", "wonder")
    assert isinstance(build_authenticator(ServerSettings(users_file=str(users))), UsersFile)
