"""SessionSlots: global and per-user caps on upstream sessions, bounded FIFO queue."""
import asyncio

import pytest

from proxy.upstream.slots import SessionSlots, TooManySessions


async def test_global_cap_queues_in_order_and_release_hands_over():
    s = SessionSlots(total=2, per_user=0, queue_size=5, queue_timeout=5)
    await s.acquire("a")
    await s.acquire("b")
    order = []

    async def wait(user):
        await s.acquire(user)
        order.append(user)
    tasks = [asyncio.create_task(wait(u), name=f"w-{u}") for u in ("c", "d")]
    await asyncio.sleep(0)
    assert s.waiting == 2 and not order
    s.release("a")
    await asyncio.sleep(0)
    assert order == ["c"] and s.active == 2
    s.release("b")
    await asyncio.gather(*tasks)
    assert order == ["c", "d"] and s.waiting == 0
    s.release("c"), s.release("d")
    assert s.active == 0 and not s.by_user       # no state left behind per user


async def test_per_user_cap_does_not_hold_back_other_users():
    s = SessionSlots(total=3, per_user=1, queue_size=5, queue_timeout=5)
    await s.acquire("bob")
    waiter = asyncio.create_task(s.acquire("bob"), name="bob-2")
    await asyncio.sleep(0)
    await asyncio.wait_for(s.acquire("amy"), 1)  # amy passes bob's waiting request
    assert not waiter.done()
    s.release("amy")                             # a global slot frees: still bob's cap
    await asyncio.sleep(0)
    assert not waiter.done()
    s.release("bob")
    await asyncio.wait_for(waiter, 1)
    assert s.by_user["bob"] == 1


async def test_full_queue_and_timeout_are_clear_errors():
    s = SessionSlots(total=1, per_user=0, queue_size=1, queue_timeout=0.2)
    await s.acquire("a")
    waiter = asyncio.create_task(s.acquire("b"), name="b")
    await asyncio.sleep(0)
    with pytest.raises(TooManySessions) as full:
        await s.acquire("c")
    assert full.value.sqlstate == "53300"
    assert "max_sessions" in str(full.value) and "session_queue_size = 1" in str(full.value)
    with pytest.raises(TooManySessions) as late:
        await waiter
    assert "within 0.2s" in str(late.value) and s.waiting == 0 and s.active == 1


async def test_per_user_error_names_user_escaped():
    s = SessionSlots(total=0, per_user=1, queue_size=0, queue_timeout=1)
    await s.acquire("ev\nil")
    with pytest.raises(TooManySessions) as e:
        await s.acquire("ev\nil")
    assert "user 'ev\\nil' already has 1 open" in str(e.value) and "\n" not in str(e.value)
    assert "max_sessions_per_user" in str(e.value)


async def test_cancelled_waiter_leaves_the_queue_and_a_granted_one_gives_back():
    s = SessionSlots(total=1, per_user=0, queue_size=3, queue_timeout=5)
    await s.acquire("a")
    gone = asyncio.create_task(s.acquire("b"), name="gone")
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert s.waiting == 0
    granted = asyncio.create_task(s.acquire("c"), name="granted")
    await asyncio.sleep(0)
    s.release("a")              # slot handed to c ...
    granted.cancel()            # ... which is cancelled before it runs
    with pytest.raises(asyncio.CancelledError):
        await granted
    assert s.active == 0 and not s.by_user


async def test_release_of_unknown_user_is_harmless():
    s = SessionSlots(total=1, per_user=0, queue_size=0, queue_timeout=0)
    s.release("nobody")
    await s.acquire("x")
    assert s.active == 1
