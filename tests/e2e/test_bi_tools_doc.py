"""docs/bi-tools.md's example runs as written through the shared embedded `serve`
(tests/e2e/conftest.py): a BI tool's wrapped month grain hits the month datamap and returns
Spark's rows; a week grain over it is forwarded."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.support import Pair, doc_blocks

pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "bi-tools.md"


def test_the_documented_example_runs_as_written(shared_serve):
    c = Pair(shared_serve.port)
    try:
        explained = 0
        for stmt, comment in doc_blocks(DOC)[0]:
            comment = comment.strip()
            if not stmt.startswith("EXPLAIN "):
                c.dm.run(stmt)
                continue
            query = stmt[len("EXPLAIN "):]
            if "Hit mv DataMap:" in comment:
                c.hit(query, comment.split("Hit mv DataMap:")[1].split()[0])
            else:
                assert comment.startswith("No datamap hit"), comment
                c.miss(query)
            explained += 1
        assert explained == 2
    finally:
        c.close()
