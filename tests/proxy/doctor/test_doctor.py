"""proxy/doctor.py without Spark: version parsing, verdicts, and each failure's fix.
(Real probes against a Spark Thrift Server and a Hive metastore are in test_remote.py.)"""
from __future__ import annotations

import importlib.util
import os
import socket
import threading
from pathlib import Path

import pytest

from proxy import doctor
from proxy.doctor import FAIL, PASS, SKIP, WARN, Check, Target
from proxy.engine.spark import _StateLock
from tests.support.ports import free_port


def _target(tmp_path: Path, **kw) -> Target:
    base = dict(listen_host="127.0.0.1", listen_port=free_port(), state_dir=tmp_path / "state",
                upstream=None, upstream_auth="plain", upstream_user="doctor",
                upstream_password="doctor", metastore_uris=(), timeout=3.0)
    base.update(kw)
    return Target(**base)


@pytest.mark.parametrize("text, expected", [
    ('openjdk version "17.0.15" 2025-04-15', 17),
    ('openjdk version "21" 2023-09-19', 21),
    ('java version "1.8.0_392"', 8),
    ("garbage", None),
])
def test_parse_java_version(text, expected):
    assert doctor.parse_java_version(text) == expected


def test_report_verdicts_and_exit_codes():
    lines: list[str] = []
    assert doctor.report([Check("a", PASS, "ok")], lines.append) == 0
    assert lines[-1] == "verdict: READY - all checks passed"
    lines.clear()
    assert doctor.report([Check("a", PASS, "ok"), Check("b", WARN, "meh", "do x")],
                         lines.append) == 0
    assert lines[2].strip() == "fix: do x" and lines[-1] == "verdict: READY (1 warning(s): b)"
    lines.clear()
    assert doctor.report([Check("a", FAIL, "broken", "fix it")], lines.append) == 1
    assert lines[0] == "[FAIL] a  broken" and lines[1].strip() == "fix: fix it"
    assert lines[2] == "verdict: NOT READY - 1 check(s) failed: a"


def test_listen_port_in_use_fails_with_fix():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        check = doctor.check_listen("127.0.0.1", s.getsockname()[1])
    assert check.status == FAIL and "another --port" in check.fix


