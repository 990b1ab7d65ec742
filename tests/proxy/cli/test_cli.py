import io

import pytest

from proxy import cli
from proxy.cli import serve, sync
from proxy.cli.main import build_parser
from proxy.gateway.auth.plain import UsersFile


def test_serve_flags_map_to_sections():
    a = build_parser().parse_args([
        "serve", "--host", "0.0.0.0", "--port", "0", "--upstream", "sparkhost:10001",
        "--upstream-auth", "nosasl", "--auth", "nosasl", "--users-file", "u", "--state-dir", "s",
        "--tls-cert", "c", "--tls-key", "k"])
    f = serve._flags(a)
    assert f["server"]["host"] == "0.0.0.0" and f["server"]["port"] == 0
    assert f["upstream"]["host"] == "sparkhost" and f["upstream"]["port"] == 10001
    assert f["upstream"]["auth"] == "nosasl" and f["server"]["auth"] == "nosasl"
    assert f["state"]["dir"] == "s" and f["server"]["tls_key"] == "k"


def test_datamaps_flags():
    a = build_parser().parse_args(["serve", "--sync-interval", "30", "--auto-compaction",
                                       "true"])
    assert serve._flags(a)["datamaps"] == {"sync_interval_s": 30.0, "auto_compaction": "true"}
    assert serve._flags(build_parser().parse_args(["serve"]))["datamaps"] == {
        "sync_interval_s": None, "auto_compaction": None}


def test_bad_upstream_flag():
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--upstream", "nohostport"])


def test_bad_env_exits_2(monkeypatch, capsys):
    monkeypatch.setenv("DATAMAP_PROXY_SERVER_PORT", "notaport")
    assert cli.main(["serve", "--upstream", "h:1"]) == 2


def test_bad_zookeeper_quorum_exits_2_before_serving(tmp_path, caplog):
    assert cli.main(["serve", "--upstream", "h:1", "--state-dir", str(tmp_path),
                     "--zookeeper", "zk1:notaport"]) == 2
    assert "[discovery] zookeeper" in caplog.text and "notaport" in caplog.text


def test_users_add_from_stdin(tmp_path, monkeypatch):
    f = tmp_path / "users"
    monkeypatch.setattr("sys.stdin", io.StringIO("pw1\n"))
    assert cli.main(["users", "add", "carol", "--users-file", str(f)]) == 0
    assert UsersFile(f).check("carol", "pw1") is None
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert cli.main(["users", "add", "carol", "--users-file", str(f)]) == 1


def test_sync_without_a_proxy_is_a_clean_error(capsys):
    import socket
    with socket.socket() as s:          # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert cli.main(["sync", "--port", str(port), "--table", "db.t"]) == 2
    err = capsys.readouterr().err
    assert f"no datamap-proxy answers at 127.0.0.1:{port}" in err
    assert "datamap-proxy serve" in err and "Traceback" not in err


def test_sync_flags_and_defaults_from_config(tmp_path, capsys):
    a = build_parser().parse_args(["sync", "--table", "db.a", "--table", "b", "--auth",
                                       "nosasl", "--user", "u", "--password", "p"])
    assert a.table == ["db.a", "b"] and a.auth == "nosasl" and a.port is None
    conf = tmp_path / "p.toml"
    conf.write_text("[server]\nhost = '0.0.0.0'\nport = 1\n")
    assert cli.main(["sync", "--config", str(conf)]) == 2     # 0.0.0.0 -> 127.0.0.1:1
    assert "127.0.0.1:1:" in capsys.readouterr().err
    conf.write_text("[server]\nport = 'x'\n")
    assert cli.main(["sync", "--config", str(conf)]) == 2
    assert "port" in capsys.readouterr().err
    assert sync._quote_table("Db.t`x") == "`Db`.`t``x`"


def test_sync_output_helpers():
    assert sync._has_failed('{"db.a": "refreshed", "db.b": "failed: disk full"}')
    assert not sync._has_failed('{"db.failed": "unchanged"}') and not sync._has_failed("NA")
    text = sync._format_rows(["Table", "New Segment"], [("db.t", "1"), ("db.long_name", "")])
    assert text.splitlines() == ["Table" + " " * 9 + "New Segment", "db.t" + " " * 10 + "1",
                                 "db.long_name"]
    assert "no base tables" in sync._format_rows(["Table"], [])


def test_pre_login_limit_flags():
    a = build_parser().parse_args([
        "serve", "--login-timeout", "5", "--idle-connection-timeout", "60", "--max-connections",
        "10", "--max-connections-per-address", "3", "--max-login-failures", "0"])
    f = serve._flags(a)["server"]
    assert (f["login_timeout"], f["idle_connection_timeout"]) == (5.0, 60.0)
    assert (f["max_connections"], f["max_connections_per_address"], f["max_login_failures"]) == (10, 3, 0)


def test_upstream_limit_flags():
    a = build_parser().parse_args(["serve", "--upstream-max-reply-bytes", "2097152",
                                       "--upstream-max-sessions", "8",
                                       "--upstream-max-sessions-per-user", "2"])
    up = serve._flags(a)["upstream"]
    assert (up["max_reply_bytes"], up["max_sessions"], up["max_sessions_per_user"]) == (2097152, 8, 2)


def _pid_running(marker: str) -> int:
    """The pid of the `proxy serve` whose command line names `marker` (its own workdir)."""
    import os
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if b"serve" in argv and any(marker.encode() in a for a in argv):
            return int(entry)
    raise LookupError(marker)


def test_a_sighup_while_starting_does_not_kill_the_proxy(tmp_path):
    # auth = ldap checks the directory while starting: a directory that accepts and never
    # answers holds the start-up in a known place, where the SIGHUP arrives
    import os
    import signal
    import socket
    import threading

    from tests.support.proxy_proc import start_proxy
    from tests.support.ports import free_port

    silent = socket.create_server(("127.0.0.1", 0))
    held = []

    def directory():
        conn, _ = silent.accept()
        held.append(conn)
        os.kill(_pid_running(str(tmp_path / "p")), signal.SIGHUP)
    t = threading.Thread(target=directory, daemon=True)
    t.start()
    env = {"DATAMAP_PROXY_SERVER_LDAP_URL": f"ldap://127.0.0.1:{silent.getsockname()[1]}",
           "DATAMAP_PROXY_SERVER_LDAP_USER_DN_PATTERN": "uid=%s,dc=test",
           "DATAMAP_PROXY_SERVER_LDAP_TIMEOUT": "2"}
    try:
        proxy = start_proxy(tmp_path / "p", ("127.0.0.1", free_port()), auth="ldap", env=env,
                            timeout=60)
        t.join(10)
        assert held, "the proxy never asked the directory"
        assert proxy.stop() == 0
        assert "SIGHUP received while starting: reloading the settings now" in \
            proxy.log_path.read_text()
    finally:
        silent.close()
        for conn in held:
            conn.close()
