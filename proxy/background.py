"""Background: the threads and tasks one `serve` run starts besides serving, each named and
kept here, stopped and joined when the run shuts down.

Worker threads (warming the rewrite index, rebuilding datamaps, opening the pipeline
session) cannot be interrupted: shutdown waits for them up to a bound, then goes on and
says which are still running (they are daemon threads, so one that is stuck cannot keep
the process alive after that). Periodic tasks run their work in a worker thread; a
cancelled await would not stop that thread, so a task cancelled mid-run waits for the run
(up to its grace) before it ends: Spark must not be stopped under a running job.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from typing import Any, Callable, Coroutine

log = logging.getLogger("proxy.app")

THREAD_STOP_GRACE_S = 30.0


class Background:
    def __init__(self) -> None:
        self._threads: list[threading.Thread] = []
        self._tasks: list[asyncio.Task] = []
        self._lock = threading.Lock()

    def thread(self, name: str, target: Callable[..., Any], *args: Any) -> threading.Thread:
        """Start `target(*args)` in a thread that shutdown joins."""
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        with self._lock:
            self._threads = [x for x in self._threads if x.is_alive()]
            self._threads.append(t)
        t.start()
        return t

    def task(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task:
        """Run `coro` in a task that shutdown cancels and awaits."""
        t = asyncio.create_task(coro, name=name)
        self._tasks.append(t)
        return t

    def periodic(self, name: str, every: float, work: Callable[[], Any], what: str,
                 grace: float) -> asyncio.Task:
        """A task running `work` in a worker thread every `every` seconds; a failed run is
        logged and the next one tries again."""
        return self.task(_every(every, work, what, grace), name)

    def threads(self) -> list[threading.Thread]:
        with self._lock:
            return list(self._threads)

    def _join(self, grace: float) -> list[str]:
        # A thread being joined may start another (the session's opening starts the
        # index warm-up): look again until none is left or the time is up.
        deadline = time.monotonic() + grace
        while True:
            alive = [t for t in self.threads() if t.is_alive()]
            if not alive or time.monotonic() >= deadline:
                return [t.name for t in alive]
            alive[0].join(max(0.0, deadline - time.monotonic()))

    async def stop(self, grace: float = THREAD_STOP_GRACE_S) -> list[str]:
        """Cancel and await the tasks, then join the threads for up to `grace` seconds in
        all. Returns the names of threads still running."""
        tasks, self._tasks = self._tasks, []
        for t in tasks:
            t.cancel()
        for t in tasks:
            try:
                await t
            except asyncio.CancelledError:
                pass
            except Exception:  # noqa: BLE001 - shutting down regardless; logged
                log.warning("background task %s failed", t.get_name(), exc_info=True)
        left = await asyncio.to_thread(self._join, grace)
        if left:
            log.warning("shutting down with background work still running after %gs: %s",
                        grace, ", ".join(left))
        return left




async def _every(every: float, work: Callable[[], Any], what: str, grace: float) -> None:
    while True:
        await asyncio.sleep(every)
        run = asyncio.ensure_future(asyncio.to_thread(work))
        try:
            await asyncio.shield(run)
        except asyncio.CancelledError:
            done, _ = await asyncio.wait([run], timeout=grace)
            if not done:
                log.warning("%s still running at shutdown; not waiting", what)
            elif run.exception() is not None:
                log.warning("%s failed", what, exc_info=run.exception())
            raise
        except Exception:  # noqa: BLE001 - logged; the next period retries
            log.warning("%s failed", what, exc_info=True)
