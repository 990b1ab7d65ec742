import io

import pytest

from proxy import cli
from proxy.auth import UsersFile


def test_serve_flags_map_to_sections():
    a = cli.build_parser().parse_args([
        "serve", "--host", "0.0.0.0", "--port", "0", "--upstream", "sparkhost:10001",
        "--upstream-auth", "nosasl", "--auth", "nosasl", "--users-file", "u", "--state-dir", "s",
        "--tls-cert", "c", "--tls-key", "k"])
    f = cli._flags(a)
    assert f["server"]["host"] == "0.0.0.0" and f["server"]["port"] == 0
    assert f["upstream"]["host"] == "sparkhost" and f["upstream"]["port"] == 10001
    assert f["upstream"]["auth"] == "nosasl" and f["server"]["auth"] == "nosasl"
    assert f["state"]["dir"] == "s" and f["server"]["tls_key"] == "k"


def test_bad_upstream_flag():
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["serve", "--upstream", "nohostport"])


def test_bad_env_exits_2(monkeypatch, capsys):
    monkeypatch.setenv("DATAMAP_PROXY_SERVER_PORT", "notaport")
    assert cli.main(["serve", "--upstream", "h:1"]) == 2


def test_users_add_from_stdin(tmp_path, monkeypatch):
    f = tmp_path / "users"
    monkeypatch.setattr("sys.stdin", io.StringIO("pw1\n"))
    assert cli.main(["users", "add", "carol", "--users-file", str(f)]) == 0
    assert UsersFile(f).check("carol", "pw1") is None
    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))
    assert cli.main(["users", "add", "carol", "--users-file", str(f)]) == 1
