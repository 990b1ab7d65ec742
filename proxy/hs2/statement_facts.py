"""What the statement event (proxy/observability/observe.py) says of an ExecuteStatement, for the
statement runner (proxy/hs2/statements.py): when it arrived, what was decided (decision
kind, datamaps, why not), its duration to the end first seen, the rows it sent and the
client tool.

The facts of the ExecuteStatement being handled live in a context variable: its
operation takes them when registered, a statement that ends before it has one logs them,
and the tasks an ExecuteStatement starts (local, hooked, gated) see their own statement's.
"""
from __future__ import annotations

import contextvars
import dataclasses
import time
from contextlib import contextmanager
from dataclasses import dataclass

from proxy.observability.observe import FORWARDED, StatementEvent

# the statement event's outcomes; a statement closed before its end was seen is CLOSED
_OUTCOMES = frozenset({"FINISHED", "ERROR", "CANCELED", "TIMEDOUT", "REFUSED"})
# OpenSession configuration keys naming the client tool (compared lower-cased, bare)
_CLIENT_KEYS = ("applicationname", "application_name", "appname")


@dataclass(frozen=True, slots=True)
class Facts:
    arrived: float                       # time.monotonic() when ExecuteStatement arrived
    at: float                            # time.time(), the same moment
    decision: str = FORWARDED
    datamaps: tuple[str, ...] = ()
    why_not: tuple[tuple[str, str], ...] = ()
    not_served: str = ""


_FACTS: contextvars.ContextVar[Facts | None] = contextvars.ContextVar("statement_facts",
                                                                      default=None)


@contextmanager
def arriving():
    """Around the handling of one ExecuteStatement."""
    token = _FACTS.set(Facts(time.monotonic(), time.time()))
    try:
        yield
    finally:
        _FACTS.reset(token)


def current() -> Facts | None:
    return _FACTS.get()


def decided(decision: str, datamaps: tuple[str, ...] = (),
            why_not: tuple[tuple[str, str], ...] = (), not_served: str = "") -> None:
    """Record what was decided for the ExecuteStatement being handled."""
    facts = _FACTS.get()
    if facts is not None:
        _FACTS.set(dataclasses.replace(facts, decision=decision, datamaps=tuple(datamaps),
                                       why_not=tuple(why_not), not_served=not_served))


def timing(op) -> tuple[Facts, float]:
    """The facts of `op` (an Operation, or None: the statement being handled) and its
    duration: from its arrival to the end first seen, else to now."""
    now = time.monotonic()
    facts = (op.facts if op is not None else None) or _FACTS.get() or Facts(now, time.time())
    ended = op.ended_at if op is not None and op.ended_at is not None else now
    return facts, max(0.0, ended - (op.arrived if op is not None else facts.arrived))


def event(session, op, facts: Facts, duration: float, label: str, state: str,
          statement: str, sqlstate: str | None, operation: str | None = None) -> StatementEvent:
    """`operation`: the proxy's operation id (hex), None when the statement has none."""
    return StatementEvent(
        at=facts.at, session_id=session.id, user=session.user, client=client_tool(session),
        statement=statement or "", current_db=session.current_db, decision=facts.decision,
        datamaps=facts.datamaps, why_not=facts.why_not, not_served=facts.not_served,
        duration_s=duration,
        rows=op.rows if op is not None else None,
        outcome=state if state in _OUTCOMES else "CLOSED", sqlstate=sqlstate, note=label,
        real_user=session.real_user, peer=session.peer, operation=operation)


def client_tool(session) -> str:
    """The client tool: Hive JDBC's SetClientInfo ApplicationName, else such a key of the
    OpenSession configuration, else ""."""
    name = session.client_info.get("ApplicationName")
    if name:
        return name
    for key, value in (session.configuration or {}).items():
        if key.rpartition(":")[2].lower() in _CLIENT_KEYS and value:
            return value
    return ""
