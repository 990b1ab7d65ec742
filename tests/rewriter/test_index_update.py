"""DatamapIndex at scale (pure logic, no Spark): compiled definitions stay compiled however
many datamaps an index holds, and updated() replaces one datamap's entry without
rebuilding or recompiling the others."""
from __future__ import annotations

import dataclasses

import pytest

from rewriter import Candidate, DatamapIndex, compile_datamap
from rewriter.api import DatamapDefinitionError
from rewriter.compiled import CompiledForms

SCHEMAS = {"db1": {"sales": {"country": "string", "city": "string", "qty": "int"},
                   "items": {"id": "int", "kind": "string"}}}
Q = "SELECT country, sum(qty) AS q FROM sales GROUP BY country"


@pytest.fixture
def forms(monkeypatch):
    forms = CompiledForms(spare=10)
    monkeypatch.setattr(DatamapIndex, "compiled_forms", forms)
    return forms


def _cands(n: int, rows: int = 100) -> list[Candidate]:
    return [Candidate(compile_datamap(f"dm{i}", f"SELECT country, city, sum(qty) AS q{i} "
                                      "FROM sales GROUP BY country, city", SCHEMAS, "db1"),
                      rows=rows + i, segments=("1",)) for i in range(n)]


def test_an_index_larger_than_the_spare_count_compiles_nothing_again(forms):
    cands = _cands(40)        # 40 definitions, spare 10: a byte- or count-bounded LRU
    forms.entries.clear()     # smaller than the index would miss on every lookup
    first = DatamapIndex(cands, SCHEMAS, 1)
    assert forms.compiles == 40
    DatamapIndex(cands, SCHEMAS, 2)
    assert forms.compiles == 40 and len(forms.entries) == 40
    assert not first.broken


def test_loading_another_tables_schema_compiles_nothing_again(forms):
    cands = _cands(5)
    DatamapIndex(cands, SCHEMAS, 1)
    before = forms.compiles
    wider = {"db1": {**SCHEMAS["db1"], "other": {"x": "int"}}}
    DatamapIndex(cands, wider, 2)
    assert forms.compiles == before


def test_updated_replaces_one_entry_and_shares_the_others(forms):
    cands = _cands(30)
    old = DatamapIndex(cands, SCHEMAS, 1)
    compiles = forms.compiles
    republished = dataclasses.replace(cands[7], rows=1, segments=("2",))
    new = old.updated(put=[republished], version=2)
    assert forms.compiles == compiles                     # same definition: not recompiled
    assert new.version == 2 and new.token != old.token
    assert new.candidates["db1.dm7"].segments == ("2",)
    assert old.candidates["db1.dm7"].segments == ("1",)   # the old index is unchanged
    assert all(new.compiled[n] is old.compiled[n] for n in old.compiled)
    assert new.by_table["db1.sales"].count("db1.dm7") == 1
    assert old.rewrite(Q, "db1").used == ["db1.dm0"]       # the fewest rows answers
    assert new.rewrite(Q, "db1").used == ["db1.dm7"]


def test_updated_adds_and_drops_datamaps(forms):
    cands = _cands(3)
    old = DatamapIndex(cands, SCHEMAS, 1)
    agg = compile_datamap("agg", Q, SCHEMAS, "db1")
    kinds = compile_datamap("kinds", "SELECT kind, count(*) AS c FROM items GROUP BY kind",
                            SCHEMAS, "db1")
    new = old.updated(put=[Candidate(agg, rows=1), Candidate(kinds, rows=1)],
                      drop=["db1.dm0"])
    assert set(new.candidates) == {"db1.dm1", "db1.dm2", "db1.agg", "db1.kinds"}
    assert "db1.dm0" not in new.by_table["db1.sales"]
    assert new.rewrite(Q, "db1").used == ["db1.agg"]
    # a new table is in the text pre-check of the new index only
    kq = "SELECT kind, count(*) AS c FROM items GROUP BY kind"
    assert new.rewrite(kq, "db1").used == ["db1.kinds"]
    assert not old.would_parse(kq)
    gone = new.updated(drop=["db1.kinds"])
    assert "db1.items" not in gone.by_table and not gone.would_parse(kq)


def test_updated_reports_a_definition_that_no_longer_compiles(forms):
    old = DatamapIndex(_cands(2), SCHEMAS, 1)
    bad = compile_datamap("bad", "SELECT kind, count(*) AS c FROM items GROUP BY kind",
                          SCHEMAS, "db1")
    bad = dataclasses.replace(bad, columns=bad.columns[:1])     # stored columns differ
    new = old.updated(put=[Candidate(bad)])
    assert "db1.bad" in new.broken and "db1.bad" not in new.compiled
    assert "db1.bad" not in old.broken


def test_ready_tells_whether_get_would_compile(forms):
    d = compile_datamap("agg", Q, SCHEMAS, "db1")
    forms.entries.clear()
    assert not forms.ready(d, SCHEMAS)
    forms.get(d, SCHEMAS)
    assert forms.ready(d, SCHEMAS) and forms.compiles == 1
    other = {"db1": {"sales": {"country": "string"}}}       # qty gone: it no longer compiles
    assert not forms.ready(d, other)
    for _ in range(2):                                        # the failure is kept, not retried
        with pytest.raises(DatamapDefinitionError):
            forms.get(d, other)
    assert forms.ready(d, other) and forms.compiles == 1


def test_candidates_named_are_those_over_the_tables_a_statement_names(forms):
    cands = _cands(2)
    kinds = compile_datamap("kinds", "SELECT kind, count(*) AS c FROM items GROUP BY kind",
                            SCHEMAS, "db1")
    index = DatamapIndex(cands + [Candidate(kinds)], SCHEMAS, 1)
    assert [c.definition.qualified for c in index.candidates_named(Q)] == ["db1.dm0", "db1.dm1"]
    assert [c.definition.qualified for c in index.candidates_named(
        "SELECT kind FROM ITEMS")] == ["db1.kinds"]
    assert index.candidates_named("SELECT 1") == []
