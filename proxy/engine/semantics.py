"""The engine's own result-affecting Spark settings against the defaults datamap answers are
proven under.

A session that SETs a setting which changes query results (proxy/routing/session_keys.py
`semantic_setting`) is never answered from datamaps. The engine's defaults count as much:
an operator's `[spark] conf` (embedded mode) or a remote cluster's spark-defaults (migrated
clusters often run spark.sql.ansi.enabled=false, spark.sql.legacy.timeParserPolicy=LEGACY,
spark.sql.decimalOperations.allowPrecisionLoss=false). The rewriter's proofs and the
serving tier compute what Spark 4 computes under its defaults; with
allowPrecisionLoss=false Spark types `sum(a) / sum(b)` over DECIMAL(20,2) and DECIMAL(20,0)
columns DECIMAL(38,21), where the served answer is DECIMAL(38,10)
(tests/pipeline/test_engine_settings_spark.py). So while the engine runs
with any such setting away from its default, datamaps are not offered to the rewriter
(proxy/datamaps/zones/pipeline.py); in remote mode the pipeline session that computes
datamap rows also takes the upstream's values (`align_session`).

The engine's values are read where its sessions get them: `SET` alone lists every setting
made explicitly (SparkConf, spark-defaults, `[spark] conf`), on a fresh upstream session
(remote) or on the pipeline session (embedded: the Thrift server's sessions share its
SparkConf). A setting not listed has its default. The defaults compared with are Spark 4's
for the keys of `SPARK_DEFAULTS` (what the proofs assume, whatever the engine's version),
and the JVM's registry for any other spark.sql.legacy.* key; one whose default cannot be
told counts as changed. The session time zone is not among them (datamaps follow it:
proxy/engine/timezone.py), nor java8API (`_NOT_COMPARED`).
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Mapping, NamedTuple

from proxy.engine.timezone import TIME_ZONE_KEY
from proxy.routing.session_keys import semantic_setting
from proxy.upstream.client import run_blocking, show_settings

log = logging.getLogger("proxy.engine")

# Spark 4's defaults of the result-affecting settings the proxy knows by name (reviewed
# against SQLConf; spark.sql.legacy.* keys not listed here are asked of the JVM).
SPARK_DEFAULTS: dict[str, str] = {
    "spark.sql.ansi.enabled": "true",
    "spark.sql.caseSensitive": "false",
    "spark.sql.decimalOperations.allowPrecisionLoss": "true",
    "spark.sql.timestampType": "TIMESTAMP_LTZ",
    "spark.sql.mapKeyDedupPolicy": "EXCEPTION",
    "spark.sql.session.collation.default": "UTF8_BINARY",
    "spark.sql.legacy.timeParserPolicy": "CORRECTED",
}
DEFAULTS = "Spark's defaults"
# Not compared: the time zone, which datamaps follow (proxy/engine/timezone.py); and
# java8API, on in a Spark Thrift Server's sessions (its `SET` lists it, set by the server
# itself) and off in an embedded engine's: it changes the Java types values are collected
# as, not what Spark computes, and the pipeline's Python code reads rows as the default
# gives them (so it is not aligned either).
_NOT_COMPARED = frozenset({TIME_ZONE_KEY.lower(), "spark.sql.datetime.java8api.enabled"})
_BY_LOWER = {k.lower(): (k, v) for k, v in SPARK_DEFAULTS.items()}
DefaultOf = Callable[[str], "str | None"]


class Difference(NamedTuple):
    """A result-affecting setting the engine runs with away from its default (None: the
    default could not be told)."""
    key: str
    value: str
    default: str | None

    def __str__(self) -> str:
        return f"{self.key}={self.value}"


def no_registry(_key: str) -> str | None:
    return None


def default_of(key: str, registry: DefaultOf = no_registry) -> str | None:
    """Spark 4's default of `key`: the reviewed table, else the JVM's registry."""
    known = _BY_LOWER.get(key.strip().lower())
    return known[1] if known is not None else registry(key)


def same_value(a: str | None, b: str | None) -> bool:
    """Spark reads these settings' values without regard to case or surrounding blanks."""
    return a is not None and b is not None and a.strip().lower() == b.strip().lower()


