"""The one error pipeline jobs raise."""
from __future__ import annotations


class PipelineError(Exception):
    """A pipeline job refused or failed; `sqlstate` per contract.md."""

    def __init__(self, message: str, sqlstate: str = "HY000"):
        super().__init__(message)
        self.sqlstate = sqlstate
