"""The session time zone of the pipeline against the upstream's (remote mode).

Datamap rows are computed by the pipeline's SparkSession, queries run on the upstream
Spark Thrift Server. Anything that turns a TIMESTAMP into a calendar value (timeseries(),
date_trunc, CAST(ts AS DATE), hour(), date_format, a string literal compared with a
timestamp, ...) depends on `spark.sql.session.timeZone`, so a datamap built under one zone
and read under another answers differently from the base tables. In remote mode the proxy
therefore reads the upstream's default zone (`SET spark.sql.session.timeZone` on a fresh
session) when it opens the pipeline session and sets the pipeline session to it. When the
zone cannot be read, time-dependent datamaps are not offered to the rewriter (the reason
shows in EXPLAIN). Embedded mode needs none of this: the Thrift server runs inside the
pipeline's own Spark application and its sessions inherit the same default.

Sessions that change their own zone (`SET TIME ZONE`, `SET spark.sql.session.timeZone`)
are not answered from datamaps at all (proxy/routing/statements.py).
"""
from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any, Mapping

from proxy.upstream.client import run_blocking, show_settings

log = logging.getLogger("proxy.timezone")

TIME_ZONE_KEY = "spark.sql.session.timeZone"
_UTC = {"utc", "etc/utc", "z", "gmt", "etc/gmt", "uct", "etc/uct", "zulu", "etc/zulu",
        "universal", "etc/universal", "+00:00", "-00:00", "gmt0", "etc/gmt0", "greenwich"}

# Functions whose result depends on the session time zone (sqlglot's names for Spark SQL,
# and Spark's own names where sqlglot keeps them as anonymous functions).
_ZONE_FUNCTIONS = frozenset({
    "timeseries", "date_trunc", "trunc", "timestamptrunc", "timestamp_trunc", "datetrunc",
    "to_date", "tsordstodate", "to_timestamp", "strtotime", "str_to_time", "to_unix_timestamp",
    "unix_timestamp", "timetounix", "time_to_unix", "strtounix", "str_to_unix",
    "from_unixtime", "unixtotime", "unix_to_time", "unixtostr", "unix_to_str",
    "from_utc_timestamp", "to_utc_timestamp", "date_format", "timetostr", "time_to_str",
    "hour", "minute", "second", "day", "dayofmonth", "dayofweek", "dayofyear", "weekofyear",
    "week", "month", "quarter", "year", "extract", "date", "current_date", "currentdate",
    "current_timestamp", "currenttimestamp", "now", "localtimestamp", "make_timestamp",
    "timestamp_seconds", "timestamp_millis", "timestamp_micros", "unix_seconds",
    "unix_millis", "unix_micros", "unix_date", "date_from_unix_date", "window",
    "session_window", "convert_timezone",
})


def same_zone(a: str | None, b: str | None) -> bool:
    """Names of the same zone (UTC has many spellings); unknown never matches."""
    if not a or not b:
        return False
    a, b = a.strip(), b.strip()
    if a.lower() in _UTC and b.lower() in _UTC:
        return True
    return a == b


def upstream_time_zone(upstream: Any, timeout: float | None = None) -> str | None:
    """The upstream's default session time zone, from `SET spark.sql.session.timeZone` on a
    session of its own; None (logged) when it cannot be read. Blocking: its callers are
    worker threads (the pipeline session's opener, the periodic check), so the async client
    runs on a loop of its own rather than on the serving loop."""
    limit = float(timeout if timeout is not None else
                  min(getattr(upstream, "connect_timeout", 30.0) or 30.0, 60.0))
    try:
        _, found = run_blocking(show_settings(
            upstream.host, int(upstream.port), (TIME_ZONE_KEY,),
            auth=getattr(upstream, "auth", "plain") or "plain",
            user=getattr(upstream, "user", None) or "datamap-proxy",
            password=getattr(upstream, "password", None) or "datamap-proxy", timeout=limit))
    except Exception as e:  # noqa: BLE001 - reported by the caller's decision
        log.warning("cannot read the upstream's %s from %s:%s: %s", TIME_ZONE_KEY,
                    upstream.host, upstream.port, e)
        return None
    zone = (found.get(TIME_ZONE_KEY) or "").strip()
    if not zone or zone == "<undefined>":
        log.warning("the upstream %s:%s did not report %s", upstream.host, upstream.port,
                    TIME_ZONE_KEY)
        return None
    return zone


