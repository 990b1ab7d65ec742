"""A compiled definition's build SELECT, with base tables swapped for other sources (a
view, a subquery of new files, a finer datamap's storage). DatamapDefinition.build_sql
(api.py) calls it; it imports nothing of the rewriter above normalize.py."""
from __future__ import annotations

from typing import Mapping

from sqlglot import exp

from rewriter.normalize import DIALECT, parse


def swap_sources(build_select: str, sources: Mapping[str, str]) -> str:
    """build_select (a compiled definition's build SELECT) reading sources[db.table]
    instead of a base table where given: a table or view name, or a parenthesised SELECT
    (a subquery). The table's alias is kept. A key `db.table@k` (`at`) swaps only the
    relation at position k of the FROM list (0-based, the definition's base_tables
    order) and wins over `db.table` there: one reference of a self-joined table."""
    tree = parse(build_select)
    from_ = tree.args.get("from_")
    listed = ([from_.this] if from_ is not None else []) + [
        j.this for j in tree.args.get("joins") or []]
    position = {id(rel): k for k, rel in enumerate(listed)}
    for t in list(tree.find_all(exp.Table)):
        full = f"{t.db}.{t.name}"
        key = at(full, position[id(t)]) if id(t) in position else None
        key = key if key in (sources or {}) else full
        if key in (sources or {}):
            alias = t.alias_or_name
            source = sources[key].strip()
            repl = parse(source) if source.startswith("(") else exp.to_table(source,
                                                                             dialect=DIALECT)
            repl.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
            t.replace(repl)
    return tree.sql(DIALECT)


def at(table: str, k: int) -> str:
    """The source key of the relation at FROM position k, reading `table`."""
    return f"{table}@{k}"



def source_keys(base_tables) -> list[str]:
    """The source key of each FROM position: `db.table`, or `db.table@k` for a table the
    definition reads more than once (each reference its own source)."""
    tables = list(base_tables)
    return [at(t, k) if tables.count(t) > 1 else t for k, t in enumerate(tables)]
