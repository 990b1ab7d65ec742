"""The data-driven rewriter cases: tests/fixtures/rewriter/<rule>.yaml (must hit, exact
SQL) and <rule>__nomatch.yaml (must come back unchanged, with the reason); their schema,
their datamaps compiled once, and the check of one case."""
from __future__ import annotations

import functools
import pathlib

from rewriter import Candidate, compile_datamap, rewrite
from tests.support import yamlfile as yaml


FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "fixtures" / "rewriter"


SCHEMA = yaml.safe_load((FIXTURES / "schema.yaml").read_text())


def load_cases(directory: pathlib.Path = FIXTURES):
    out = []
    for f in sorted(directory.glob("*.yaml")):
        if f.name == "schema.yaml":
            continue
        doc = yaml.safe_load(f.read_text()) or {}
        for i, case in enumerate(doc.get("cases") or []):
            out.append((f.stem, i, case))
    return out


CASES = load_cases()


@functools.lru_cache(maxsize=None)
def compiled(name, sql):
    return compile_datamap(name, sql, SCHEMA, "default")


def candidates_for(case):
    """`delta` (table -> relation, union compensation) is given to every datamap; a case
    with a delta is partial unless it says `one_row_per_group: true`."""
    rows = case.get("rows") or {}
    segs = case.get("segments")
    delta = tuple((case.get("delta") or {}).items())
    one_row = case.get("one_row_per_group", not case.get("partial", False) and not delta)
    return [Candidate(compiled(name, sql), rows=rows.get(name), one_row_per_group=one_row,
                      segments=tuple(segs) if segs is not None else None, delta=delta)
            for name, sql in case["datamaps"].items()]


def check_case(stem: str, case: dict) -> None:
    candidates = candidates_for(case)
    result = rewrite(case["query"], candidates, SCHEMA, case.get("current_db", "default"))
    if stem.endswith("__nomatch"):
        assert not result.rewritten, f"{case['title']}: rewritten to {result.sql}"
        assert result.sql == case["query"]
        reasons = " | ".join(f"{k}: {v}" for k, v in result.skipped.items())
        assert any(case["reason"] in v for v in result.skipped.values()), \
            f"{case['title']}: reason {case['reason']!r} not in {reasons}"
    else:
        assert result.rewritten, f"{case['title']}: not rewritten: {result.skipped}"
        assert result.sql == case["expected"], case["title"]
        # the rewriter names datamaps "db.name"; a case names them by the keys of `datamaps`
        key = {c.definition.qualified: n for c, n in zip(candidates, case["datamaps"])}
        assert [key[u] for u in result.used] == case["used"], case["title"]
