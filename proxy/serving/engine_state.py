"""The serving engine's life as a state machine (proxy/serving/tier.py moves it): NOT_STARTED
-> UP, or -> DOWN when it cannot start (cause and fix), DOWN -> UP or DOWN when started
again, any -> CLOSED; and serve's ERROR line for an engine that cannot start."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from proxy.serving.engine import EngineUnavailable

RETRY_S = 60.0          # a DOWN engine is started again this often (in the background)


class EngineState(Enum):
    NOT_STARTED = "not started"
    UP = "up"                  # started, and answered its check query
    DOWN = "down"              # the last start failed: EngineStatus.cause
    CLOSED = "closed"


# the moves start / retry / close make (anything else is a bug: _move raises)
_MOVES = {EngineState.NOT_STARTED: {EngineState.UP, EngineState.DOWN, EngineState.CLOSED},
          EngineState.DOWN: {EngineState.UP, EngineState.DOWN, EngineState.CLOSED},
          EngineState.UP: {EngineState.CLOSED},
          EngineState.CLOSED: set()}


@dataclass(frozen=True)
class EngineStatus:
    """The engine's state; when DOWN, why (`cause`, `fix`) and since when (epoch s)."""
    state: EngineState
    cause: str = ""
    fix: str = ""
    since: float | None = None
    engine: str = "DuckDB"     # with its version once known

    @property
    def up(self) -> bool:
        return self.state is EngineState.UP


def start_error_line(e: EngineUnavailable) -> str:
    """serve's ERROR line for an engine that cannot start."""
    return (f"the serving engine ({e.engine}) could not start: {e.cause}; fix: {e.fix}; "
            f"datamap answers come from Spark until it starts (tried again every "
            f"{RETRY_S:g} s)")
