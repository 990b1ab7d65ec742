"""The per-tool BI corpora: tests/fixtures/rewriter/corpus/<tool>.yaml.

A file is one tool's dashboard over the `tpch` tables:

    tool: Superset
    source: where the SQL shapes were read (files, dialect classes, docs)
    current_db: tpch                    # the schema the tool is connected to
    datamaps:                           # every datamap is a candidate for every case
      li_month: "SELECT ... FROM lineitem GROUP BY ..."
    cases:
    - title: what the dashboard asks
      source: the exact place the shape comes from (e.g. hive.py time grain P1M)
      query: "..."
      expect: hit                       # or miss
      used: [li_month]                  # hit: the datamaps the rewrite reads, in order
      reason: "..."                     # miss: a substring of some datamap's skip reason
      pending: "ROLLUP"                 # hit the rewriter cannot do yet: must NOT hit today
                                        # (counted as a miss by bench/rewrite.py)

A `miss` case must never hit; a `hit` case must hit with exactly `used`; a `pending` one
must come back unchanged until the feature lands (then the marker goes). Every case that
is rewritten also runs on Spark, original vs rewritten.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests.support import yamlfile as yaml


CORPUS = Path(__file__).resolve().parents[1] / "fixtures" / "rewriter" / "corpus"


@dataclass(frozen=True)
class CorpusCase:
    tool: str
    file: str
    index: int
    title: str
    query: str
    expect: str                       # hit | miss
    used: tuple[str, ...]
    reason: str | None
    pending: str | None
    datamaps: tuple[tuple[str, str], ...]
    current_db: str

    @property
    def id(self) -> str:
        return f"{self.file}[{self.index}]"

    @property
    def must_hit(self) -> bool:
        return self.expect == "hit"


def load_corpus(directory: Path = CORPUS) -> list[CorpusCase]:
    out = []
    for f in sorted(directory.glob("*.yaml")):
        doc = yaml.safe_load(f.read_text()) or {}
        datamaps = tuple((doc.get("datamaps") or {}).items())
        for i, c in enumerate(doc.get("cases") or []):
            expect = c.get("expect")
            if expect not in ("hit", "miss"):
                raise ValueError(f"{f.name}[{i}]: expect must be hit or miss, not {expect!r}")
            out.append(CorpusCase(
                tool=doc["tool"], file=f.stem, index=i, title=c["title"], query=c["query"],
                expect=expect, used=tuple(c.get("used") or ()), reason=c.get("reason"),
                pending=c.get("pending"), datamaps=datamaps,
                current_db=c.get("current_db") or doc.get("current_db") or "tpch"))
    return out

