"""The per-tool BI corpora (tests/support/corpus.py explains the format): each case hits
exactly the datamaps it lists, or is refused with its reason, or (pending) is still refused.
The Spark tier of the same cases is test_bi_corpus_spark.py."""
from __future__ import annotations

import functools
from collections import Counter

import pytest

from rewriter import Candidate, compile_datamap, rewrite
from tests.support.corpus import load_corpus
from tests.support.rewriter_cases import SCHEMA

CASES = load_corpus()


@functools.lru_cache(maxsize=None)
def _compiled(name: str, sql: str, current_db: str):
    return compile_datamap(name, sql, SCHEMA, current_db)


def corpus_candidates(case) -> list[Candidate]:
    return [Candidate(_compiled(n, sql, case.current_db)) for n, sql in case.datamaps]


def outcome(case):
    """(the rewrite result, the names of the datamaps it read, as the file names them)."""
    cands = corpus_candidates(case)
    result = rewrite(case.query, cands, SCHEMA, case.current_db)
    key = {c.definition.qualified: n for c, (n, _) in zip(cands, case.datamaps)}
    return result, [key[u] for u in result.used]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_corpus_case(case):
    result, used = outcome(case)
    if case.expect == "miss":
        assert not result.rewritten, f"{case.title}: must not hit, rewritten to {result.sql}"
        if case.reason:
            assert any(case.reason in v for v in result.skipped.values()), \
                f"{case.title}: reason {case.reason!r} not in {result.skipped}"
    elif case.pending:
        assert not result.rewritten, \
            f"{case.title}: hits now ({used}); remove `pending: {case.pending}` and check `used`"
    else:
        assert result.rewritten, f"{case.title}: not rewritten: {result.skipped}"
        assert used == list(case.used), case.title


def test_corpus_shape():
    """At least 25 cases per tool and about 40% must-not-hit: each corpus checks both directions."""
    if not CASES:
        pytest.skip("no corpus files yet")
    per_tool = Counter(c.tool for c in CASES)
    assert min(per_tool.values()) >= 25, per_tool
    misses = sum(1 for c in CASES if c.expect == "miss")
    assert 0.3 <= misses / len(CASES) <= 0.55, (misses, len(CASES))


def test_every_case_names_its_source():
    assert all(c.title and c.query for c in CASES)
