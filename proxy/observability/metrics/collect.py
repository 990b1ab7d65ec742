"""The metrics read when Prometheus scrapes (docs/metrics.md): per-datamap state from the
catalog, the serving tier's engine and result cache, the upstream's health, the build.

`DatamapCollector.collect()` runs in the scrape's worker thread
(proxy/observability/metrics/endpoint.py renders off the event loop). It reads the catalog
in one read transaction of a few aggregate queries, not per datamap calls: a scrape every
15 s must stay cheap with hundreds of datamaps and a long event history. The job counters come
from the catalog's `events` rows, so they count since each datamap was created and survive
restarts.

Staleness is the catalog's view: seconds since the first base-table load (through the
proxy, or found by a sync) that the datamap's visible segments do not cover yet; 0 when
they cover every live load. Writes the catalog has not seen yet (made around the proxy,
before the next sync or freshness check) do not count.
"""
from __future__ import annotations

import json
import logging
import platform
import threading
import time
from importlib import metadata
from typing import Any, Callable, Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from proxy.datamaps.catalog.records import SEG_SUCCESS, DatamapStatus
from proxy.datamaps.freshness.listing import local_bytes

log = logging.getLogger("proxy.metrics")
P = "datamap_proxy_"
JOB_KINDS = ("built", "refreshed", "compacted")     # the catalog's events with a duration
_KINDS_SQL = ", ".join(f"'{k}'" for k in JOB_KINDS)


def build_version() -> str:
    try:
        return metadata.version("datamap-proxy")
    except metadata.PackageNotFoundError:       # run from a checkout without install
        return "unknown"


