"""docs/external.md's example runs as written through the shared embedded `serve`
(tests/e2e/conftest.py), with `/data/cdr` standing for a directory the test writes: each
commented statement returns what its comment says, and the files are untouched."""
from __future__ import annotations

import bz2
import gzip
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.e2e import Conn, doc_blocks

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "external.md"
HEAD = "day|id|caller|cell|seconds\n"


def _row(i: int) -> str:
    return f"2024-05-0{1 + i % 2}|{i}|+4930{i}|c{i}|{10 * i}\n"


def _files(root: Path) -> Path:
    day1, day2 = root / "2024-05-01", root / "2024-05-02"
    day1.mkdir(parents=True), day2.mkdir()
    (day1 / "p1.csv").write_text(HEAD + _row(0) + _row(1))
    (day1 / "p2.csv").write_text(HEAD + _row(2) + _row(3))
    with gzip.open(day2 / "a.csv.gz", "wt") as f:
        f.write(HEAD + _row(4))
    with bz2.open(day2 / "b.csv.bz2", "wt") as f:
        f.write(HEAD + _row(5))
    return root


@contextmanager
def _example(shared_serve, name: str):
    """The files under a directory of the test's own, a connection, and afterwards the
    check that the files are byte for byte as written."""
    root = _files(shared_serve.root / name)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    c = Conn(shared_serve.port)
    try:
        yield root, c
    finally:
        c.close()
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_the_documented_example_runs_as_written(shared_serve):
    with _example(shared_serve, "doc_cdr") as (root, c):
        checked = 0
        for stmt, comment in doc_blocks(DOC)[0]:
            result = c.run(stmt.replace("/data/cdr", str(root)))
            words = comment.split()
            if stmt.startswith("SELECT count(*)"):
                assert result.rows == [(int(words[0].rstrip(":")),)], (stmt, comment)
                checked += 1
            elif stmt.startswith("SHOW SEGMENTS"):
                assert [r[0] for r in result.rows] == ["1", "0"]
                assert [r[9] for r in result.rows] == [2, 2]
                checked += 1
        assert checked == 4


def test_the_hot_and_cold_example_runs_as_written(shared_serve):
    """The MV answers the hot query; each index datamap prunes the cold one to one file."""
    with _example(shared_serve, "doc_cdr_hot") as (root, c):
        explained = 0
        for stmt, comment in doc_blocks(DOC)[1]:
            stmt = stmt.replace("/data/cdr", str(root))
            if not stmt.startswith("EXPLAIN"):
                c.run(stmt)
                continue
            plan = c.explain_until(stmt, comment)
            assert comment in plan, (stmt, plan)
            explained += 1
        assert explained == 3
        assert c.rows("SHOW TABLES LIKE 'cdr*'") == []
