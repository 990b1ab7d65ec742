"""Waiting on a condition instead of sleeping a fixed time: `wait_until` polls until the
condition holds, and fails naming what it waited for when the deadline passes."""
from __future__ import annotations

import time
from typing import Callable, TypeVar

T = TypeVar("T")


def wait_until(cond: Callable[[], T], timeout: float = 30.0, what: str = "the condition",
               interval: float = 0.05, detail: Callable[[], object] | None = None) -> T:
    """cond()'s first true value, asked every `interval` seconds; AssertionError after
    `timeout` seconds, with `detail()` (the state a reader needs) when given."""
    deadline = time.monotonic() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.monotonic() >= deadline:
            extra = f": {detail()}" if detail is not None else ""
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}{extra}")
        time.sleep(interval)