class DatamapCollector:
    """A custom collector (prometheus_client's protocol: collect() yields families).
    `serving`: the ServingTier or None; `querylog`: the query log (its datamap_totals())
    or None; `health`: a callable returning the UpstreamHealth (proxy/hs2/recovery.py) or None,
    bound once the protocol service exists."""

    def __init__(self, catalog, serving=None, querylog=None,
                 health: Callable[[], Any] | None = None, clock=time.time):
        self.catalog = catalog
        self.serving = serving
        self.querylog = querylog
        self.health = health
        self._clock = clock
        self._version = build_version()
        # bytes on disk of each published segment: its files never change once visible
        self._sizes: dict[tuple[str, str, str], int | None] = {}
        self._warned = False
        self._lock = threading.Lock()      # two scrapes at once share _sizes

    def describe(self) -> list:
        return []       # families depend on the catalog: not described up front

    def collect(self) -> Iterator:
        info = GaugeMetricFamily(P + "build_info", "The running datamap-proxy",
                                 labels=["version", "python"])
        info.add_metric([self._version, platform.python_version()], 1)
        yield info
        yield from self._upstream()
        yield from self._serving_engine()
        yield from self._cache()
        yield from self._mirror()
        up = GaugeMetricFamily(P + "catalog_up",
                               "1 when the scrape could read the datamap catalog")
        try:
            with self._lock:
                families = list(self._datamaps())
        except Exception as e:  # noqa: BLE001 - a scrape must answer even without a catalog
            if not self._warned:
                self._warned = True
                log.warning("metrics: cannot read the datamap catalog: %s", e)
            up.add_metric([], 0)
            yield up
            return
        self._warned = False
        up.add_metric([], 1)
        yield up
        yield from families

    # -- the process around the datamaps -----------------------------------------------------
    def _upstream(self) -> Iterator:
        health = self.health() if self.health is not None else None
        if health is None:
            return
        up = GaugeMetricFamily(P + "upstream_up", "1 while the Spark Thrift Server answers "
                               "(its last call succeeded), 0 once a call failed or before any")
        up.add_metric([], 1 if health.state == "up" else 0)
        yield up
        again = CounterMetricFamily(P + "upstream_reconnects",
                                    "Upstream sessions reopened after Spark was lost")
        again.add_metric([], health.reconnects)
        yield again

    def _serving_engine(self) -> Iterator:
        if self.serving is None or not self.serving.settings.enabled:
            return
        up = GaugeMetricFamily(P + "serving_engine_up",
                               "1 while the in-process serving engine (DuckDB) is up, 0 while "
                               "it cannot start (the ERROR log line says why) or before its "
                               "first start")
        up.add_metric([], 1 if self.serving.engine_status().up else 0)
        yield up

    def _cache(self) -> Iterator:
        cache = getattr(self.serving, "cache", None)
        if cache is None:
            return
        for name, help_, value in (("hits", "Answers served from the result cache", cache.hits),
                                   ("misses", "Served answers computed (not in the cache)",
                                    cache.misses)):
            c = CounterMetricFamily(P + f"serving_cache_{name}", help_)
            c.add_metric([], value)
            yield c
        entries = GaugeMetricFamily(P + "serving_cache_entries", "Results in the cache")
        entries.add_metric([], len(cache))
        yield entries

    def _mirror(self) -> Iterator:
        """The serving tier's segment mirror (proxy/serving/mirror.py), when it has one."""
        mirror = getattr(self.serving, "mirror", None)
        if mirror is None:
            return
        st = mirror.status()
        for name, help_, value in (
                ("bytes", "Bytes of datamap segment copies in the mirror", st.bytes),
                ("files", "Files in the mirror", st.files),
                ("segments", "Datamap segments in the mirror", st.segments),
                ("max_bytes", "The mirror's budget ([serving] mirror_max_bytes)", st.max_bytes),
                ("missing_segments", "Visible segments the mirror lacks (their answers come "
                 "from Spark)", sum(len(v) for v in st.missing.values()))):
            g = GaugeMetricFamily(P + f"serving_mirror_{name}", help_)
            g.add_metric([], value)
            yield g
        for name, help_, value in (
                ("fetches", "Segments copied into the mirror", st.fetches),
                ("fetch_seconds", "Time spent copying segments into the mirror",
                 st.fetch_seconds),
                ("fetched_bytes", "Bytes copied into the mirror", st.fetched_bytes),
                ("failures", "Segment copies that failed (full budget or disk, copy errors)",
                 st.failures),
                ("evictions", "Segments evicted from the mirror to stay within its budget",
                 st.evictions)):
            c = CounterMetricFamily(P + f"serving_mirror_{name}", help_)
            c.add_metric([], value)
            yield c

    # -- per datamap ---------------------------------------------------------------------------
    def _datamaps(self) -> Iterator:
        with self.catalog._tx(write=False) as c:      # one consistent read
            datamaps = [(r["db"], r["name"], r["provider"], r["status"], r["base_tables"])
                        for r in c.execute("SELECT db, name, provider, status, base_tables "
                                           "FROM datamaps ORDER BY db, name")]
            segments = [(r["db"], r["name"], str(r["id"]), r["status"], bool(r["visible"]),
                         r["rows"], r["load_start"], r["load_seconds"], r["extra_info"])
                        for r in c.execute("SELECT db, name, id, status, visible, rows, "
                                           "load_start, load_seconds, extra_info FROM "
                                           "dm_segments WHERE dropped = 0")]
            # file lists only of segments not measured yet (they can be long)
            files = {key: json.loads(c.execute(
                "SELECT files FROM dm_segments WHERE db = ? AND name = ? AND id = ?",
                (key[0], key[1], int(key[2]))).fetchone()["files"])
                for key in [(s[0], s[1], s[2]) for s in segments if s[4]]
                if key not in self._sizes}
            base = [(r["tbl"], str(r["id"]), r["load_start"] + (r["load_seconds"] or 0))
                    for r in c.execute("SELECT tbl, id, load_start, load_seconds FROM "
                                       f"base_segments WHERE status = '{SEG_SUCCESS}'")]
            totals = list(c.execute(
                "SELECT db, name, kind, COUNT(*) AS n, SUM(seconds) AS s FROM events "
                f"WHERE kind IN ({_KINDS_SQL}) GROUP BY db, name, kind"))
            last = list(c.execute(
                "SELECT db, name, kind, at, seconds FROM events WHERE seq IN (SELECT "
                f"MAX(seq) FROM events WHERE kind IN ({_KINDS_SQL}) GROUP BY db, name, kind)"))
            failed = list(c.execute("SELECT db, name, COUNT(*) AS n FROM events WHERE "
                                    "kind = 'failed' GROUP BY db, name"))
        for key, paths in files.items():     # stat() outside the catalog's lock
            self._sizes[key] = local_bytes(paths)
        now = self._clock()
        yield from _status_families(datamaps)
        yield from self._segment_families(datamaps, segments, base, now)
        yield from _job_families(totals, last, failed)
        yield from self._saved()

    def _segment_families(self, datamaps, segments, base, now) -> Iterator:
        counts = GaugeMetricFamily(P + "datamap_segments",
                                   "Datamap segments by status (dropped ones not counted)",
                                   labels=["datamap", "status"])
        rows = GaugeMetricFamily(P + "datamap_rows", "Rows in the visible segments",
                                 labels=["datamap"])
        size = GaugeMetricFamily(P + "datamap_size_bytes",
                                 "Bytes on disk of the visible segments' files (local "
                                 "file systems only)", labels=["datamap"])
        stale = GaugeMetricFamily(P + "datamap_staleness_seconds",
                                  "Seconds since the first base-table load the datamap does "
                                  "not cover yet; 0 when in sync", labels=["datamap"])
        synced = GaugeMetricFamily(P + "datamap_last_sync_timestamp_seconds",
                                   "When the newest visible segment was written (epoch s)",
                                   labels=["datamap"])
        by_status: dict[str, dict[str, int]] = {}
        visible: dict[str, list] = {}
        for db, name, sid, status, vis, n, start, secs, extra in segments:
            dm = f"{db}.{name}"
            mine = by_status.setdefault(dm, {})
            mine[status] = mine.get(status, 0) + 1
            if vis:
                visible.setdefault(dm, []).append((sid, n, start + (secs or 0), extra))
        live: dict[str, list[tuple[str, float]]] = {}
        for tbl, sid, ended in base:
            live.setdefault(tbl, []).append((sid, ended))
        kept: set[tuple[str, str, str]] = set()
        for db, name, _provider, _status, base_tables in datamaps:
            dm = f"{db}.{name}"
            for status, n in sorted(by_status.get(dm, {}).items()):
                counts.add_metric([dm, status], n)
            segs = visible.get(dm, [])
            rows.add_metric([dm], sum(s[1] or 0 for s in segs))
            total: int | None = 0
            covered: dict[str, set[str]] = {}
            for sid, _n, _end, extra in segs:
                key = (db, name, sid)
                kept.add(key)
                b = self._sizes.get(key)
                total = None if b is None or total is None else total + b
                for tbl, ids in json.loads(extra).items():
                    covered.setdefault(tbl, set()).update(ids)
            if total is not None:
                size.add_metric([dm], total)
            pending = [ended for tbl in json.loads(base_tables)
                       for sid, ended in live.get(tbl, ()) if sid not in covered.get(tbl, ())]
            stale.add_metric([dm], max(0.0, now - min(pending)) if pending else 0.0)
            if segs:
                synced.add_metric([dm], max(s[2] for s in segs))
        for key in set(self._sizes) - kept:        # superseded or dropped segments
            del self._sizes[key]
        yield from (counts, rows, size, stale, synced)

    def _saved(self) -> Iterator:
        if self.querylog is None:
            return
        saved = CounterMetricFamily(P + "datamap_saved_seconds",
                                    "Estimated base-table seconds saved by datamap answers: "
                                    "an estimate from the base-table time of their shapes, "
                                    "scaled by the base tables' rows (the query log's "
                                    "saved_s)", labels=["datamap"])
        for dm, (_hits, seconds) in sorted(self.querylog.datamap_totals().items()):
            if seconds is not None:        # not measured yet: no sample rather than a 0
                saved.add_metric([dm], seconds)
        yield saved