def test_state_dir_unusable_and_locked(tmp_path: Path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    [bad] = doctor.check_state_dir(blocker / "state")
    assert bad.status == FAIL and "--state-dir" in bad.fix
    state = tmp_path / "state"
    state.mkdir()
    lock = _StateLock(state / "engine.lock")
    lock.acquire()
    try:
        checks = doctor.check_state_dir(state)
    finally:
        lock.release()
    assert [c.status for c in checks][:2] == [PASS, WARN]
    assert "is using" in checks[1].detail


def test_upstream_refused_and_not_hiveserver2(tmp_path: Path):
    refused, zone, settings, shared = doctor.check_upstream(
        _target(tmp_path, upstream=("127.0.0.1", free_port())))
    assert refused.status == FAIL and "TCP connect failed" in refused.detail
    assert "--upstream HOST:PORT" in refused.fix
    # what could not be checked is said, with why
    assert (zone.name, zone.status) == ("time zone", SKIP)
    assert (settings.name, settings.status) == ("engine settings", SKIP)
    assert (shared.name, shared.status) == ("shared metastore", SKIP)
    assert zone.detail.startswith("not checked: the upstream does not accept connections")
    lines: list[str] = []
    assert doctor.report([refused, zone, settings, shared], lines.append) == 1
    assert lines[-1].endswith("; 3 not run: time zone, engine settings, shared metastore"), lines

    # Something listens but hangs up at once (not a HiveServer2).
    bad, *skipped = _check_against(tmp_path, lambda conn: None)
    assert bad.status == FAIL and "OpenSession failed" in bad.detail
    assert "--upstream-auth nosasl" in bad.fix
    assert [c.status for c in skipped] == [SKIP, SKIP, SKIP]


def test_beside_the_running_proxy_of_its_state_directory_it_is_ready(tmp_path: Path):
    """doctor with the deployment's own config while its proxy serves: the listen port is
    taken by that proxy (named by the health file it keeps in the state directory)."""
    from proxy.hs2.recovery import HEALTH_FILE, UpstreamHealth
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        t = _target(tmp_path, listen_port=port)
        taken = doctor.check_listen("127.0.0.1", port)
        assert taken.status == FAIL
        assert doctor.beside_serving_proxy([taken], t) == [taken]      # no proxy recorded
        t.state_dir.mkdir(parents=True)
        UpstreamHealth("sts:10000", t.state_dir / HEALTH_FILE,
                       listen=f"127.0.0.1:{port}").success()          # this process serves
        [ok] = doctor.beside_serving_proxy([taken], t)
        other = doctor.beside_serving_proxy([taken], _target(tmp_path, listen_port=port + 1))
    assert ok.status == PASS and f"serving proxy pid {os.getpid()}" in ok.detail
    assert other == [taken]                 # another address than the proxy's own
    lines: list[str] = []
    assert doctor.report([ok], lines.append) == 0 and lines[-1].startswith("verdict: READY")


def _check_against(tmp_path: Path, answer) -> list[Check]:
    """check_upstream against a listener that accepts the TCP check, then hands the probe's
    connection to `answer` and closes it."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def serve():
        srv.accept()[0].close()         # the TCP check
        conn, _ = srv.accept()          # the OpenSession probe
        with conn:
            answer(conn)
    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        return doctor.check_upstream(_target(tmp_path, upstream=srv.getsockname()))
    finally:
        t.join(5)
        srv.close()


def test_metastore_checks_in_remote_mode(tmp_path: Path):
    [missing] = doctor.check_metastores(_target(tmp_path))
    assert missing.status == WARN and "metastore_uris" in missing.fix
    bad_uri, refused = doctor.check_metastores(_target(
        tmp_path, metastore_uris=("http://h:1", f"thrift://127.0.0.1:{free_port()}")))
    assert bad_uri.status == FAIL and "thrift://HOST:9083" in bad_uri.fix
    assert refused.status == FAIL and "cannot reach" in refused.detail


def test_main_embedded_mode_passes_and_bad_flags_exit_2(tmp_path: Path, capsys):
    """Embedded mode needs pyspark: where it is installed every check passes; where it is
    not (the pure tier runs without it) that one check fails, naming the fix."""
    rc = doctor.main(["--state-dir", str(tmp_path / "s"), "--port", str(free_port())])
    out = capsys.readouterr().out
    assert "[PASS] java" in out and "embedded" in out, out
    if importlib.util.find_spec("pyspark") is not None:
        assert rc == 0 and out.rstrip().endswith("all checks passed"), out
    else:
        assert rc == 1 and "[FAIL] pyspark" in out and "pip install 'pyspark" in out, out
        assert out.rstrip().endswith("1 check(s) failed: pyspark"), out
    assert "[PASS] serving engine" in out and "started and answered a query" in out
    assert doctor.main(["--upstream", "no-port-here"]) == 2
    assert "expected HOST:PORT" in capsys.readouterr().err


def test_upstream_refusing_the_login_asks_for_credentials(tmp_path: Path):
    """A SASL server that says BAD to the PLAIN login: an authentication problem, told
    apart from a transport mismatch."""
    from proxy.thrift import sasl

    def refuse(conn):
        conn.recv(1 << 16)              # START PLAIN + the initial response
        conn.sendall(sasl.encode_negotiation(sasl.BAD, b"PLAIN authentication failed"))
        conn.recv(1)
    bad, *_ = _check_against(tmp_path, refuse)
    assert bad.status == FAIL and "PLAIN authentication failed" in bad.detail, bad
    assert "[upstream] user/password" in bad.fix


def test_serving_engine_is_started_as_serve_starts_it():
    """A failure to start for real (DuckDB refuses the setting); a missing numpy, the other
    real one: tests/proxy/serving/test_serving_engine_down.py."""
    ok = doctor.check_serving_engine(True, 1, "256MB")
    assert ok.status == PASS and "threads=1, memory_limit=256MB" in ok.detail
    off = doctor.check_serving_engine(enabled=False)
    assert off.status == PASS and "not checked" in off.detail
    bad = doctor.check_serving_engine(memory_limit="lots")
    assert bad.status == FAIL and "could not start: Memory must have a number" in bad.detail
    assert "[serving] threads and memory_limit" in bad.fix


def test_the_serving_mirror_directory_is_writable_and_within_its_budget(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    fresh = doctor.check_serving_mirror(state)
    assert fresh.status == PASS and "mode auto, 0 of 4294967296 bytes held" in fresh.detail
    seg = state / "serving-mirror" / "db.t_segments" / "0-abc"
    seg.mkdir(parents=True)
    (seg / "00000-part.parquet").write_bytes(b"x" * 1000)
    over = doctor.check_serving_mirror(state, max_bytes=500)
    assert over.status == WARN and "holds 1000 bytes, over [serving] mirror_max_bytes (500)" \
        in over.detail and "evicts" in over.fix
    disk = doctor.check_serving_mirror(state, max_bytes=1 << 62)
    assert disk.status == WARN and "less than the budget" in disk.detail
    assert doctor.check_serving_mirror(state, mode="off").status == PASS
    other = tmp_path / "other"
    other.mkdir()
    (other / "serving-mirror").write_text("not a directory")
    blocked = doctor.check_serving_mirror(other)
    assert blocked.status == FAIL and "serving-mirror is not a directory" in blocked.detail
