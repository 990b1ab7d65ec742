"""The must-hit rewriter fixture cases (tests/fixtures/rewriter/*.yaml, no __nomatch) as
the Spark tier runs them: ordered so cases sharing datamaps are next to each other."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import yamlfile as yaml


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rewriter"


def _cases():
    out = []
    for f in sorted(FIXTURES.glob("*.yaml")):
        if f.name == "schema.yaml" or "__nomatch" in f.name:
            continue
        data = yaml.safe_load(f.read_text()) or {}
        for i, case in enumerate(data.get("cases") or []):
            out.append((f.stem, i, case.get("title", f"case {i}"), case))
    # cases sharing datamaps run next to each other so their tables are reused
    out.sort(key=lambda c: (sorted((c[3].get("datamaps") or {}).items()), c[0], c[1]))
    return [pytest.param(case, id=f"{stem}:{i}:{title}") for stem, i, title, case in out]


SPARK_CASES = _cases()


SEG = "__seg"     # the segmented layout is compiled under <name>__seg so both tables coexist
