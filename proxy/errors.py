"""Three error families and the ONE place that turns any exception into a TStatus.

ClientError    the client asked for something wrong (bad handle, bad SET value, rejected
               statement): ERROR status with our message and SQLSTATE.
UpstreamError  Spark said no (its TStatus is passed through untouched) or could not be
               reached (SQLSTATE 08S01, communication link failure).
InternalError  a bug or an unexpected state in the proxy: SQLSTATE HY000; logged with a
               traceback by the caller.
"""
from __future__ import annotations

import logging

from proxy.logsafe import redact
from proxy.thrift.gen.TCLIService.ttypes import TStatus, TStatusCode

log = logging.getLogger("proxy.errors")

OK_STATUS = TStatus(statusCode=TStatusCode.SUCCESS_STATUS)
_SUCCESS_CODES = (TStatusCode.SUCCESS_STATUS, TStatusCode.SUCCESS_WITH_INFO_STATUS)


def succeeded(status: TStatus | None) -> bool:
    """Whether a reply's status means the call worked (SUCCESS_WITH_INFO counts: HS2 uses it
    for warnings); a missing status does not."""
    return status is not None and status.statusCode in _SUCCESS_CODES


class ProxyError(Exception):
    sqlstate = "HY000"


class ClientError(ProxyError):
    def __init__(self, message: str, sqlstate: str = "42000", error_code: int = 0):
        super().__init__(message)
        self.sqlstate = sqlstate
        self.error_code = error_code


class InvalidHandle(ClientError):
    """HiveServer2 reports unknown handles as ERROR "Invalid SessionHandle/OperationHandle"."""

    def __init__(self, kind: str, detail: str = ""):
        super().__init__(f"Invalid {kind}{': ' + detail if detail else ''}", "HY000")


class UpstreamError(ProxyError):
    def __init__(self, message: str, status: TStatus | None = None, sqlstate: str = "08S01"):
        super().__init__(message)
        self.status = status
        self.sqlstate = status.sqlState if status is not None and status.sqlState else sqlstate


class InternalError(ProxyError):
    def __init__(self, message: str):
        super().__init__(message)


def to_status(exc: BaseException) -> TStatus:
    """Any exception -> the TStatus the client sees. Never raises. The proxy's own messages
    have their secrets masked (a statement or a URL quoted in them); upstream's pass as
    they came."""
    if isinstance(exc, UpstreamError) and exc.status is not None:
        return exc.status
    if isinstance(exc, ClientError):
        return TStatus(statusCode=TStatusCode.ERROR_STATUS, sqlState=exc.sqlstate,
                       errorCode=exc.error_code, errorMessage=redact(exc) or type(exc).__name__)
    if isinstance(exc, UpstreamError):
        return TStatus(statusCode=TStatusCode.ERROR_STATUS, sqlState=exc.sqlstate,
                       errorCode=0, errorMessage=redact(exc) or type(exc).__name__)
    if isinstance(exc, InternalError):
        message = f"Internal proxy error: {exc}"
    else:
        message = f"Internal proxy error: {type(exc).__name__}: {exc}"
    return TStatus(statusCode=TStatusCode.ERROR_STATUS, sqlState="HY000", errorCode=0,
                   errorMessage=redact(message))
