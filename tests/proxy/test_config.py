import pytest

from proxy.config import ConfigError, load


def test_defaults():
    s = load(env={})
    assert (s.server.host, s.server.port, s.server.auth) == ("127.0.0.1", 10000, "none")
    assert s.server.max_frame_bytes == 104857600 and s.state.dir == "./.datamap-proxy"
    assert s.upstream.auth == "plain" and s.upstream.max_protocol == 10


def test_precedence_file_env_flags(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('[server]\nport = 1111\nhost = "0.0.0.0"\nauth = "nosasl"\n'
                 '[spark]\nconf = { "spark.x" = "1" }\n[upstream]\nhost = "h"\n')
    s = load(f, env={})
    assert (s.server.port, s.server.host, s.server.auth) == (1111, "0.0.0.0", "nosasl")
    assert s.spark.conf == {"spark.x": "1"} and s.upstream.host == "h"
    s = load(f, env={"DATAMAP_PROXY_SERVER_PORT": "2222", "DATAMAP_PROXY_UPSTREAM_CALL_TIMEOUT": "5"})
    assert s.server.port == 2222 and s.server.host == "0.0.0.0" and s.upstream.call_timeout == 5.0
    s = load(f, env={"DATAMAP_PROXY_SERVER_PORT": "2222"},
             flags={"server": {"port": 3333, "host": None}})
    assert s.server.port == 3333 and s.server.host == "0.0.0.0"


@pytest.mark.parametrize("env,msg", [
    ({"DATAMAP_PROXY_SERVER_PORT": "abc"}, "DATAMAP_PROXY_SERVER_PORT"),
    ({"DATAMAP_PROXY_SERVER_AUTH": "oauth"}, "must be one of"),
    ({"DATAMAP_PROXY_SERVER_NOPE": "1"}, "unknown setting [server] nope"),
    ({"DATAMAP_PROXY_SPARK_UI": "maybe"}, "[spark] ui"),
])
def test_bad_values_name_source_and_key(env, msg):
    with pytest.raises(ConfigError) as ei:
        load(env=env)
    assert msg in str(ei.value)


def test_bad_file(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("[server\n")
    with pytest.raises(ConfigError, match="invalid TOML"):
        load(f, env={})
    with pytest.raises(ConfigError, match="cannot read"):
        load(tmp_path / "missing.toml", env={})
    f.write_text("[bogus]\nx=1\n")
    with pytest.raises(ConfigError, match=r"unknown section \[bogus\]"):
        load(f, env={})


def test_frozen():
    s = load(env={})
    with pytest.raises(Exception):
        s.server.port = 1


def test_pre_login_limits_defaults_and_env():
    s = load(env={}).server
    assert (s.max_negotiation_bytes, s.login_timeout, s.idle_connection_timeout) == (8192, 20.0, 300.0)
    assert (s.max_connections, s.max_connections_per_address) == (1000, 100)
    assert (s.max_login_failures, s.max_login_failures_per_address, s.login_failure_window) == (5, 20, 300.0)
    s = load(env={"DATAMAP_PROXY_SERVER_MAX_CONNECTIONS_PER_ADDRESS": "7"}).server
    assert s.max_connections_per_address == 7


def test_upstream_limits_defaults_env_and_floor():
    up = load(env={}).upstream
    assert up.max_reply_bytes == 1 << 30 and up.max_sessions == 400
    assert up.max_sessions_per_user == 0 and up.session_queue_size == 100
    s = load(env={"DATAMAP_PROXY_UPSTREAM_MAX_REPLY_BYTES": str(2 << 20),
                  "DATAMAP_PROXY_UPSTREAM_SESSION_QUEUE_TIMEOUT": "2.5"})
    assert s.upstream.max_reply_bytes == 2 << 20 and s.upstream.session_queue_timeout == 2.5
    with pytest.raises(ConfigError, match=r"max_reply_bytes must be at least 1048576"):
        load(env={"DATAMAP_PROXY_UPSTREAM_MAX_REPLY_BYTES": "4096"})


def test_metastore_uris_is_a_tuple_from_toml_list_or_comma_string(tmp_path):
    from proxy.config import load
    f = tmp_path / "c.toml"
    f.write_text('[spark]\nmetastore_uris = ["thrift://a:9083", " thrift://b:9083 "]\n')
    assert load(f, env={}).spark.metastore_uris == ("thrift://a:9083", "thrift://b:9083")
    env = {"DATAMAP_PROXY_SPARK_METASTORE_URIS": "thrift://a:9083, ,thrift://b:9083"}
    assert load(env=env).spark.metastore_uris == ("thrift://a:9083", "thrift://b:9083")
    assert load(env={}).spark.metastore_uris == ()
