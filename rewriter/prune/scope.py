"""Read only some files of a table: every reference to it becomes a subquery over its
file-level source with a `_metadata.file_path IN (...)` filter (Spark prunes the files
by it before reading: one file of twenty read for a one-file filter).

    restrict(expression, {"db.t": (source_table, fields, files)}, current_db) -> expression

Used for an external-format table's segment selection (proxy/external) and by pruning
with per-file indexes. Pure: sqlglot in, sqlglot out.
"""
from __future__ import annotations

from typing import Mapping, Sequence

from sqlglot import exp

Scope = tuple[str, Sequence[str], Sequence[str]]     # (source table, fields, files)
_PLAIN = {"this", "db", "catalog", "alias"}


class Unsupported(ValueError):
    """A reference the subquery cannot stand in for (a sample, column aliases)."""


def _table_key(node: exp.Table, current_db: str) -> str:
    db = node.args.get("db")
    return f"{(db.name if db else current_db).lower()}.{node.name.lower()}"


def _source(name: str) -> exp.Table:
    db, _, table = name.partition(".")
    return exp.Table(this=exp.to_identifier(table, quoted=True),
                     db=exp.to_identifier(db, quoted=True))


def files_subquery(scope: Scope, alias: str) -> exp.Subquery:
    """`(SELECT fields FROM source WHERE _metadata.file_path IN (files)) AS alias`."""
    source, fields, files = scope
    cols = [exp.column(f, quoted=True) for f in fields]
    select = exp.select(*cols).from_(_source(source))
    path = exp.Dot(this=exp.column("_metadata"), expression=exp.to_identifier("file_path"))
    where = (exp.In(this=path, expressions=[exp.Literal.string(f) for f in sorted(files)])
             if files else exp.false())
    return select.where(where).subquery(exp.to_identifier(alias, quoted=True))


def restrict(expression: exp.Expression, tables: Mapping[str, Scope],
             current_db: str = "default", shadowed: frozenset[str] = frozenset()
             ) -> exp.Expression:
    """A copy of `expression` in which every reference to a table of `tables` ("db.t",
    lower case) reads only its files. Precondition: `fields` are the table's columns as
    the source table spells them. Correct because the subquery has the table's columns
    under the table's alias (or name), so every column reference resolves as before. A
    name a WITH clause defines is not the table, and is left alone; nor is an unqualified
    name in `shadowed` (the session's temporary views, which Spark resolves first)."""
    tree = expression.copy()
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for node in list(tree.find_all(exp.Table)):
        if not node.args.get("db") and node.name.lower() in ctes | shadowed:
            continue
        if not isinstance(node.this, exp.Identifier):
            continue           # a table function or a path
        key = _table_key(node, current_db)
        scope = tables.get(key)
        if scope is None:
            continue
        extra = sorted(k for k, v in node.args.items() if v and k not in _PLAIN)
        alias = node.args.get("alias")
        if extra or (alias is not None and alias.columns):
            what = ("TABLESAMPLE" if "sample" in extra else extra[0].upper() if extra
                    else "column aliases")
            raise Unsupported(f"{key} is read under a segment selection: {what} on it is "
                              "not supported")
        node.replace(files_subquery(scope, node.alias or node.name))
    return tree
