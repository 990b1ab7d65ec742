"""Prometheus metrics of one `serve` process (docs/metrics.md).

`Metrics` is an Observer (proxy/observability/observe.py): the protocol layer calls it on
the event loop, on the client's path, so each call only bumps counters (children looked up
once and kept in dicts, no labels() lookup per event). Everything read from the catalog
(per-datamap status, segments, staleness, job durations) is a collector evaluated when
Prometheus
scrapes (proxy/observability/metrics/collect.py), in the scrape's worker thread. The endpoint that
serves the text is proxy/observability/metrics/endpoint.py.

Each Metrics has its own CollectorRegistry, never the process-wide default one: tests build
several, and nothing else in the process (pyspark, libraries) can add series to ours.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from proxy.routing.classify import Kind, classify
# the query log's classes, one classifier
from proxy.observability.querylog.reasons import not_served_class, reason_class
from proxy.observability.observe import (
    BYPASSED, FORWARDED, REWRITTEN, SERVED, Observer, SessionDetail, StatementEvent,
)

PREFIX = "datamap_proxy_"
# 0.1 ms (a cached metadata call) .. 60 s (a long query on the base tables)
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
# distinct user labels kept before the rest are counted as "other": a label per user is
# a series per user in Prometheus, and logins are client-chosen text
MAX_USER_LABELS = 1000
OTHER_USER = "other"
MAX_DATAMAP_LABELS = 5000       # datamaps are created by DDL; still, a bound
OTHER_DATAMAP = "other"

# Rewrite decision results (the `result` label of rewrite_decisions_total).
HIT, MISS = "hit", "miss"

def _capped(label: str, seen: set[str], limit: int, other: str) -> str:
    if label in seen:
        return label
    if len(seen) < limit:
        seen.add(label)
        return label
    return other


class Metrics(Observer):
    """The event side: counters, gauges and histograms fed by proxy/observability/observe.py events.
    `collector` (metrics_collect.DatamapCollector) adds what is read at scrape."""

    def __init__(self, collector=None):
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self._connections_open = Gauge(PREFIX + "connections_open",
                                       "Client connections open now", ["transport"], registry=r)
        self._connections = Counter(PREFIX + "connections",
                                    "Client connections accepted", ["transport"], registry=r)
        self._sessions_open = Gauge(PREFIX + "sessions_open",
                                    "Sessions open now, by user (at most "
                                    f"{MAX_USER_LABELS} users, the rest as \"other\")",
                                    ["user"], registry=r)
        self._opened = Counter(PREFIX + "sessions_opened", "Sessions opened", registry=r)
        self._refused = Counter(PREFIX + "sessions_refused",
                                "Sessions refused (impersonation, limits, upstream refusal)",
                                registry=r)
        self._operations = Counter(PREFIX + "operations",
                                   "Statements ended, by decision and outcome",
                                   ["kind", "outcome"], registry=r)
        self._rpc = Histogram(PREFIX + "rpc_duration_seconds",
                              "Time of each TCLIService call on the proxy", ["method"],
                              buckets=LATENCY_BUCKETS, registry=r)
        self._rpc_errors = Counter(PREFIX + "rpc_errors",
                                   "TCLIService calls that failed", ["method"], registry=r)
        self._statement = Histogram(PREFIX + "statement_duration_seconds",
                                    "Statements from arrival to their end, by decision",
                                    ["decision"], buckets=LATENCY_BUCKETS, registry=r)
        self._decisions = Counter(PREFIX + "rewrite_decisions",
                                  "Queries by rewrite result (hit, miss, bypassed) and, for "
                                  "a miss, its reason class", ["result", "reason"], registry=r)
        self._hits = Counter(PREFIX + "datamap_hits",
                             "Queries a datamap answered (rewritten or served)",
                             ["datamap"], registry=r)
        self._served = Counter(PREFIX + "datamap_served",
                               "Datamap answers computed in-process (serving tier)",
                               ["datamap"], registry=r)
        self._not_served = Counter(PREFIX + "not_served",
                                   "Datamap answers Spark computed though the proxy serves "
                                   "answers in-process, by the class of the serving tier's "
                                   "reason", ["reason"], registry=r)
        # children by label values: labels() takes a lock and builds a key per call
        self._children: dict[tuple, object] = {}
        self._users: set[str] = set()
        self._datamaps: set[str] = set()
        if collector is not None:
            self.add_collector(collector)

    def add_collector(self, collector) -> None:
        """A scrape-time collector (metrics_collect.DatamapCollector)."""
        self.registry.register(collector)

    def _child(self, metric, *values: str):
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    # -- Observer --------------------------------------------------------------------------
    def rpc(self, name: str, seconds: float, ok: bool) -> None:
        self._child(self._rpc, name).observe(seconds)
        if not ok:
            self._child(self._rpc_errors, name).inc()

    def connection(self, event: str, transport: str) -> None:
        gauge = self._child(self._connections_open, transport)
        if event == "open":
            gauge.inc()
            self._child(self._connections, transport).inc()
        elif event == "close":
            gauge.dec()

    def session(self, event: str, user: str, client: str = "",
                detail: SessionDetail | None = None) -> None:
        if event == "refused":
            self._refused.inc()
            return
        label = _capped(user, self._users, MAX_USER_LABELS, OTHER_USER)
        gauge = self._child(self._sessions_open, label)
        if event == "open":
            self._opened.inc()
            gauge.inc()
        elif event == "close":
            gauge.dec()

    def statement(self, ev: StatementEvent) -> None:
        decision = ev.decision
        self._child(self._operations, decision, ev.outcome.lower()).inc()
        self._child(self._statement, decision).observe(ev.duration_s)
        answered = decision in (REWRITTEN, SERVED)
        if ev.datamaps:
            served = decision == SERVED
            self._child(self._decisions, HIT, "").inc()
            # a datamap's hits are its answers, as the query log counts them for the
            # console and datamap_saved_seconds: a statement that failed is none
            answers = ev.datamaps if ev.outcome in ("FINISHED", "CLOSED") else ()
            for dm in answers:
                label = _capped(dm, self._datamaps, MAX_DATAMAP_LABELS, OTHER_DATAMAP)
                self._child(self._hits, label).inc()
                if served:
                    self._child(self._served, label).inc()
            if ev.not_served:
                self._child(self._not_served, not_served_class(ev.not_served)).inc()
        elif decision == BYPASSED:
            self._child(self._decisions, "bypassed", "bypassed").inc()
        elif (decision == FORWARDED or answered) and (ev.why_not or self._is_query(ev)):
            self._child(self._decisions, MISS, reason_class(ev.why_not)).inc()

    @staticmethod
    def _is_query(ev: StatementEvent) -> bool:
        # the first words only (parse_limit 0): a regex, no sqlglot on the event loop
        return classify(ev.statement, ev.current_db, 0).kind is Kind.QUERY

    # -- exposition ------------------------------------------------------------------------
    def render(self) -> bytes:
        """The text format; runs the scrape-time collectors (catalog reads): call it off the
        event loop."""
        return generate_latest(self.registry)
