"""A statement's shape: the query log's key for "the same query"
(proxy/observability/querylog/log.py).

Dashboards send the same statement again and again with other literals (a date range, a
region picked in a filter). The shape keeps what decides how a datamap could answer it
(tables, joins, grouping, which columns are filtered, the aggregates) and drops what does
not (literal values, the number of values in an IN list, comments, spacing, keyword and
identifier case), so that one shape stands for all of them:

    SELECT region, sum(amount) FROM Sales WHERE day >= '2026-01-01' AND id IN (1, 2, 3)
    -> select region, sum(amount) from sales where day >= ? and id in (?)

`shape_of(statement, current_db)` -> Shape(text, tables, hash). `tables` are the tables
the statement reads or writes, "db.table" (CTE names excluded), sorted. `hash` is 16 hex
digits of SHA-256 over the text: stable across processes and versions of Python.

A statement sqlglot cannot parse still gets a shape, from its tokens: literals blanked,
case and spacing folded (tables unknown). Pure: no I/O.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp

PLACEHOLDER = "?"


@dataclass(frozen=True, slots=True)
class Shape:
    text: str
    tables: tuple[str, ...]
    hash: str


def shape_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def shape_of(statement: str, current_db: str = "default") -> Shape:
    """The statement's shape; never raises on bad input (a fallback shape instead)."""
    try:
        tree = sqlglot.parse_one(statement, read="spark")
    except (sqlglot.errors.SqlglotError, RecursionError, ValueError):
        tree = None
    if tree is None or isinstance(tree, exp.Command):
        text = fold_tokens(statement)
        return Shape(text, (), shape_hash(text))
    tables = read_tables(tree, current_db)
    text = _fold(tree)
    return Shape(text, tables, shape_hash(text))


def read_tables(tree: exp.Expression, current_db: str) -> tuple[str, ...]:
    """Tables the tree names ("db.table"), excluding its CTEs' names, sorted."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    out = set()
    for t in tree.find_all(exp.Table):
        name = t.name.lower()
        if not name or (not t.db and name in ctes):
            continue
        out.add(f"{(t.db or current_db).lower()}.{name}")
    return tuple(sorted(out))


def _fold(tree: exp.Expression) -> str:
    tree = tree.copy()       # style.md: the caller's tree is never changed
    tree = tree.transform(_blank)
    sql = tree.sql(dialect="spark", normalize=True, pad=0, comments=False)
    return " ".join(sql.lower().split())


def _blank(node: exp.Expression) -> exp.Expression:
    # one placeholder per IN list: `IN (1, 2)` and `IN (1, 2, 3)` are the same dashboard
    if isinstance(node, exp.In) and node.expressions and all(
            isinstance(e, (exp.Literal, exp.Null, exp.Neg, exp.Boolean)) for e in node.expressions):
        return exp.In(this=node.this, expressions=[exp.Placeholder()])
    if isinstance(node, (exp.Literal, exp.Boolean)) or (
            isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal)):
        return exp.Placeholder()
    if isinstance(node, exp.Identifier):
        return exp.Identifier(this=node.this.lower(), quoted=False)
    return node


# strings (with '' or \' escapes), numbers, and everything else token by token
_TOKENS = re.compile(r"'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.)*\"|\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?[lLdDsSyY]?\b"
                     r"|--[^\n]*|/\*.*?\*/", re.DOTALL)


def fold_tokens(statement: str) -> str:
    """Shape text without a parse: literals -> ?, comments dropped, case and spacing folded."""
    def sub(m: re.Match) -> str:
        tok = m.group(0)
        if tok.startswith(("--", "/*")):
            return " "
        if tok.startswith('"'):       # a quoted identifier in some dialects: keep it
            return tok
        return PLACEHOLDER
    text = _TOKENS.sub(sub, statement)
    return " ".join(text.lower().split())
