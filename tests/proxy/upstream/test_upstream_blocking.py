"""proxy/upstream/client.py's run_blocking: blocking callers (doctor, the time-zone check) get the
async client's answer whether or not their thread already runs an event loop."""
from __future__ import annotations

import asyncio
import threading

from proxy.upstream.client import run_blocking


async def _where() -> str:
    await asyncio.sleep(0)
    return threading.current_thread().name


def test_without_a_loop_it_runs_in_the_callers_thread():
    assert run_blocking(_where()) == threading.current_thread().name


async def test_inside_a_running_loop_it_runs_in_an_owned_thread_and_joins_it():
    before = threading.active_count()
    assert run_blocking(_where()).startswith("upstream-blocking")
    assert threading.active_count() == before
