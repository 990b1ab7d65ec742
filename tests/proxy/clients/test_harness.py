"""Unit tests of the harness's pure logic (no Spark): beeline output parsing, the proxy
runner's start-failure report, and the STS session counter."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.support import clients
from tests.support.clients import _parse_block, _strip_progress
from tests.support.proxy_proc import ProxyStartError, start_proxy
from tests.support.sts import Sts


def test_strip_progress_prefix():
    assert _strip_progress("\rnull        \rnulla,b") == "a,b"
    assert _strip_progress("a,b") == "a,b"
    assert _strip_progress("nullable,x") == "nullable,x"   # no \r: untouched


def test_parse_block_nul_quoted_csv():
    block = ["\rnull   \rnullid,txt,n", "1,\x00x,y\x00,NULL", "2,,\x00q\"z\x00"]
    res = _parse_block(block)
    assert res.columns == ["id", "txt", "n"]
    assert res.rows == [("1", "x,y", "NULL"), ("2", "", 'q"z')]
    assert _parse_block(["", ""]).columns == []


def test_run_beeline_splits_results_and_errors(monkeypatch, tmp_path):
    """Feed run_beeline a recorded beeline output instead of running the JVM."""
    recorded = {}

    def fake_run(cmd, **kw):
        script = open(cmd[cmd.index("-f") + 1]).read().splitlines()
        marks = [l.split("'")[1] for l in script if l.startswith("SELECT 'BLMARK_")]
        recorded["script"] = script
        out = ("\rnull  \rnulla\n1\nblmark\n" + marks[0] + "\n"      # statement 1: a result
               "blmark\n" + marks[1] + "\n"                            # statement 2: failed
               "blmark\n" + marks[2] + "\n")                           # statement 3: no output
        err = ("Error: org.apache.hive.service.cli.HiveSQLException: boom [X] SQLSTATE: 42P01\n"
               "  at somewhere\n (state=42P01,code=0)\n")

        class P:
            returncode = 0
            stdout = out.encode()
            stderr = err.encode()
        return P()

    monkeypatch.setattr(clients.subprocess, "run", fake_run)
    # no JVM runs, so no installed Spark is needed either
    monkeypatch.setattr(clients, "beeline", lambda: Path("beeline"))
    monkeypatch.setattr(clients, "spark_env", lambda: {})
    run = clients.run_beeline("jdbc:hive2://h:1/default", ["SELECT 1 AS a", "SELECT * FROM nope",
                                                           "!tables"], workdir=tmp_path)
    assert recorded["script"][0] == "SELECT 1 AS a;" and recorded["script"][4] == "!tables"
    assert [r.rows for r in run.results] == [[("1",)], [], []]
    assert run.results[0].columns == ["a"]
    assert run.errors == [("42P01", "org.apache.hive.service.cli.HiveSQLException: boom [X] "
                                    "SQLSTATE: 42P01")]


def test_proxy_start_failure_reports_output(tmp_path):
    with pytest.raises(ProxyStartError) as info:
        start_proxy(tmp_path, ("127.0.0.1", 1), extra_args=["--no-such-flag"], timeout=60)
    assert "exited with code" in str(info.value)
    assert "--no-such-flag" in str(info.value)


def test_open_sessions_counts_oplog_dirs(tmp_path):
    (tmp_path / "oplogs" / "a").mkdir(parents=True)
    (tmp_path / "oplogs" / "b").mkdir()
    (tmp_path / "oplogs" / "stray.txt").write_text("")
    sts = Sts("h", 1, -1, tmp_path / "log", tmp_path, "NONE", _proc=None)
    assert sts.open_sessions() == 2
