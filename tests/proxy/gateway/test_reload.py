"""proxy/gateway/reload.py: SIGHUP re-reads the same sources, applies the reloadable settings to the
live objects, refuses a bad file, and names what needs a restart (no sockets)."""
import logging

from proxy import config as cfg
from proxy.gateway.reload import RELOADABLE, Reloader, apply_to_server, changes
from proxy.gateway.server import ProxyServer
from proxy.hs2.frontend import Frontend
from proxy.observability.audit_log import AuditLog
from proxy.observability.observe import Observers
from proxy.routing.router import Router


def _reloader(path, text, env=None, **kw):
    path.write_text(text)
    settings = cfg.load(path, env=env or {})
    return settings, Reloader(settings, str(path), None, env=lambda: env or {}, **kw)


def test_reload_applies_reloadable_keys_and_keeps_the_rest(tmp_path, caplog):
    f = tmp_path / "proxy.toml"
    settings, r = _reloader(f, "[server]\nport = 10001\nlimit_connections_per_user = 5\n")
    seen = []
    r.register(seen.append)
    f.write_text("[server]\nport = 10002\nlimit_connections_per_user = 1\nquery_timeout = 30\n"
                 "[upstream]\nmax_sessions = 7\npassword = 'hunter2'\n")
    with caplog.at_level(logging.INFO, logger="proxy.reload"):
        assert r.reload()
    live = seen[-1]
    assert live is r.live
    assert live.server.limit_connections_per_user == 1 and live.server.query_timeout == 30
    assert live.upstream.max_sessions == 7
    assert live.server.port == 10001 and live.upstream.password is None   # need a restart
    text = caplog.text
    assert "[server] port changed to 10002 but needs a restart; still 10001" in text
    assert "[upstream] password changed to (secret)" in text and "hunter2" not in text
    assert "[server] limit_connections_per_user = 1" in text


def test_a_changed_catalog_url_is_not_logged_with_its_password(tmp_path, caplog):
    f = tmp_path / "proxy.toml"
    _settings, r = _reloader(f, "[state]\ncatalog = 'postgresql://dmp:old-pw@db1/catalog'\n")
    f.write_text("[state]\ncatalog = 'postgresql://dmp:new-pw@db2/catalog'\n")
    with caplog.at_level(logging.INFO, logger="proxy.reload"):
        assert r.reload()
    assert "[state] catalog changed to (secret) but needs a restart" in caplog.text
    assert "old-pw" not in caplog.text and "new-pw" not in caplog.text


def test_a_bad_file_keeps_the_old_settings_and_says_why(tmp_path, caplog):
    f = tmp_path / "proxy.toml"
    settings, r = _reloader(f, "[server]\nmax_running_operations = 4\n")
    called = []
    r.register(called.append)
    for bad in ("[server\nmax_running_operations = 1\n",
                "[server]\nmax_running_operations = 'many'\n",
                "[server]\nno_such_key = 1\n",
                "[server]\nmax_running_operations = 1 # caf\xe9\n".encode("latin-1")):
        f.write_bytes(bad if isinstance(bad, bytes) else bad.encode())
        with caplog.at_level(logging.ERROR, logger="proxy.reload"):
            assert not r.reload()
        assert "settings not reloaded, the old ones stay" in caplog.text
        caplog.clear()
    assert r.live is settings and not called


def test_environment_is_read_again_and_a_failing_callback_does_not_stop_others(tmp_path, caplog):
    env = {"DATAMAP_PROXY_SERVER_MAX_RUNNING_OPERATIONS": "3"}
    f = tmp_path / "proxy.toml"
    settings, r = _reloader(f, "", env=env)
    assert settings.server.max_running_operations == 3

    def broken(_s):
        raise RuntimeError("boom")
    got = []
    r.register(broken)
    r.register(got.append)
    env["DATAMAP_PROXY_SERVER_MAX_RUNNING_OPERATIONS"] = "9"
    with caplog.at_level(logging.ERROR, logger="proxy.reload"):
        assert r.reload()
    assert got[-1].server.max_running_operations == 9
    assert "applying the settings with" in caplog.text


