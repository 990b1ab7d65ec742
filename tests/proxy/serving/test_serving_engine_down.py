"""A serving engine that cannot start, made to fail for real: the proxy runs in a Python
environment where `import numpy` fails (tests/support/engine_down.py), so DuckDB 2.x
refuses LocalEngine's Python UDF as it does in a fresh venv without numpy. No Spark: the
tier over a real catalog and Parquet files (engine_down_probe.py, a subprocess), `doctor`,
and `serve` in front of a closed upstream port with its metrics and console ports.
EXPLAIN and AUDIT DATAMAP against Spark: tests/e2e/test_engine_down.py."""
from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import urllib.parse
import urllib.request
from http.cookiejar import CookieJar

import pytest

from proxy.serving.engine import start_failure
from tests.support.engine_down import no_numpy_env
from tests.support.lease_worker import wait_until
from tests.support.ports import free_port
from tests.support.proxy_proc import REPO_ROOT, start_proxy

NUMPY = "'numpy' is required for this operation, but it wasn't installed"


def _run(args: list[str], env: dict[str, str], timeout: float = 120):
    return subprocess.run([sys.executable, *args], cwd=REPO_ROOT, env={**os.environ, **env},
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_without_numpy_duckdb_refuses_a_python_udf(tmp_path):
    """What every test here relies on: the environment is one without numpy, and it
    reproduces the real cause. If DuckDB stops needing numpy for create_function, make the
    engine fail another way."""
    code = ("import importlib.util\nassert importlib.util.find_spec('numpy') is None\n"
            "import duckdb\nfrom duckdb import sqltypes as T\n"
            "duckdb.connect().create_function('f', lambda x: x, [T.BIGINT], T.BIGINT)\n")
    got = _run(["-c", code], no_numpy_env(tmp_path))
    assert got.returncode != 0 and NUMPY in got.stderr, got.stderr[-2000:]


def test_what_a_failed_start_says():
    missing = start_failure("import", ModuleNotFoundError("No module named 'duckdb'",
                                                          name="duckdb"))
    assert missing.cause == "duckdb is not importable (No module named 'duckdb')"
    assert "pip install duckdb" in missing.fix and missing.engine == "DuckDB"
    numpy = start_failure("register", ValueError(f"Invalid Input Error: {NUMPY}"), "2.0.1")
    assert (numpy.cause, numpy.engine) == (NUMPY, "DuckDB 2.0.1")
    assert numpy.fix.startswith("install numpy into the proxy's Python environment (")
    other = start_failure("check", RuntimeError("Binder Error: no such function"))
    assert other.cause == "no such function (while running its check query)"
    assert "DEBUG" in other.fix and "[serving] enabled = false" in other.fix


def test_the_tier_down_then_up_again(tmp_path):
    got = _run(["-m", "tests.support.engine_down_probe", str(tmp_path)],
               no_numpy_env(tmp_path))
    assert got.returncode == 0, got.stdout[-3000:] + got.stderr[-3000:]
    seen = json.loads(got.stdout.strip().splitlines()[-1])

    # a query planned before the start is answered by Spark, saying why
    assert seen["planned_before_start"] == "Serve"
    assert seen["answer_when_start_fails"] == f"spark (local engine unavailable: {NUMPY})"
    # one ERROR naming the cause and the fix, no traceback but at DEBUG
    errors = [r for r in seen["start_logs"] if r[0] == "ERROR"]
    assert len(errors) == 1, seen["start_logs"]
    assert errors[0][1].startswith("the serving engine (DuckDB 2.") and NUMPY in errors[0][1]
    assert "fix: install numpy into the proxy's Python environment" in errors[0][1]
    assert "datamap answers come from Spark until it starts" in errors[0][1]
    assert all(level == "DEBUG" for level, _, tb in seen["start_logs"] if tb)
    assert not any(level == "WARNING" for level, _, _ in seen["start_logs"])

    # while DOWN: decided for Spark at once, EXPLAIN claims no cache, the audit skips it
    assert seen["decision"] == "Rewrite"
    assert f"served=spark (local engine unavailable: {NUMPY})" in seen["decision_note"]
    assert seen["explain"] == [f"Served by: spark (local engine unavailable: {NUMPY})",
                               "Result cache: bypassed (not served locally)"]
    assert seen["explain_serving_off"][0] == \
        "Served by: spark (the session set datamap.serving.enabled=false)"
    state, cause, fix, engine = seen["status"]
    assert (state, cause) == ("down", NUMPY) and "pip install numpy" in fix
    assert seen["audit_served_plan"] == [None, "str"]
    assert seen["metric_down"] == 0
    # a retry that fails again is no new ERROR
    assert seen["retry_still_down"] == "down"
    assert [r[0] for r in seen["retry_logs"]] == ["DEBUG", "DEBUG"], seen["retry_logs"]

    # numpy installed meanwhile: the next retry starts it, and everything says so
    assert seen["after_install"] == "up"
    assert any(level == "INFO" and "started" in text and "in-process again" in text
               for level, text, _ in seen["install_logs"]), seen["install_logs"]
    assert seen["decision_after"] == "Serve" and seen["answer_after"] == "local cache=miss"
    assert seen["explain_after"] == ["Served by: local engine", "Result cache: hit"]
    assert seen["metric_up"] == 1


def test_doctor_fails_naming_cause_and_fix(tmp_path):
    args = ["-m", "proxy", "doctor", "--state-dir", str(tmp_path / "state"),
            "--port", str(free_port())]
    got = _run(args, no_numpy_env(tmp_path))
    assert got.returncode == 1, got.stdout + got.stderr
    lines = got.stdout.splitlines()
    i = next(i for i, line in enumerate(lines) if "serving engine" in line)
    assert re.match(r"\[FAIL\] serving engine +DuckDB 2\.\S+ could not start: ", lines[i])
    assert NUMPY in lines[i] and "every datamap query on Spark" in lines[i]
    assert lines[i + 1].strip().startswith("fix: install numpy into the proxy's Python "
                                           "environment (") and "pip install numpy" in lines[i + 1]
    # embedded mode also needs pyspark, which the pure tier may run without
    failed = (["pyspark"] if importlib.util.find_spec("pyspark") is None else []) + ["serving engine"]
    assert lines[-1] == f"verdict: NOT READY - {len(failed)} check(s) failed: {', '.join(failed)}"


def _scrape(port: int) -> float | None:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        text = r.read().decode()
    m = re.search(r"^datamap_proxy_serving_engine_up (\S+)$", text, re.M)
    return None if m is None else float(m.group(1))


def _console_note(port: int) -> str:
    """The datamap list's line on in-process serving, as text (signed in: auth none
    accepts any password)."""
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    base = f"http://127.0.0.1:{port}"
    form = urllib.parse.urlencode({"user": "ann", "password": "x"}).encode()
    with opener.open(base + "/login", data=form, timeout=30) as r:
        page = r.read().decode()
    m = re.search(r'<div class="note[^"]*">(In-process serving: .*?)</div>', page)
    assert m, page
    return re.sub(r"<[^>]+>", "", m.group(1)).replace("&#x27;", "'")


@pytest.mark.parametrize("numpy", [False, True], ids=["without-numpy", "with-numpy"])
def test_serve_log_metric_and_console(tmp_path, numpy):
    """`serve` (remote mode, upstream a closed port: nothing here opens a session)."""
    metrics, console = free_port(), free_port()
    env = {"DATAMAP_PROXY_METRICS_PORT": str(metrics),
           "DATAMAP_PROXY_CONSOLE_PORT": str(console)}
    if not numpy:
        env.update(no_numpy_env(tmp_path))
    proxy = start_proxy(tmp_path / "proxy", ("127.0.0.1", free_port()), env=env)
    try:
        want = 1.0 if numpy else 0.0
        log = proxy.log_path
        if not numpy:
            wait_until("the ERROR line", lambda: "ERROR" in log.read_text())
        assert wait_until("the engine's state", lambda: _scrape(metrics) == want or None)
        note = _console_note(console)
        text = log.read_text()
    finally:
        assert proxy.stop() == 0
    if numpy:
        assert "ERROR" not in text and "serving engine" not in text, text
        assert note.startswith("In-process serving: up DuckDB 2."), note
        return
    errors = [line for line in text.splitlines() if " ERROR " in line]
    assert len(errors) == 1, text
    assert re.search(r" ERROR proxy\.serving: the serving engine \(DuckDB 2\.\S+\) could not "
                     r"start: " + re.escape(NUMPY) + r"; fix: install numpy into the proxy's "
                     r"Python environment \(.*pip install numpy\), or reinstall "
                     r"datamap-proxy; datamap answers come from Spark until it starts "
                     r"\(tried again every 60 s\)$", errors[0]), errors[0]
    assert "Traceback" not in text and " WARNING " not in text, text
    assert note.startswith("In-process serving: down DuckDB 2."), note
    assert f"could not start: {NUMPY} (since " in note
    assert "Fix: install numpy into the proxy's Python environment" in note
    assert note.endswith("Datamap answers come from Spark until it starts (tried again "
                         "every 60 s).")


def test_the_documented_lines_are_the_ones_printed(monkeypatch):
    """docs/serving.md's ERROR line and docs/deployment.md's doctor lines, as the code
    writes them for a venv at /opt/venv without numpy."""
    from proxy import doctor
    from proxy.doctor.serving import _failed
    from proxy.serving.tier import start_error_line
    monkeypatch.setattr(sys, "executable", "/opt/venv/bin/python")
    e = start_failure("register", ValueError(f"Invalid Input Error: {NUMPY}"), "2.0.1")
    docs = REPO_ROOT / "docs"
    assert f"ERROR proxy.serving: {start_error_line(e)}\n" in (docs / "serving.md").read_text()
    lines: list[str] = []
    doctor.report([_failed(e)], lines.append)
    assert "\n".join(lines[:2]) + "\n" in (docs / "deployment.md").read_text(), lines
