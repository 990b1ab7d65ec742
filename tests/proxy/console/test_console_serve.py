"""`serve` with a console, as a subprocess (remote mode, no Spark: no datamap needs it):
the console answers next to the Thrift port and stops with it; a non-loopback console
host stops start-up with exit 2 naming [console] allow_remote."""
from __future__ import annotations

import http.client
import os
import subprocess
import sys
from pathlib import Path

from tests.support.proxy_proc import free_port, start_proxy


def test_console_serves_and_stops_with_the_proxy(tmp_path):
    port = free_port()
    p = start_proxy(tmp_path / "p", ("127.0.0.1", free_port()), auth="nosasl",
                    env={"DATAMAP_PROXY_CONSOLE_PORT": str(port)})
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/")
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 303 and resp.getheader("Location") == "/datamaps"
        conn.request("GET", "/datamaps", headers={"Cookie": resp.getheader("Set-Cookie").split(";")[0]})
        resp = conn.getresponse()
        page = resp.read().decode()
        assert resp.status == 200 and "no datamaps yet" in page and "query log is off" not in page
        conn.close()
    finally:
        assert p.stop(check=True) == 0
    log = p.log_path.read_text()
    assert f"web console on http://127.0.0.1:{port}/" in log


def test_a_remote_console_needs_allow_remote(tmp_path):
    env = {**os.environ, "DATAMAP_PROXY_CONSOLE_PORT": str(free_port()),
           "DATAMAP_PROXY_CONSOLE_HOST": "0.0.0.0", "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    r = subprocess.run([sys.executable, "-m", "proxy", "serve", "--port", str(free_port()),
                        "--upstream", f"127.0.0.1:{free_port()}",
                        "--state-dir", str(tmp_path / "state")],
                       env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 2, r.stderr[-2000:]
    assert "[console] allow_remote" in r.stderr and "0.0.0.0" in r.stderr
