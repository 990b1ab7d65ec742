"""proxy/observability/metrics/endpoint.py and its wiring: the endpoint over a real socket (urllib,
http.client), a port in use stopping `serve` with exit 2, and the App's metrics
attached to a protocol Service (no Spark: remote mode opens no session)."""
from __future__ import annotations

import asyncio
import http.client
import logging
import socket
import urllib.error
import urllib.request

from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families

from proxy import cli
from proxy.app import App
from proxy.config import MetricsSettings, ServerSettings, Settings, StateSettings, UpstreamSettings
from proxy.observability.metrics.endpoint import MetricsEndpoint
from proxy.observability.metrics.registry import Metrics


async def _get(url: str, method: str = "GET") -> tuple[int, str, bytes]:
    def fetch():
        req = urllib.request.Request(url, method=method)
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, r.headers["Content-Type"], r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers["Content-Type"], e.read()
    return await asyncio.to_thread(fetch)


async def test_endpoint_serves_the_text_and_refuses_the_rest():
    m = Metrics()
    m.connection("open", "binary")
    ep = MetricsEndpoint(m.render, "127.0.0.1", 0, "stats/prom")
    host, port = await ep.start()
    try:
        status, ctype, body = await _get(f"http://{host}:{port}/stats/prom")
        assert status == 200 and ctype == CONTENT_TYPE_LATEST
        names = {f.name for f in text_string_to_metric_families(body.decode())}
        assert "datamap_proxy_connections_open" in names
        status, _, body = await _get(f"http://{host}:{port}/metrics")
        assert status == 404 and b"/stats/prom" in body
        status, _, _ = await _get(f"http://{host}:{port}/stats/prom", "POST")
        assert status == 405

        def keep_alive():       # two scrapes on one connection, then HEAD
            c = http.client.HTTPConnection(host, port, timeout=10)
            out = []
            for method in ("GET", "GET", "HEAD"):
                c.request(method, "/stats/prom")
                r = c.getresponse()
                out.append((r.status, len(r.read()), r.headers["Content-Length"]))
            c.close()
            return out
        got = await asyncio.to_thread(keep_alive)
        assert [s for s, _, _ in got] == [200, 200, 200]
        assert got[2][1] == 0 and int(got[2][2]) > 0

        def garbage():
            with socket.create_connection((host, port), timeout=10) as s:
                s.sendall(b"NOT HTTP\r\n\r\n")
                return s.recv(100)
        assert (await asyncio.to_thread(garbage)).startswith(b"HTTP/1.1 400")
    finally:
        await ep.close()


def test_a_port_in_use_stops_serve_with_exit_2(tmp_path, caplog):
    taken = socket.create_server(("127.0.0.1", 0))
    port = taken.getsockname()[1]
    try:
        # at_level: an earlier `sync` in this process quietened the "proxy" logger
        with caplog.at_level(logging.ERROR, logger="proxy"):
            rc = cli.main(["serve", "--upstream", "127.0.0.1:1", "--port", "0", "--state-dir",
                           str(tmp_path), "--host", "127.0.0.1"] +
                          ["--config", str(_config(tmp_path, port))])
    finally:
        taken.close()
    assert rc == 2
    assert f"[metrics] port {port}" in caplog.text


def _config(tmp_path, port: int):
    p = tmp_path / "proxy.toml"
    p.write_text(f"[metrics]\nport = {port}\nhost = \"127.0.0.1\"\n")
    return p


async def test_the_app_attaches_metrics_to_the_service(tmp_path):
    settings = Settings(state=StateSettings(dir=str(tmp_path)),
                        server=ServerSettings(host="127.0.0.1", port=0),
                        upstream=UpstreamSettings(host="127.0.0.1", port=1),
                        metrics=MetricsSettings(port=0))
    app = await App(settings).start()
    try:
        service = app.service
        metrics = next(o for o in service.observers if isinstance(o, Metrics))
        service.observers.connection("open", "binary")
        service.health.success()
        text = (await asyncio.to_thread(metrics.render)).decode()
        got = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
        assert got["datamap_proxy_connections_open"] == 1
        assert got["datamap_proxy_upstream_up"] == 1
        assert got["datamap_proxy_catalog_up"] == 1
    finally:
        await app.close()


async def test_a_failing_scrape_is_a_500_and_the_next_one_answers():
    calls = []

    def render() -> bytes:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("collector bug")
        return b"# ok\n"
    ep = MetricsEndpoint(render, "127.0.0.1", 0)
    host, port = await ep.start()
    try:
        assert (await _get(f"http://{host}:{port}/metrics"))[0] == 500
        assert (await _get(f"http://{host}:{port}/metrics"))[::2] == (200, b"# ok\n")
    finally:
        await ep.close()
