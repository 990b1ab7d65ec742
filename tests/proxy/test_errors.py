"""proxy.errors: the status helper every reply check goes through."""
from proxy.errors import succeeded
from proxy.thrift.gen.TCLIService.ttypes import TStatus, TStatusCode


def test_success_and_success_with_info_succeed_other_codes_and_none_do_not():
    assert succeeded(TStatus(statusCode=TStatusCode.SUCCESS_STATUS))
    assert succeeded(TStatus(statusCode=TStatusCode.SUCCESS_WITH_INFO_STATUS))
    for code in (TStatusCode.STILL_EXECUTING_STATUS, TStatusCode.ERROR_STATUS,
                 TStatusCode.INVALID_HANDLE_STATUS):
        assert not succeeded(TStatus(statusCode=code))
    assert not succeeded(None)
