"""Self-joins: a table read more than once, each reference a relation of its own.

A datamap definition names the n-th reference of a table (FROM order) `db.table#n` from
the second on (`reference`), so its columns, equivalences and stored expressions keep the
references apart. A query reading the table as often is matched by alias mapping: its
aliases are named after the definition's references each way they can be (`mappings`,
tried by rewriter/index.py; facts.py `extract(refs=...)` names them), and the mapping
whose facts match answers. A query reference no mapping names is an opaque relation
(rewriter/derived.py) joined onto the datamap's rows.
"""
from __future__ import annotations

import itertools
from typing import Mapping

from rewriter.derived import DERIVED_DB


def reference(table: str, n: int) -> str:
    """The name of the n-th reference (1-based) of base table `table` ("db.table")."""
    return table if n == 1 else f"{table}#{n}"


def describe_reference(name: str) -> str:
    """A reference name as a reason says it: `db.t (its reference 2 in FROM order)`."""
    table, sep, n = name.rpartition("#")
    if not sep or not n.isdigit() or table.startswith(DERIVED_DB):
        return name
    return f"{table} (its reference {n} in FROM order)"


def reference_name(table: str, alias: str, as_query: bool, refs: Mapping[str, int],
                    mapped: set[str], counts: dict[str, int], named: set[str]) -> str | None:
    """The reference name of one table reference (`reference`), or None: a query's
    reference left opaque. A definition numbers a table's references in FROM order; a
    query names those `refs` maps (only they, for a table it maps), else its first."""
    if table in mapped:
        n = refs.get(alias)
    else:
        n = counts[table] = counts.get(table, 0) + 1
        if as_query and n > 1:
            n = None
    name = reference(table, n) if n is not None else None
    if name is None or name in named:
        return None
    named.add(name)
    return name


def mappings(twice: dict[str, list[str]], most: dict[str, int]):
    """Alias mappings of a block's self-joined tables ({alias: reference ordinal}), the
    FROM-order one (what extract does unmapped) first: per table, each ordered choice of
    as many of its aliases as `most` says (all of them at most), crossed over the tables."""
    per_table = []
    for t, aliases in twice.items():
        k = min(most[t], len(aliases))
        per_table.append([dict(zip(chosen, range(1, k + 1)))
                          for chosen in itertools.permutations(aliases, k)])
    for combo in itertools.product(*per_table):
        refs: dict[str, int] = {}
        for part in combo:
            refs.update(part)
        yield refs


def most_references(compiled, twice: dict[str, list[str]]) -> dict[str, int]:
    """Per self-joined table of a query: the most references of it one of the candidates'
    compiled forms (None: not compiled) reads."""
    most = {t: 1 for t in twice}
    for comp in compiled:
        for t, k in (comp.facts.self_joined().items() if comp is not None else ()):
            if t in most:
                most[t] = max(most[t], k)
    return most
