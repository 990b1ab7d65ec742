"""Per-client session state (no I/O). The upstream connection object is attached at
OpenSession (hs2/session_manager.py) but never used from here. The settings keys and their
readers are proxy/session.py's; `track_statement` follows the USE and SET statements Spark
accepted."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from proxy.routing.classify import Kind, classify
from proxy.hs2.handles import HandleRegistry, hex_id
from proxy.hs2.operation import Operation
from proxy.routing.session_keys import (
    BLOCKED_KEY, REWRITE_KEY, rewrite_on, semantic_setting, session_settings,
)


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
        # (proxy/hs2/recovery.py): Spark accepted it, so it will again
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
    user: str                             # whom statements run as (proxy/hs2/identity.py)
    protocol: int                         # negotiated TProtocolVersion (int)
    client_protocol: int
    configuration: dict[str, str] = field(default_factory=dict)   # as sent at OpenSession
    handle: Any = None                    # client-visible THandleIdentifier
    upstream: Any = None                  # proxy.upstream.client.UpstreamSession
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
    admitted_as: tuple[str, str] | None = None   # (user, address) counted by proxy/hs2/limits.py
    reopen: Any = None                    # hs2.recovery.Reopen: what a new upstream session needs

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
