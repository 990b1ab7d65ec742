"""Operation state machine (TOperationState values on the wire) and the proxy's
per-operation record.

Transitions are written out; anything else is a bug (InternalError). Pass-through
operations mirror upstream's state; the proxy drives the state itself only for local
operations and for pass-through operations with an `after` hook.
"""
from __future__ import annotations

import enum
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from proxy.errors import InternalError
from proxy.thrift.gen.TCLIService.ttypes import TOperationState


class OpState(enum.IntEnum):
    INITIALIZED = TOperationState.INITIALIZED_STATE
    RUNNING = TOperationState.RUNNING_STATE
    FINISHED = TOperationState.FINISHED_STATE
    CANCELED = TOperationState.CANCELED_STATE
    CLOSED = TOperationState.CLOSED_STATE
    ERROR = TOperationState.ERROR_STATE
    UNKNOWN = TOperationState.UKNOWN_STATE
    PENDING = TOperationState.PENDING_STATE
    TIMEDOUT = TOperationState.TIMEDOUT_STATE

    @property
    def terminal(self) -> bool:
        return self in TERMINAL

    @property
    def running(self) -> bool:
        return self in (OpState.INITIALIZED, OpState.PENDING, OpState.RUNNING)


TERMINAL = frozenset({OpState.FINISHED, OpState.CANCELED, OpState.CLOSED, OpState.ERROR,
                      OpState.TIMEDOUT})

# add_log: lines come from worker threads (one lock for all: a line is rare and quick)
_LOG_LOCK = threading.Lock()
_ENDINGS = {OpState.FINISHED, OpState.CANCELED, OpState.CLOSED, OpState.ERROR, OpState.TIMEDOUT}
TRANSITIONS: dict[OpState, frozenset[OpState]] = {
    OpState.INITIALIZED: frozenset({OpState.PENDING, OpState.RUNNING} | _ENDINGS),
    OpState.PENDING: frozenset({OpState.RUNNING} | _ENDINGS),
    OpState.RUNNING: frozenset(_ENDINGS),
    OpState.FINISHED: frozenset({OpState.CLOSED}),
    OpState.CANCELED: frozenset({OpState.CLOSED}),
    OpState.ERROR: frozenset({OpState.CLOSED}),
    OpState.TIMEDOUT: frozenset({OpState.CLOSED}),
    OpState.CLOSED: frozenset(),
    OpState.UNKNOWN: frozenset({OpState.CLOSED}),
}


def can_move(src: OpState, dst: OpState) -> bool:
    return dst in TRANSITIONS[src]


class OpKind(enum.Enum):
    UPSTREAM = "upstream"        # pass-through: upstream owns the state
    HOOKED = "hooked"            # pass-through/rewrite with an `after` hook: proxy drives state
    LOCAL = "local"              # answered by the proxy


@dataclass(eq=False)
class Operation:
    kind: OpKind
    op_type: int                          # TOperationType
    statement: str = ""
    upstream_handle: Any = None           # TOperationHandle on the upstream session
    has_result_set: bool = True
    state: OpState = OpState.INITIALIZED
    error: Any = None                     # TStatus describing the failure (ERROR state)
    result: Any = None                    # proxy.thrift.rowsets.LocalRowSource for local results
    decision: str = "pass"                # for the statement log line
    last_access: float = field(default_factory=time.monotonic)
    task: Any = None                      # asyncio.Task running a local/hooked operation
    client_handle: Any = None             # TOperationHandle the client holds
    session: Any = None                   # proxy.hs2.session.Session owning this operation
    done: Any = None                      # asyncio.Event set when a proxy-driven op ends
    started_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    completed_ms: int | None = None
    # the proxy's lines of the operation log, each sent once; a local statement's progress
    # (proxy/routing/progress.py) is added while it runs, by its worker thread
    log_lines: tuple[str, ...] = ()
    log_sent: int = 0                     # how many of them were sent
    holds_run_slot: bool = False          # counted by the RunGate (hs2/limits.py) until it ends
    lost: Any = None                      # TStatus once its upstream session is gone (recovery.py)
    # the statement event (proxy/observability/observe.py): from ExecuteStatement's arrival
    # to the end first seen (time.monotonic()), rows sent to the client, and what was decided
    arrived: float = field(default_factory=time.monotonic)
    ended_at: float | None = None
    rows: int | None = None
    facts: Any = None                     # proxy.hs2.statement_facts.Facts

    def mirror(self, state: "OpState") -> None:
        """Take upstream's state as reported (no transition check: Spark drives it)."""
        self.state = state
        if state.terminal and self.ended_at is None:
            self.ended_at = time.monotonic()

    def count_rows(self, n: int | None) -> None:
        if n is not None:
            self.rows = (self.rows or 0) + n

    def to(self, dst: OpState) -> None:
        if dst == self.state:
            return
        if not can_move(self.state, dst):
            raise InternalError(f"operation cannot go from {self.state.name} to {dst.name}")
        self.state = dst
        if dst.terminal and self.completed_ms is None:
            self.completed_ms = int(time.time() * 1000)
        if dst.terminal and self.ended_at is None:
            self.ended_at = time.monotonic()

    def add_log(self, line: str) -> None:
        """One more line of the operation log, from any thread (a job's and its progress
        watcher's): the tuple is replaced whole, so a reader sees it before or after."""
        with _LOG_LOCK:
            self.log_lines = self.log_lines + (line,)

    def touch(self) -> None:
        self.last_access = time.monotonic()
