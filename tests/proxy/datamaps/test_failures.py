"""What a failed datamap job tells the client (proxy/datamaps/failures.py): never an empty
message; the innermost meaningful one, with Spark's SQLSTATE. Pure logic: the exceptions
are shaped like pyspark's (a `_desc` that starts with a newline, `getSqlState`)."""
from proxy.datamaps.failures import describe, job_failed, logged
from proxy.errors import ClientError


class Captured(Exception):
    """Shaped like pyspark's CapturedException."""

    def __init__(self, desc, state=None, cause=None, trace="org.apache.spark.X\n\tat a.b(c)"):
        super().__init__(desc)
        self._desc, self._state, self._cause, self._stackTrace = desc, state, cause, trace

    def getSqlState(self):
        return self._state

    def __str__(self):
        return self._desc


def test_leading_newline_is_not_the_message():
    e = Captured("\n[PARSE_SYNTAX_ERROR] Syntax error at or near ','. SQLSTATE: 42601 (line 1, pos 53)"
                 "\n\n== SQL ==\nCREATE TABLE x", "42601")
    assert describe(e) == ("[PARSE_SYNTAX_ERROR] Syntax error at or near ','. (line 1, pos 53)", "42601")


def test_empty_text_falls_through_to_the_cause_then_the_class():
    assert describe(Captured("", cause=Captured("\n[DIVIDE_BY_ZERO] x", "22012")))[0] == "[DIVIDE_BY_ZERO] x"
    assert describe(Captured("")) == ("Captured", "HY000")
    assert describe(RuntimeError()) == ("RuntimeError", "HY000")


def test_missing_table_is_42S02_and_client_errors_pass_through():
    assert describe(Captured("[TABLE_OR_VIEW_NOT_FOUND] The table `x` cannot be found.", "42P01"))[1] == "42S02"
    assert describe(ClientError("no such datamap", "42S02")) == ("no such datamap", "42S02")


def test_job_failed_logs_once(caplog):
    e = Captured("\n[CAST_INVALID_INPUT] bad", "22018")
    with caplog.at_level("ERROR", logger="proxy.datamaps"):
        err = job_failed(e, "Building datamap db.x", "CREATE DATAMAP x ...")
        job_failed(e, "Creating datamap db.x")
    assert str(err) == "Building datamap db.x failed: [CAST_INVALID_INPUT] bad" and err.sqlstate == "22018"
    assert len(caplog.records) == 1 and "CREATE DATAMAP x" in caplog.records[0].getMessage()
    assert "JVM stacktrace:\norg.apache.spark.X" in caplog.records[0].getMessage()
    assert logged(err) and logged(e)
