"""The pipeline SparkSession, opened lazily: pipeline jobs need it, serving does not.

In remote mode it is a JVM of our own (proxy/engine/spark.py open_pipeline_session), started by
the first statement that needs it, in a worker thread, or in the background at start when
the catalog already holds datamaps. The event loop never opens it: a handler running on
the loop (or in a worker deciding a statement for it, proxy/routing/router.py) that would need it
gets SparkNotReady, forwards the original statement (always correct, only slower), and
the session is opened in the background.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable

from proxy.background import Background
from proxy.routing import progress
from proxy.routing.router import must_not_block

log = logging.getLogger("proxy.app")


class SparkNotReady(RuntimeError):
    """The pipeline session is not open yet and the caller runs on the event loop."""
    forward_quietly = True   # DatamapSelectHandler: forward the original, log at INFO


class LazySpark:
    """The pipeline SparkSession, created once on first use (thread-safe). `opener()` blocks
    (starts a JVM); `on_open(session)` runs once right after, still in the opening thread."""

    def __init__(self, opener: Callable[[], Any], on_open: Callable[[Any], None] | None = None,
                 closer: Callable[[Any], None] | None = None,
                 background: Background | None = None):
        self._opener = opener
        self._on_open = on_open
        self._closer = closer
        self._background = background or Background()
        self._session: Any = None
        self._ready = False
        self._in_open = False
        self._lock = threading.RLock()
        self._warming: threading.Thread | None = None
        self.error: BaseException | None = None

    def after_open(self, hook: Callable[[Any], None]) -> None:
        """Set on_open once its users exist (they are built on this provider), before the
        session is first asked for."""
        with self._lock:
            if self._ready or self._in_open:
                raise RuntimeError("the pipeline session is already open")
            self._on_open = hook

    @property
    def ready(self) -> bool:
        return self._ready

    def get(self) -> Any:
        if self._ready:
            return self._session
        if must_not_block():          # the loop, or a worker deciding a statement for it
            self.warm()
            raise SparkNotReady("the pipeline Spark session is still starting")
        t0 = time.monotonic()
        with self._lock:
            if self._ready or self._in_open:   # _in_open: on_open itself uses the session
                if not self._in_open:     # opened by another thread while this one waited
                    progress.report(f"stage: the pipeline Spark session is open (waited "
                                    f"{time.monotonic() - t0:.1f} s)")
                return self._session
            log.info("opening the pipeline Spark session")
            progress.report("stage: opening the pipeline Spark session")
            self._session = self._opener()
            self._in_open = True
            try:
                if self._on_open is not None:
                    self._on_open(self._session)
            finally:
                self._in_open = False
                self._ready = True
        progress.report(f"stage: the pipeline Spark session is open "
                        f"({time.monotonic() - t0:.1f} s)")
        return self._session

    __call__ = get

    def warm(self) -> None:
        """Open the session in a background thread (no-op when open or opening)."""
        if self._ready or (self._warming is not None and self._warming.is_alive()):
            return

        def run() -> None:
            try:
                self.get()
                self.error = None
            except Exception as e:  # noqa: BLE001 - reported; the next user retries
                self.error = e
                log.warning("opening the pipeline Spark session failed: %s", e, exc_info=True)
        self._warming = self._background.thread("pipeline-session", run)

    def close(self) -> None:
        with self._lock:
            session, self._session, self._ready = self._session, None, False
        if session is not None and self._closer is not None:
            self._closer(session)
