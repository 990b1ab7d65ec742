"""One embedded `serve` (one Spark, ~40 s to start) shared by the e2e modules that only
add tables of their own names to it (test_table_formats, test_write_matrix, and the
metrics, console, advisor and docs tests: it serves [metrics] and [console] ports too). Modules that
need a server of their own settings or state (restarts, time zones) start their own.

Its settings suit both: TZ=UTC (timestamps are served in-process in fixed-offset zones and
in the named zones of proxy/serving/timestamps.py) and `[datamaps] rewrite_max_sql_bytes` = SHARED_PARSE_LIMIT, low enough that a
write of a few KB is one the proxy does not parse (test_write_matrix's MAYBE_WRITE step)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.support.e2e import ServeProc, SHARED_PARSE_LIMIT


@pytest.fixture(scope="package")
def shared_serve(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e_shared")
    srv = ServeProc(root / "serve", root / "state", env={
        "TZ": "UTC", "DATAMAP_PROXY_DATAMAPS_REWRITE_MAX_SQL_BYTES": str(SHARED_PARSE_LIMIT)},
        metrics=True, console=True)
    try:
        yield SimpleNamespace(srv=srv, port=srv.port, root=root, state=root / "state",
                              metrics_port=srv.metrics_port, console_port=srv.console_port)
    finally:
        srv.kill()