def test_embedded_engine_address_filled_in_at_start_is_not_a_change(tmp_path, caplog):
    f = tmp_path / "proxy.toml"
    f.write_text("")
    loaded = cfg.load(f, env={})
    live = cfg.Settings(upstream=cfg.UpstreamSettings(host="127.0.0.1", port=40000))
    r = Reloader(live, str(f), None, env=lambda: {}, loaded=loaded)
    with caplog.at_level(logging.WARNING, logger="proxy.reload"):
        assert r.reload()
    assert "needs a restart" not in caplog.text
    assert r.live.upstream.host == "127.0.0.1" and r.live.upstream.port == 40000


def test_apply_to_server_reaches_every_live_object():
    server = ProxyServer(cfg.Settings(), Router())
    assert not server.service.session_manager.impersonation.allows("svc", "bob")
    new = cfg.Settings(
        server=cfg.ServerSettings(
            limit_connections_per_user=1, limit_connections_per_ipaddress=2,
            limit_connections_per_user_ipaddress=3, max_running_operations=4,
            operation_queue_size=5, operation_queue_timeout=6.0, query_timeout=7.0,
            max_connections=8, max_connections_per_address=9, max_login_failures=10,
            max_login_failures_per_address=11, login_failure_window=12.0,
            idle_session_timeout=13.0, idle_operation_timeout=14.0,
            idle_connection_timeout=15.0, impersonation=("svc:*",)),
        upstream=cfg.UpstreamSettings(max_sessions=16, max_sessions_per_user=17,
                                      session_queue_size=18, session_queue_timeout=19.0),
        datamaps=cfg.DatamapsSettings(audit_sample_rate=0.5))    # the Auditor's own callback
    assert {k for _s, k in changes(cfg.Settings(), new)} == set().union(*RELOADABLE.values())
    apply_to_server(server)(new)
    svc, sessions = server.service, server.service.session_manager
    assert server.settings is new and svc.settings is new
    assert (server.limits.total_limit, server.limits.per_address_limit) == (8, 9)
    assert (server.throttle.users.limit, server.throttle.addresses.limit,
            server.throttle.users.window) == (10, 11, 12.0)
    assert (sessions.session_limits.per_user, sessions.session_limits.per_address,
            sessions.session_limits.per_user_address) == (1, 2, 3)
    assert (svc.run_gate.limit, svc.run_gate.queue_size, svc.run_gate.queue_timeout) == (4, 5, 6.0)
    assert (sessions.slots.total, sessions.slots.per_user, sessions.slots.queue_size,
            sessions.slots.queue_timeout) == (16, 17, 18, 19.0)
    assert sessions.impersonation.allows("svc", "bob")     # the live policy of OpenSession
    server._auth_pool.shutdown()


def test_sighup_reopens_the_audit_log_after_logrotate_moved_it(tmp_path):
    audit = tmp_path / "audit.jsonl"
    settings = cfg.Settings(server=cfg.ServerSettings(audit_log=str(audit)))
    audit_log = AuditLog(str(audit))
    server = ProxyServer(settings, Router(),
                         Frontend(settings, Router(), observers=Observers(audit_log)))
    try:
        audit_log.write("statement", user="before")
        audit.rename(tmp_path / "audit.jsonl.1")            # logrotate, then kill -HUP
        apply_to_server(server)(settings)
        audit_log.write("statement", user="after")
        assert '"user":"before"' in (tmp_path / "audit.jsonl.1").read_text()
        assert '"user":"after"' in audit.read_text()
        assert audit.stat().st_mode & 0o777 == 0o600
    finally:
        audit_log.close()
        server._auth_pool.shutdown()
