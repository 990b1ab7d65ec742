"""Long statements are decided in owned worker threads, off the event loop, by size, so
that one slow decision holds up neither the loop nor short statements."""
from __future__ import annotations

import asyncio
import threading
import time

from proxy.routing.router import INLINE_BYTES, PassThrough, Router, StatementContext, must_not_block


def _ctx():
    return StatementContext("s", "u", "db1", {}, 10)


async def test_long_statements_are_decided_in_owned_workers_off_the_loop():
    seen = []

    def recorder(ctx, sql):
        seen.append((len(sql), threading.current_thread().name, must_not_block()))
        return None
    r = Router(handlers=[recorder])
    try:
        for n in (INLINE_BYTES, INLINE_BYTES + 1, 300_000):
            assert isinstance(await r.decide_async(_ctx(), "x" * n), PassThrough)
    finally:
        r.close()
    main = threading.current_thread().name
    assert seen[0] == (INLINE_BYTES, main, True)
    assert seen[1][1].startswith("decide-small") and seen[1][2] is True
    assert seen[2][1].startswith("decide-large") and seen[2][2] is True
    assert must_not_block()                                     # on the loop itself


async def test_a_long_decision_does_not_hold_up_the_loop_or_short_statements():
    release = threading.Event()

    def slow(ctx, sql):
        if len(sql) > 100_000:
            release.wait(10)       # stands in for seconds of parsing
        return None
    r = Router(handlers=[slow])
    try:
        big = asyncio.ensure_future(r.decide_async(_ctx(), "x" * 300_000))
        await asyncio.sleep(0.05)
        t0 = time.perf_counter()
        await r.decide_async(_ctx(), "select 1")
        await r.decide_async(_ctx(), "y" * 2000)          # its own lane
        assert time.perf_counter() - t0 < 1.0 and not big.done()
        release.set()
        assert isinstance(await big, PassThrough)
    finally:
        release.set()
        r.close()
