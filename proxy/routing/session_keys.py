"""The proxy's session settings (no I/O): their keys, and the pure readers of a session's
`conf` that the handlers deciding a statement use (routing, datamaps, serving).
`rewrite_on` is the one truth test of datamap.rewrite.enabled, `staleness_budget` the one
reading of datamap.max_staleness."""
from __future__ import annotations

from typing import Mapping

from proxy.errors import ClientError
from proxy.routing.classify import APPROXIMATE_KEY, PRUNE_KEY, REWRITE_KEY
from proxy.staleness import MAX_STALENESS_KEY, BadDuration, parse_duration, seconds

__all__ = ["APPROXIMATE_KEY", "BLOCKED_KEY", "MAX_STALENESS_KEY", "PRUNE_KEY", "REWRITE_KEY",
           "approximate_on", "prune_on", "rewrite_on", "semantic_setting",
           "session_settings", "staleness_budget", "switched_on"]
# Set (to a reason) when the session changed a setting that changes query results; the
# session is then never answered from datamaps, which were built under the engine's settings.
BLOCKED_KEY = "datamap.rewrite.blocked"
_SEMANTIC_KEYS = frozenset({
    "spark.sql.session.timezone", "spark.sql.ansi.enabled", "spark.sql.casesensitive",
    "spark.sql.decimaloperations.allowprecisionloss", "spark.sql.timestamptype",
    "spark.sql.mapkeydeduppolicy", "spark.sql.datetime.java8api.enabled",
    # string comparisons, grouping and min/max follow the collation (Spark 4): stored
    # groups, index bounds and bloom filters were made under the engine's
    "spark.sql.session.collation.default",
})


def semantic_setting(key: str) -> bool:
    """Does this Spark setting change what a query returns?"""
    k = key.strip().lower()
    return k in _SEMANTIC_KEYS or k.startswith("spark.sql.legacy.")


def switched_on(conf: Mapping[str, str], key: str) -> bool:
    """Is the proxy's session switch `key` (one of classify.PROXY_KEYS) on in these
    settings? (on unless set to false)"""
    return str(conf.get(key, "true")).strip().lower() != "false"


def rewrite_on(conf: Mapping[str, str]) -> bool:
    """Is datamap rewriting switched on in these settings?"""
    return switched_on(conf, REWRITE_KEY)


def prune_on(conf: Mapping[str, str]) -> bool:
    """May index datamaps skip files for this session? Off with `SET datamap.prune.enabled=
    false`, and with `SET datamap.rewrite.enabled=false` (which turns every datamap off)."""
    return rewrite_on(conf) and switched_on(conf, PRUNE_KEY)


def approximate_on(conf: Mapping[str, str]) -> bool:
    """May datamaps answer this session with estimates from stored sketches
    (`SET datamap.rewrite.approximate=true`)? Off unless set."""
    return str(conf.get(APPROXIMATE_KEY, "false")).strip().lower() == "true"


def staleness_budget(conf: Mapping[str, str], default_s: float) -> float:
    """Seconds a datamap's data may be old for this session: its `SET datamap.max_staleness`
    (or the JDBC URL's), else `default_s` ([datamaps] max_staleness). Values in `conf` were
    normalised when set; one that is not (never expected) counts as unset."""
    value = conf.get(MAX_STALENESS_KEY)
    if value is None:
        return default_s
    try:
        return seconds(value)
    except ArithmeticError:
        return default_s


def session_settings(configuration: Mapping[str, str] | None) -> dict[str, str]:
    """The proxy's own settings in an OpenSession's configuration (the JDBC URL's hiveconf
    part arrives as `set:hiveconf:datamap.max_staleness`; PyHive may send the bare key),
    normalised. A bad value is a ClientError (42000) naming it: the client connected asking
    for a freshness bound, and guessing another one, even the server's default, would give
    it answers staler than it agreed to without a word."""
    out: dict[str, str] = {}
    for key, value in (configuration or {}).items():
        if key.split(":")[-1].strip().lower() != MAX_STALENESS_KEY:
            continue
        try:
            out[MAX_STALENESS_KEY] = parse_duration(value)
        except BadDuration as e:
            raise ClientError(f"{e} (in the session's configuration, key {key})",
                              "42000") from None
    return out
