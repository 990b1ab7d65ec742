"""proxy/hs2/limits.py: HiveServer2's session limits, the running-operation gate and its FIFO
line, the query-timeout rule (pure logic)."""
import asyncio

import pytest

from proxy.hs2.limits import (RunGate, RunQueueError, SessionLimitReached, SessionLimits,
                          client_address, effective_timeout)


async def settle():
    for _ in range(5):          # a grant reaches its waiter through a shielded future
        await asyncio.sleep(0)


def test_session_limits_per_user_with_hive_text_and_key():
    lim = SessionLimits(per_user=2)
    lim.admit("alice", "10.0.0.1")
    lim.admit("alice", "10.0.0.2")
    with pytest.raises(SessionLimitReached) as e:
        lim.admit("alice", "10.0.0.3")
    assert str(e.value) == ("Connection limit per user reached (user: alice limit: 2); "
                            "[server] limit_connections_per_user")
    assert e.value.sqlstate == "08004"
    lim.admit("bob", "10.0.0.1")                 # other users are not affected
    lim.release("alice", "10.0.0.1")
    lim.admit("alice", "10.0.0.3")


def test_session_limits_per_address_and_per_user_address():
    lim = SessionLimits(per_address=2, per_user_address=1)
    lim.admit("alice", "10.0.0.1")
    with pytest.raises(SessionLimitReached, match=r"per user:ipaddress reached \(user:ipaddress: "
                       r"alice:10.0.0.1 limit: 1\); \[server\] limit_connections_per_user_ipaddress"):
        lim.admit("alice", "10.0.0.1")
    lim.admit("bob", "10.0.0.1")
    with pytest.raises(SessionLimitReached, match=r"per ipaddress reached \(ipaddress: 10.0.0.1 "
                       r"limit: 2\); \[server\] limit_connections_per_ipaddress"):
        lim.admit("carol", "10.0.0.1")
    lim.admit("alice", "10.0.0.2")


def test_session_limits_release_leaves_nothing_and_zero_means_no_cap():
    lim = SessionLimits()
    for i in range(1000):
        lim.admit("u", f"a{i % 7}")
    for i in range(1000):
        lim.release("u", f"a{i % 7}")
    assert lim.open_sessions() == 0 and not (lim._users or lim._addresses or lim._pairs)


def test_lowering_a_session_limit_keeps_open_sessions_and_refuses_new_ones():
    lim = SessionLimits(per_user=3)
    for _ in range(3):
        lim.admit("alice", "h")
    lim.update(1, 0, 0)
    with pytest.raises(SessionLimitReached):
        lim.admit("alice", "h")
    assert lim.open_sessions() == 3
    for _ in range(2):
        lim.release("alice", "h")
    with pytest.raises(SessionLimitReached):
        lim.admit("alice", "h")
    lim.release("alice", "h")
    lim.admit("alice", "h")


def test_client_address_and_effective_timeout():
    assert client_address("10.0.0.7:51234") == "10.0.0.7"
    assert client_address("[::1]:51234") == "::1"
    assert client_address("::1:51234") == "::1"
    assert client_address("-") == "-"
    assert effective_timeout(0, 0) is None and effective_timeout(0, None) is None
    assert effective_timeout(30, 0) == 30 and effective_timeout(0, 5) == 5
    assert effective_timeout(30, 5) == 5 and effective_timeout(3, 5) == 3


async def test_run_gate_fifo_line_and_full_line():
    g = RunGate(limit=1, queue_size=2, queue_timeout=5)
    assert g.enter() is None                      # a slot at once
    first, second = g.enter(), g.enter()
    with pytest.raises(RunQueueError) as e:
        g.enter()
    assert e.value.sqlstate == "53000"
    assert "max_running_operations" in str(e.value) and "operation_queue_size = 2" in str(e.value)
    order = []

    async def run(name, fut):
        await g.wait(fut)
        order.append(name)
    tasks = [asyncio.create_task(run(n, f), name=f"w-{n}") for n, f in (("b", second), ("a", first))]
    await settle()
    g.release()
    await settle()
    assert order == ["a"] and g.running == 1 and g.waiting == 1
    g.release()
    await asyncio.gather(*tasks)
    assert order == ["a", "b"] and g.running == 1
    g.release()
    assert g.running == 0


async def test_run_gate_wait_times_out_and_leaves_the_line():
    g = RunGate(limit=1, queue_size=5, queue_timeout=0.05)
    g.enter()
    fut = g.enter()
    with pytest.raises(RunQueueError, match="operation_queue_timeout"):
        await g.wait(fut)
    assert g.waiting == 0 and g.running == 1


async def test_run_gate_cancelled_waiter_leaves_and_slot_goes_to_the_next():
    g = RunGate(limit=1, queue_size=5, queue_timeout=5)
    g.enter()
    gone, kept = g.enter(), g.enter()
    t_gone = asyncio.create_task(g.wait(gone), name="gone")
    t_kept = asyncio.create_task(g.wait(kept), name="kept")
    await settle()
    t_gone.cancel()
    await settle()
    assert g.waiting == 1
    g.release()
    await asyncio.wait_for(t_kept, 1)
    assert g.running == 1 and g.waiting == 0


async def test_run_gate_update_lets_waiters_in_and_a_lower_limit_keeps_running_ones():
    g = RunGate(limit=1, queue_size=5, queue_timeout=5)
    g.enter()
    fut = g.enter()
    g.update(2, 5, 5)                             # SIGHUP raised the cap
    await asyncio.wait_for(g.wait(fut), 1)
    assert g.running == 2
    g.update(1, 5, 5)                             # lowered: both keep running
    assert g.running == 2
    late = g.enter()
    assert late is not None                       # the next one queues
    g.release()
    await settle()
    assert not late.done()                        # 1 running = the new cap: still waits
    g.release()
    await asyncio.wait_for(g.wait(late), 1)


async def test_run_gate_zero_queue_timeout_refuses_instead_of_queueing():
    g = RunGate(limit=1, queue_size=5, queue_timeout=0)
    g.enter()
    with pytest.raises(RunQueueError, match="queue is full"):
        g.enter()


def test_a_statement_refused_by_a_full_queue_is_audited_as_an_error(tmp_path):
    # limits (gated.py) x audit (audit_log.py): the audit line must say it failed, and why
    import json

    from proxy.config import ServerSettings, Settings
    from proxy.routing.router import Router
    from proxy.hs2.frontend import Frontend
    from proxy.hs2.session import Session
    from proxy.observability.audit_log import AuditLog
    from proxy.observability.observe import Observers
    from proxy.thrift.gen.TCLIService import ttypes as T

    audit = tmp_path / "audit.jsonl"
    audit_log = AuditLog(str(audit))
    service = Frontend(Settings(server=ServerSettings(
        max_running_operations=1, operation_queue_size=0)), Router(),
        observers=Observers(audit_log))
    assert service.run_gate.enter() is None            # the one slot is taken
    session = Session(user="alice", protocol=10, client_protocol=10)
    req = T.TExecuteStatementReq(statement="SELECT 1", runAsync=True)
    with pytest.raises(RunQueueError):
        asyncio.run(service.statement_runner._execute_gated(session, req, "SELECT 1", "pass", 1))
    audit_log.close()
    [line] = [json.loads(x) for x in audit.read_text().splitlines()]
    assert (line["event"], line["outcome"], line["sqlstate"]) == ("statement", "error", "53000")
