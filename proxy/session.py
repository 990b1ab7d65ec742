"""Per-client session state (no I/O). The upstream connection object is attached by
service.py but never used from here.

The session's settings (`conf`) change in two ways only: `track_statement` once Spark
accepted a USE or SET, and the `settings` of a Decision the router returned (the proxy's
own `SET datamap.rewrite.enabled`, the block after a result-affecting SET), applied by
service.py, and at OpenSession from the JDBC URL's hiveconf part for
`datamap.max_staleness` (`session_settings`). `rewrite_on` is the one truth test of
datamap.rewrite.enabled, `staleness_budget` the one reading of datamap.max_staleness."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from proxy.routing.classify import APPROXIMATE_KEY, PRUNE_KEY, REWRITE_KEY, Kind, classify
from proxy.errors import ClientError
from proxy.handles import HandleRegistry, hex_id
from proxy.operations import Operation
from proxy.staleness import MAX_STALENESS_KEY, BadDuration, parse_duration, seconds

__all__ = ["APPROXIMATE_KEY", "BLOCKED_KEY", "MAX_STALENESS_KEY", "PRUNE_KEY", "REWRITE_KEY",
           "Session", "approximate_on", "prune_on", "rewrite_on", "semantic_setting",
           "session_settings", "staleness_budget", "switched_on", "track_statement"]
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


def track_statement(session: Any, statement: str) -> None:
    """Follow a statement Spark accepted: USE changes the current database, SET k = v the
    settings (as written). Runs on the event loop: a look at the first words only."""
    stmt = classify(statement)
    if stmt.kind is Kind.USE:
        session.current_db = stmt.database
    elif stmt.kind is Kind.SET and stmt.key is not None:
        if stmt.value is not None:
            session.conf[stmt.key] = stmt.value
        elif statement.split(None, 2)[1].lower() != "time":    # SET key only shows it
            return
        # kept as written, last one per key last, for a new upstream session to replay
        # (proxy/recovery.py): Spark accepted it, so it will again
        sets = session.spark_sets
        sets.pop(stmt.key.lower(), None)
        sets[stmt.key.lower()] = statement.strip().rstrip(";")
    elif stmt.kind is Kind.OTHER:
        words = statement.split(None, 1)
        if words and words[0].lower() == "reset":     # Spark: RESET [key]
            key = words[1].strip().rstrip(";").strip().strip("`").lower() if len(words) > 1 else ""
            if key:
                session.spark_sets.pop(key, None)
            else:
                session.spark_sets.clear()


@dataclass(eq=False)
class Session:
    user: str                             # whom statements run as (proxy/identity.py)
    protocol: int                         # negotiated TProtocolVersion (int)
    client_protocol: int
    configuration: dict[str, str] = field(default_factory=dict)   # as sent at OpenSession
    handle: Any = None                    # client-visible THandleIdentifier
    upstream: Any = None                  # proxy.upstream.UpstreamSession
    current_db: str = "default"
    conf: dict[str, str] = field(default_factory=dict)             # SET k=v the proxy saw
    spark_sets: dict[str, str] = field(default_factory=dict)       # key -> SET Spark accepted
    client_info: dict[str, str] = field(default_factory=dict)
    operations: HandleRegistry[Operation] = field(
        default_factory=lambda: HandleRegistry("OperationHandle"))
    created: float = field(default_factory=time.monotonic)
    last_access: float = field(default_factory=time.monotonic)
    peer: str = "-"
    real_user: str | None = None          # the authenticated user, when it impersonates `user`
    admitted_as: tuple[str, str] | None = None   # (user, address) counted by proxy/limits.py
    reopen: Any = None                    # proxy.recovery.Reopen: what a new upstream session needs

    def __post_init__(self) -> None:
        self.conf.setdefault(REWRITE_KEY, "true")
        for key, value in session_settings(self.configuration).items():
            self.conf.setdefault(key, value)
        for key in self.configuration:
            bare = key.split(":")[-1]     # set:hiveconf:k, set:hivevar:k, or k
            if semantic_setting(bare):
                self.conf.setdefault(BLOCKED_KEY, f"the session was opened with {bare}, "
                                                  "which datamaps were not built with")
        db = self.configuration.get("use:database")
        if db:
            self.current_db = db.strip("`").lower()

    @property
    def id(self) -> str:
        return hex_id(self.handle)

    @property
    def rewrite_enabled(self) -> bool:
        return rewrite_on(self.conf)

    @property
    def columnar(self) -> bool:
        """Result sets are columnar from V6 (index 5) on."""
        return self.protocol >= 5

    def touch(self) -> None:
        self.last_access = time.monotonic()

    def idle_for(self, now: float) -> float:
        """Seconds since last use; a session with running operations is never idle."""
        if any(op.state.running for op in self.operations.values()):
            return 0.0
        return now - self.last_access
