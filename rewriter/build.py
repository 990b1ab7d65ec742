"""A compiled definition's build SELECT, with base tables swapped for other sources (a
view, a subquery of new files, a finer datamap's storage)."""
from __future__ import annotations

from sqlglot import exp

from rewriter.api import DatamapDefinition, DatamapDefinitionError
from rewriter.normalize import DIALECT, parse


def build_sql(definition: DatamapDefinition, sources) -> str:
    """The SELECT producing exactly definition.columns from the base tables, reading
    sources[db.table] instead of a base table where given: a table or view name, or a
    parenthesised SELECT (a subquery)."""
    if not definition.build_select:
        raise DatamapDefinitionError(f"datamap {definition.name}: definition was not compiled", "HY000")
    tree = parse(definition.build_select)
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
