"""The proxy's own time for one run of a statement, beside the client's end-to-end time.

A client's execute + fetchall includes its own work: PyHive decodes every value in Python
(10k timestamps cost it some 60 ms whatever the proxy sends). The proxy's time is the sum
of `datamap_proxy_rpc_duration_seconds` over every TCLIService call the run makes
(ExecuteStatement, status polls, GetResultSetMetadata, FetchResults with its encoding, the
previous operation's CloseOperation): each call timed on the proxy from its handler's start
to its encoded reply (proxy/hs2/frontend.py, docs/metrics.md), read from the metrics
endpoint just before and after the run. Not the query log's duration_s, which ends at the
statement's end and leaves the fetches out. The network and the client are not in it.

    clock = ProxyClock(srv.metrics_port)         # None: no endpoint, no proxy time
    client_ms, proxy_ms, rows = timed_both(cur, sql, clock)
"""
from __future__ import annotations

import re
import urllib.request

from bench.rows import timed

_SUM = re.compile(r"^datamap_proxy_rpc_duration_seconds_sum\{[^}]*\} (\S+)$", re.M)


class ProxyClock:
    """The proxy's seconds spent in TCLIService calls so far, from its metrics endpoint."""

    def __init__(self, port: int, host: str = "127.0.0.1", path: str = "/metrics"):
        self.url = f"http://{host}:{port}{path}"

    def seconds(self) -> float:
        with urllib.request.urlopen(self.url, timeout=30) as r:
            return sum(float(x) for x in _SUM.findall(r.read().decode()))


def timed_both(cur, sql: str, clock: ProxyClock | None) -> tuple[float, float | None, list]:
    """(client ms, proxy ms or None without a clock, rows) of one execute + fetchall."""
    before = clock.seconds() if clock else 0.0
    ms, rows = timed(cur, sql)
    return ms, ((clock.seconds() - before) * 1000 if clock else None), rows
