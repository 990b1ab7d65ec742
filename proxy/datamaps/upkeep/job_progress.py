"""A datamap job's stages and Spark progress in the client's operation log
(proxy/routing/progress.py): CREATE DATAMAP, REBUILD, COMPACT and ADD SEGMENT report

    stage: building segment 3 of default.agg: reading 2 base segment(s) of default.sales, writing its files
    Spark job 12: RUNNING, 5/8 tasks done (2 running), stage 1 of 2
    stage: publishing segment 3 of default.agg (1204 rows, 2 files)
    stage: segment 3 of default.agg published

ADD SEGMENT of an external table (proxy/external/tables.py) reports mapping its files,
indexing them for the table's index datamaps (proxy/datamaps/indexes/commands.py, a Spark
job watched as a build's is) and publishing the segment, then its datamaps' refreshes.

The Spark lines come from the pipeline session's status tracker: the job's Spark work runs
under a job group of its own (a local property of the worker thread, so other jobs of the
shared session are not counted), polled every POLL_S by a thread of its own while the job
runs, a line whenever a job's counts change. Nothing of it runs when no client statement
listens (a background refresh)."""
from __future__ import annotations

import itertools
import logging
import threading
from contextlib import contextmanager
from typing import Any, Iterator

from proxy.routing import progress

log = logging.getLogger("proxy.datamaps")

POLL_S = 1.0
_GROUP_KEY = "spark.jobGroup.id"
_groups = itertools.count(1)


def stage(line: str) -> None:
    progress.report(f"stage: {line}")


@contextmanager
def spark_progress(spark: Any) -> Iterator[None]:
    """Around the Spark work of one datamap job, in the thread that runs it."""
    sink = progress.current()
    if sink is None:
        yield
        return
    sc = spark.sparkContext
    group = f"datamap-proxy-job-{next(_groups)}"
    before = sc.getLocalProperty(_GROUP_KEY)
    sc.setLocalProperty(_GROUP_KEY, group)
    stop = threading.Event()
    watcher = threading.Thread(target=_watch, args=(sc, group, sink, stop),
                               name="datamap-job-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join(POLL_S * 5)
        sc.setLocalProperty(_GROUP_KEY, before)


def _watch(sc, group: str, sink, stop: threading.Event) -> None:
    last: dict[int, str] = {}
    while True:
        stopping = stop.wait(POLL_S)
        try:
            tracker = sc.statusTracker()
            for job in sorted(tracker.getJobIdsForGroup(group)):
                line = _job_line(tracker, job)
                if line is not None and last.get(job) != line:
                    last[job] = line
                    sink(line)
        except Exception as e:  # noqa: BLE001 - progress is a courtesy: the job goes on
            log.debug("cannot read Spark job progress: %s", e)
        if stopping:
            return


def _job_line(tracker, job: int) -> str | None:
    info = tracker.getJobInfo(job)
    if info is None:
        return None
    stages = [s for s in (tracker.getStageInfo(i) for i in info.stageIds) if s is not None]
    total = sum(s.numTasks for s in stages)
    done = sum(s.numCompletedTasks for s in stages)
    running = sum(s.numActiveTasks for s in stages)
    failed = sum(s.numFailedTasks for s in stages)
    finished = sum(1 for s in stages if s.numTasks and s.numCompletedTasks >= s.numTasks)
    extra = f", {failed} failed" if failed else ""
    return (f"Spark job {job}: {info.status}, {done}/{total} tasks done ({running} "
            f"running{extra}), {finished} of {len(info.stageIds)} stage(s) done")