def differences(listed: Mapping[str, str], registry: DefaultOf = no_registry) -> list[Difference]:
    """The result-affecting settings among `listed` (what `SET` lists) whose values are not
    Spark's defaults, by key."""
    out = []
    for key, value in listed.items():
        if not semantic_setting(key) or key.strip().lower() in _NOT_COMPARED:
            continue
        default = default_of(key, registry)
        if not same_value(value, default):
            out.append(Difference(key, str(value).strip(), default))
    return sorted(out)


def fingerprint(diffs: list[Difference]) -> str:
    """What the catalog records of the settings datamap rows were computed under."""
    return ", ".join(sorted(str(d) for d in diffs)) or DEFAULTS


def describe(diffs: list[Difference]) -> str | None:
    """The one-line reason datamaps are not used (EXPLAIN, the query log), or None."""
    if not diffs:
        return None
    return (f"the engine runs with {', '.join(str(d) for d in diffs)}; datamap answers are "
            "proven under Spark's defaults")


def session_listing(session: Any) -> dict[str, str]:
    """Every setting of a SparkSession made explicitly (its SparkConf's and runtime ones)."""
    return {str(k): str(v) for k, v in session.conf.getAll.items()}


def jvm_registry(session: Any) -> DefaultOf:
    """The defaults the SparkSession's JVM registers (SQLConf's entries); None for a key it
    does not know or whose default is not a plain value."""
    def read(key: str) -> str | None:
        try:
            conf = getattr(getattr(session._jvm.org.apache.spark.sql.internal, "SQLConf$"),
                           "MODULE$")
            entry = conf.getConfigEntry(key)
            text = None if entry is None else str(entry.defaultValueString())
        except Exception:  # noqa: BLE001 - an unknown default counts as changed
            return None
        return None if text is None or text.startswith("<") else text
    return read


def upstream_listing(upstream: Any, timeout: float | None = None) -> dict[str, str] | None:
    """What `SET` lists on a fresh session of the upstream; None (logged) when it cannot be
    read. Blocking, like timezone.upstream_time_zone."""
    limit = float(timeout if timeout is not None else
                  min(getattr(upstream, "connect_timeout", 30.0) or 30.0, 60.0))
    try:
        _, found = run_blocking(show_settings(
            upstream.host, int(upstream.port), ("",),
            auth=getattr(upstream, "auth", "plain") or "plain",
            user=getattr(upstream, "user", None) or "datamap-proxy",
            password=getattr(upstream, "password", None) or "datamap-proxy", timeout=limit))
    except Exception as e:  # noqa: BLE001 - reported by the caller's decision
        log.warning("cannot read the upstream's settings from %s:%s: %s", upstream.host,
                    upstream.port, e)
        return None
    if not found:
        log.warning("the upstream %s:%s listed no settings", upstream.host, upstream.port)
        return None
    return found


def align_session(session: Any, upstream: Mapping[str, str],
                  registry: DefaultOf = no_registry) -> list[str]:
    """Give the pipeline session the upstream's value of every result-affecting setting
    either side sets (the default where only the pipeline's sets one), so that datamap rows
    are computed as the upstream computes queries. Set, not unset: sessions cloned from it
    (the audit's) copy what is set. Returns the changes made ("key: old -> new"), logged."""
    listed = session_listing(session)
    ours = {k.strip().lower(): v for k, v in listed.items()}
    keys = {k.strip().lower(): k for k in listed if semantic_setting(k)}
    keys.update({k.strip().lower(): k for k in upstream if semantic_setting(k)})
    theirs = {k.strip().lower(): v for k, v in upstream.items()}
    changed = []
    for low, key in sorted(keys.items()):
        if low in _NOT_COMPARED:
            continue
        want = theirs.get(low, default_of(key, registry))
        have = ours.get(low)
        if have is None and (want is None or same_value(want, default_of(key, registry))):
            continue
        if same_value(have, want):
            continue
        try:
            if want is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, want)
        except Exception as e:  # noqa: BLE001 - the upstream's value stays the rule
            log.warning("cannot set %s on the pipeline session: %s", key, e)
            continue
        changed.append(f"{key}: {have or 'default'} -> {want or 'default'}")
    if changed:
        log.warning("pipeline session settings aligned with the upstream's: %s",
                    "; ".join(changed))
    return changed
