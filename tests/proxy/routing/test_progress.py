"""A local statement's progress (proxy/routing/progress.py) in its operation log, without
Spark: the sink reaches the worker thread a datamap job runs in, each line is sent once
as the client polls (the lines of a running statement keep coming), and the Spark job line
of proxy/datamaps/upkeep/job_progress.py from status-tracker values. (A real CREATE DATAMAP
through beeline and PyHive: tests/e2e/test_build_progress.py.)"""
from __future__ import annotations

import asyncio
from types import SimpleNamespace

from proxy.config import Settings
from proxy.datamaps.upkeep.job_progress import _job_line, stage
from proxy.hs2.handles import HandleRegistry
from proxy.hs2.limits import RunGate
from proxy.hs2.operation import OpKind, OpState, Operation
from proxy.hs2.operation_manager import OperationManager
from proxy.hs2.session import Session
from proxy.observability.observe import Observers
from proxy.routing import progress
from proxy.thrift.gen.TCLIService import ttypes as T


def test_the_sink_reaches_the_jobs_worker_thread():
    seen: list[str] = []

    def job():
        stage("opening the pipeline Spark session")
        progress.report("Spark job 1: RUNNING, 0/2 tasks done (2 running), 0 of 1 stage(s) done")

    async def statement():
        with progress.reporting(seen.append):
            await asyncio.to_thread(job)
        await asyncio.to_thread(job)          # no statement listens: nothing, no error
    asyncio.run(statement())
    assert seen == ["stage: opening the pipeline Spark session",
                    "Spark job 1: RUNNING, 0/2 tasks done (2 running), 0 of 1 stage(s) done"]


def _log(manager: OperationManager, handle) -> list[str]:
    resp = asyncio.run(manager.fetch_results(None, "FetchResults", T.TFetchResultsReq(
        operationHandle=handle, orientation=T.TFetchOrientation.FETCH_NEXT, maxRows=100,
        fetchType=1), 0))
    if resp.results.columns:          # a columnar session (protocol V6 and up)
        return list(resp.results.columns[0].stringVal.values)
    return [r.colVals[0].stringVal.value for r in resp.results.rows]


def test_a_running_statements_lines_are_sent_once_each_as_they_come():
    settings = Settings()
    manager = OperationManager(settings, RunGate(0, 0, 0), observers=Observers())
    session = Session(user="me", protocol=5, client_protocol=5, handle=SimpleNamespace())
    op = Operation(OpKind.LOCAL, T.TOperationType.EXECUTE_STATEMENT, statement="CREATE DATAMAP")
    handle = manager.register(session, op, None, T.TOperationType.EXECUTE_STATEMENT, True)
    op.to(OpState.RUNNING)
    op.add_log("stage: opening the pipeline Spark session")
    assert _log(manager, handle) == ["stage: opening the pipeline Spark session"]
    assert _log(manager, handle) == []
    op.add_log("stage: building datamap default.agg: segment 0 reads ...")
    op.add_log("Spark job 3: RUNNING, 1/4 tasks done (3 running), 0 of 2 stage(s) done")
    assert _log(manager, handle) == [
        "stage: building datamap default.agg: segment 0 reads ...",
        "Spark job 3: RUNNING, 1/4 tasks done (3 running), 0 of 2 stage(s) done"]


def test_the_spark_job_line():
    stages = {7: SimpleNamespace(numTasks=4, numCompletedTasks=4, numActiveTasks=0,
                                 numFailedTasks=0),
              8: SimpleNamespace(numTasks=3, numCompletedTasks=1, numActiveTasks=2,
                                 numFailedTasks=1)}
    tracker = SimpleNamespace(
        getJobInfo=lambda job: SimpleNamespace(status="RUNNING", stageIds=[7, 8, 9]),
        getStageInfo=stages.get)
    assert _job_line(tracker, 12) == ("Spark job 12: RUNNING, 5/7 tasks done (2 running, "
                                      "1 failed), 1 of 3 stage(s) done")
    assert _job_line(SimpleNamespace(getJobInfo=lambda job: None), 12) is None
