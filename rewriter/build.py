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
    (a subquery). The table's alias is kept."""
    tree = parse(build_select)
    for t in list(tree.find_all(exp.Table)):
        full = f"{t.db}.{t.name}"
        if full in (sources or {}):
            alias = t.alias_or_name
            source = sources[full].strip()
            repl = parse(source) if source.startswith("(") else exp.to_table(source,
                                                                             dialect=DIALECT)
            repl.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
            t.replace(repl)
    return tree.sql(DIALECT)
