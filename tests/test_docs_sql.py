"""docs/sql.md holds an entry for every statement the proxy answers itself, each in the
same shape, and every ```sql block of README.md and docs/ is SQL (grammar notation such
as `[ON TABLE t]` belongs in ```text blocks). That the examples also run, and return
the columns their entries list, is tests/e2e/test_sql_reference.py."""
from __future__ import annotations

import typing

import pytest

from proxy.datamaps.ddl import parser as ddl
from proxy.external import grammar
from proxy.routing.classify import SESSION_KEYS
from tests.support.sqldoc import (
    ROOT, block_statements, check_parses, entries, sql_blocks, statement_kind,
    unterminated,
)

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _own_kinds() -> set[str]:
    """Every statement the proxy's parsers know."""
    kinds = {t.__name__ for t in typing.get_args(ddl.DdlStatement)}
    kinds |= {grammar.CreateExternal.__name__, grammar.AddSegment.__name__,
              grammar.DeleteSegments.__name__, grammar.Compact.__name__}
    kinds |= {f"SET {key}" for key in SESSION_KEYS} | {"SET carbon.input.segments"}
    return kinds


def test_every_statement_the_parsers_know_has_an_entry_with_an_example():
    covered = {statement_kind(s) for e in entries() for s in e.examples if e.owns(s)}
    missing = _own_kinds() - covered
    assert not missing, (f"docs/sql.md has no entry (### heading, grammar, columns, "
                         f"SQLSTATEs, a ```sql example of its own) for {sorted(missing)}")


@pytest.mark.parametrize("entry", entries(), ids=lambda e: e.heading)
def test_each_entry_has_grammar_columns_sqlstates_and_an_example(entry):
    assert entry.grammar, "a ```text grammar block"
    assert entry.columns, "an output columns table (| Column | Type | Meaning |)"
    assert all(t in ("string", "bigint", "int", "double") for _, t in entry.columns), entry.columns
    assert "SQLSTATEs:" in entry.body
    assert any(entry.owns(s) for s in entry.examples), "a ```sql example of the statement"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_sql_block_is_sql(page):
    for block in sql_blocks(page):
        assert not unterminated(block), f"{page.name}: end the statement with ';': {block}"
        for stmt, _ in block_statements(block):
            try:
                check_parses(stmt)
            except Exception as e:  # noqa: BLE001 - the parser's message says where
                raise AssertionError(f"{page.name}: not SQL: {stmt!r}: {e}") from None


def test_grammar_notation_in_a_sql_block_is_caught():
    """The README's old line: grammar brackets in a paste-able block."""
    with pytest.raises(Exception):
        check_parses("SYNC DATAMAPS [ON TABLE sales]")
    with pytest.raises(Exception):
        check_parses("EXPLAIN SELECT ...")
