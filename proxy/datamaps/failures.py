"""What a failed datamap job tells the client, and what it leaves in the log.

A Spark failure reaches us as a pyspark CapturedException (AnalysisException,
ParseException, ...) whose text starts with a newline, or as a Py4JJavaError wrapping a
chain of Java causes, or as our own PipelineError. The client gets the innermost
meaningful message (never an empty one) and a SQLSTATE; the log gets the whole exception,
with its Java stack trace, once, next to the datamap and the statement.
"""
from __future__ import annotations

import logging
import re
from contextvars import ContextVar

from proxy.errors import ClientError

log = logging.getLogger("proxy.datamaps")

# The client statement being served (set by the handlers; asyncio.to_thread carries it into
# the worker thread), so a job failing deep inside a refresh is logged next to it.
STATEMENT: ContextVar[str | None] = ContextVar("datamap_statement", default=None)
_NOT_FOUND = ("TABLE_OR_VIEW_NOT_FOUND", "Table or view not found")
_SPARK_STATE = re.compile(r"\s*SQLSTATE: \w{5}\.?")
_MAX_MESSAGE = 1000


def _first_line(text: str | None) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _chain(exc: BaseException):
    """exc and its causes, outermost first (Python causes, pyspark's converted cause)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = getattr(exc, "_cause", None) or exc.__cause__ or exc.__context__


def _own_text(exc: BaseException) -> str:
    """One exception's message without pyspark's appended JVM stack trace."""
    desc = getattr(exc, "_desc", None)            # pyspark CapturedException
    if desc is not None:
        return _first_line(desc)
    java = getattr(exc, "java_exception", None)   # py4j Py4JJavaError
    if java is not None:
        try:
            return _first_line(str(java.toString()))
        except Exception:  # noqa: BLE001 - the gateway may be gone
            return ""
    return _first_line(str(exc))


def describe(exc: BaseException) -> tuple[str, str]:
    """(message, SQLSTATE) for the client: the first exception in the chain that says
    something, with Spark's SQLSTATE when it gave one; the exception's class otherwise."""
    message, state = "", None
    for e in _chain(exc):
        if isinstance(e, ClientError):
            return str(e) or type(e).__name__, e.sqlstate
        text = _own_text(e)
        if state is None:
            getter = getattr(e, "getSqlState", None)
            try:
                state = getter() if callable(getter) else getattr(e, "sqlstate", None)
            except Exception:  # noqa: BLE001
                state = None
        if text:
            message = text
            break
    if not message:
        message = type(exc).__name__
    if any(m in message for m in _NOT_FOUND):
        state = "42S02"     # contract.md: unknown table
    message = _SPARK_STATE.sub("", message).strip()
    if len(message) > _MAX_MESSAGE:
        message = message[:_MAX_MESSAGE] + " …"
    return message, (state if state and len(state) == 5 else "HY000")


def java_traces(exc: BaseException) -> str:
    """The Java stack traces (with their causes) pyspark captured for the chain; str() of
    its exceptions leaves them out unless spark.sql.pyspark.jvmStacktrace.enabled."""
    traces = [t for t in (getattr(e, "_stackTrace", None) for e in _chain(exc)) if t]
    return "".join(f"\nJVM stacktrace:\n{t}" for t in traces)


def job_failed(exc: BaseException, what: str, statement: str | None = None) -> ClientError:
    """Log the failure of `what` (e.g. "Creating datamap db.x") once, whole, and return the
    ClientError the client sees: "<what> failed: <innermost message>" with a SQLSTATE."""
    message, state = describe(exc)
    statement = statement or STATEMENT.get()
    if not getattr(exc, "_datamap_logged", False):
        log.error("%s failed%s%s", what, f"; statement: {statement}" if statement else "",
                  java_traces(exc), exc_info=exc)
        try:
            exc._datamap_logged = True   # type: ignore[attr-defined]
        except AttributeError:
            pass
    err = ClientError(f"{what} failed: {message}", state)
    err._datamap_logged = True   # type: ignore[attr-defined]
    return err


def logged(exc: BaseException) -> bool:
    """True when job_failed already logged this failure (callers then log one line)."""
    return bool(getattr(exc, "_datamap_logged", False))