def _status_families(datamaps) -> Iterator:
    status = GaugeMetricFamily(P + "datamap_status",
                               "1 for the datamap's status (ENABLED or DISABLED), 0 for the "
                               "other", labels=["datamap", "provider", "status"])
    for db, name, provider, current, _bases in datamaps:
        for s in DatamapStatus:
            status.add_metric([f"{db}.{name}", provider, s.value], 1 if current == s else 0)
    yield status


def _job_families(totals, last, failed) -> Iterator:
    jobs = SummaryMetricFamily(P + "datamap_job_duration_seconds",
                               "Datamap jobs (built, refreshed, compacted) since the "
                               "datamap was created: count and total seconds",
                               labels=["datamap", "job"])
    for r in totals:
        jobs.add_metric([f"{r['db']}.{r['name']}", r["kind"]], r["n"], r["s"] or 0.0)
    yield jobs
    last_s = GaugeMetricFamily(P + "datamap_job_last_duration_seconds",
                               "Seconds the datamap's last job of the kind took",
                               labels=["datamap", "job"])
    last_at = GaugeMetricFamily(P + "datamap_job_last_timestamp_seconds",
                                "When the datamap's last job of the kind ended (epoch s)",
                                labels=["datamap", "job"])
    for r in last:
        labels = [f"{r['db']}.{r['name']}", r["kind"]]
        last_s.add_metric(labels, r["seconds"] or 0.0)
        last_at.add_metric(labels, r["at"])
    yield last_s
    yield last_at
    failures = CounterMetricFamily(P + "datamap_job_failures",
                                   "Datamap jobs that failed (the segment was never shown)",
                                   labels=["datamap"])
    for r in failed:
        failures.add_metric([f"{r['db']}.{r['name']}"], r["n"])
    yield failures