def set_session_zone(session: Any, zone: str) -> str | None:
    """Set the pipeline session's zone to the upstream's (the policy around it is
    proxy/datamaps/zones/pipeline.py's align_pipeline_zone). Returns the zone it had when
    that differed (logged), else None."""
    current = session.conf.get(TIME_ZONE_KEY)
    if same_zone(current, zone):
        log.info("pipeline session time zone %s matches the upstream's", current)
        return None
    session.conf.set(TIME_ZONE_KEY, zone)
    log.warning("pipeline session time zone %s differs from the upstream's default %s: the "
                "pipeline session now uses %s (datamaps built before under %s may hold other "
                "time buckets: REBUILD them)", current, zone, zone, current)
    return current


def time_dependent(select_sql: str, schemas: Mapping[str, Mapping[str, Mapping[str, str]]]
                   | None = None) -> str | None:
    """Why a datamap definition's rows depend on the session time zone (a one-line reason),
    or None. Conservative: any TIMESTAMP column (schemas: db -> table -> column -> type; a
    column of unknown type counts when no schema is given), any zone-dependent function, any
    cast to TIMESTAMP or DATE."""
    import sqlglot
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(select_sql, dialect="spark")
    except Exception:  # noqa: BLE001 - cannot tell: assume it depends
        return "its SELECT could not be analysed for time-zone dependence"
    ts_columns: set[str] = set()
    for tables in (schemas or {}).values():
        for cols in tables.values():
            ts_columns |= {c.lower() for c, t in cols.items()
                           if str(t).strip().lower() in ("timestamp", "timestamp_ltz")}
    for col in tree.find_all(exp.Column):
        if col.name and col.name.lower() in ts_columns:
            return f"it reads the TIMESTAMP column {col.name}"
    for node in tree.find_all(exp.Func):
        names = {type(node).__name__.lower(), node.sql_name().lower()}
        if isinstance(node, exp.Anonymous):
            names.add(str(node.this).lower())
        if names & _ZONE_FUNCTIONS:
            return f"it uses {_short(node.sql(dialect='spark'))}"
        if isinstance(node, exp.Cast) and node.to.this in (
                exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPLTZ,
                exp.DataType.Type.TIMESTAMPTZ, exp.DataType.Type.DATE):
            return f"it casts to {node.to.sql(dialect='spark')}"
    return None


def _short(sql: str, limit: int = 60) -> str:
    return sql if len(sql) <= limit else sql[: limit - 3] + "..."


def local_zone_name() -> str | None:
    """Best guess of the zone a JVM started here defaults to (TZ, /etc/timezone,
    /etc/localtime), for doctor; None when unknown."""
    tz = os.environ.get("TZ", "").strip().lstrip(":")
    if tz:
        return tz
    try:
        text = Path("/etc/timezone").read_text().strip()
        if text:
            return text
    except OSError:
        pass
    try:
        target = os.readlink("/etc/localtime")
        if "zoneinfo/" in target:
            return target.split("zoneinfo/", 1)[1]
    except OSError:
        pass
    return None


def pipeline_zone(conf: Mapping[str, str]) -> tuple[str | None, str]:
    """(zone, where it comes from) of a pipeline session opened with `conf` ([spark] conf)."""
    if conf.get(TIME_ZONE_KEY):
        return conf[TIME_ZONE_KEY], f"[spark] conf {TIME_ZONE_KEY}"
    opts = conf.get("spark.driver.extraJavaOptions", "")
    for opt in opts.split():
        if opt.startswith("-Duser.timezone="):
            return opt.split("=", 1)[1], "-Duser.timezone in spark.driver.extraJavaOptions"
    return local_zone_name(), "this machine's default"

