"""The run slot of a relayed statement under the running-statement cap (docs/limits.md,
the RunGate of proxy/hs2/limits.py): an async statement that got a slot is relayed like any
other (an UPSTREAM operation), and the slot goes back when the proxy sees it end. A client
that polls frees it itself, through the mirrored state (proxy/hs2/operation_manager.py); for
one that stops looking, a task owned by the operation asks Spark now and then."""
from __future__ import annotations

import asyncio
import time

from proxy.errors import UpstreamError, succeeded
from proxy.hs2.handles import hex_id
from proxy.hs2.operation import OpState, Operation
from proxy.hs2.operation_manager import OperationManager
from proxy.hs2.statement_ops import _RUNNING_STATES
from proxy.thrift.gen.TCLIService import ttypes as T


def hold_while_running(operations: OperationManager, op: Operation) -> None:
    """Hold the run slot `op` took while Spark runs it: a named task owned by the operation
    frees it when the statement ends."""
    op.holds_run_slot = True
    op.task = asyncio.create_task(_watch_slot(operations, op),
                                  name=f"run-slot-{hex_id(op.client_handle.operationId)[:12]}")


async def _watch_slot(operations: OperationManager, op: Operation) -> None:
    """Free the slot of a relayed statement that ended while its client was not looking
    (a client that polls frees it itself, through the mirrored state). Only a statement
    its client has not touched for a while is asked about: a status call holds the
    session's upstream connection for up to Spark's long poll."""
    quiet = max(2.0, operations.long_poll + 1.0)
    conn = op.session.upstream.conn
    try:
        while op.holds_run_slot:
            await asyncio.sleep(quiet)
            if time.monotonic() - op.last_access < quiet or not op.holds_run_slot:
                continue
            st = await asyncio.shield(conn.call("GetOperationStatus", T.TGetOperationStatusReq(
                operationHandle=op.upstream_handle)))
            if succeeded(st.status) and st.operationState in _RUNNING_STATES:
                continue
            if succeeded(st.status) and st.operationState in OpState._value2member_map_:
                op.mirror(OpState(st.operationState))    # mirrored, as for the client
            break
    except UpstreamError:
        pass                  # the connection is gone: so is the statement
    operations.release_run_slot(op)
