"""One embedded `serve` (one Spark, ~40 s to start) shared by the e2e modules that only
add tables of their own names to it (test_table_formats, test_write_matrix, test_freshness,
test_serving, and the metrics, console, advisor and docs tests: it serves [metrics] and
[console] ports too). Modules that need a server of their own settings or state (restarts,
time zones, a Spark configuration, another Python) start their own.

Its settings suit all: TZ=UTC (timestamps are served in-process in fixed-offset zones and
in the named zones of proxy/serving/timestamps.py) and `[datamaps] rewrite_max_sql_bytes` =
SHARED_PARSE_LIMIT, low enough that a write of a few KB is one the proxy does not parse
(test_write_matrix's MAYBE_WRITE step). A module that needs a reloadable setting of its own
(`docs/limits.md`, SIGHUP) sets it with `shared_serve.settings(toml)` for its duration and
puts `shared_serve.settings("")` back at its end."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.support.e2e import ServeProc, SHARED_PARSE_LIMIT


@pytest.fixture(scope="package")
def shared_serve(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e_shared")
    config = root / "proxy.toml"
    config.write_text("")
    srv = ServeProc(root / "serve", root / "state", env={
        "TZ": "UTC", "DATAMAP_PROXY_DATAMAPS_REWRITE_MAX_SQL_BYTES": str(SHARED_PARSE_LIMIT)},
        metrics=True, console=True, config=config)

    def settings(toml: str) -> str:
        """The settings file becomes `toml` and the server reloads it; its log line."""
        config.write_text(toml)
        line = srv.reload()
        assert "SIGHUP: settings reloaded" in line, line
        return line

    try:
        yield SimpleNamespace(srv=srv, port=srv.port, root=root, state=root / "state",
                              metrics_port=srv.metrics_port, console_port=srv.console_port,
                              settings=settings)
    finally:
        srv.kill()
