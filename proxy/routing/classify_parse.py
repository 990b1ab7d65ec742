"""The sqlglot half of the statement classifier (proxy/routing/classify.py): the writes a head look
cannot see, and the conservative fallback when not even a parse can tell.

Imported on demand: a statement only gets here when it starts with WITH or FROM, the caller
allowed a parse, and the word INSERT occurs in it, so plain SELECTs never pay for sqlglot.
"""
from __future__ import annotations

import re
from typing import Iterable

import sqlglot
from sqlglot import exp

from proxy.routing.kinds import Kind, Statement

# A word of SQL text; a name with other characters is only ever written backquoted, and its
# backquotes are where the word stops.
_WORD = re.compile(r"[A-Za-z0-9_]+")
_QUERY, _UNKNOWN_WRITE = Statement(Kind.QUERY), Statement(Kind.MAYBE_WRITE)


def parsed_writes(statement: str, current_db: str) -> Statement:
    """The INSERTs of `WITH ... INSERT` and Hive's `FROM t INSERT ... INSERT ...`: WRITE
    with every target, QUERY when there are none (a CTE named insert_x, INSERT OVERWRITE
    DIRECTORY), MAYBE_WRITE when the text does not parse (the caller looked for INSERT in
    it first, so it may write something)."""
    try:
        tree = sqlglot.parse_one(statement, dialect="spark")
    except (sqlglot.errors.SqlglotError, RecursionError):
        return _UNKNOWN_WRITE
    inserts = tree.expressions if isinstance(tree, exp.MultitableInserts) else [tree]
    tables: list[str] = []
    overwrite = False
    for insert in inserts:
        if not isinstance(insert, exp.Insert):
            continue
        target = insert.this.this if isinstance(insert.this, exp.Schema) else insert.this
        if not isinstance(target, exp.Table) or not target.name:
            continue                     # INSERT OVERWRITE DIRECTORY
        tables.append(f"{(target.db or current_db).lower()}.{target.name.lower()}")
        # REPLACE WHERE (Delta) replaces the rows it selects, as OVERWRITE does
        overwrite = overwrite or bool(insert.args.get("overwrite") or insert.args.get("where"))
    if not tables:
        return _QUERY
    return Statement(Kind.WRITE, tuple(dict.fromkeys(tables)), overwrite=overwrite)


def mentioned(statement: str, tables: Iterable[str]) -> tuple[str, ...]:
    """Which of `tables` ("db.table") `statement` mentions: a whole-word, case-insensitive
    match of the table's bare name (a qualified or backquoted spelling contains it). For
    MAYBE_WRITE: a false positive costs one file listing, a miss a stale answer, so the
    match is deliberately loose (the name inside a string or comment counts too). One
    pass over the text, however many tables (a name that is not one word, such as
    `my-table`, is looked for as a substring)."""
    by_name: dict[str, list[str]] = {}
    for table in tables:
        by_name.setdefault(table.rpartition(".")[2].lower(), []).append(table)
    if not by_name:
        return ()
    seen = {word.lower() for word in set(_WORD.findall(statement))}
    if any(not _WORD.fullmatch(name) for name in by_name):       # e.g. `my-table`
        lowered = statement.lower()
        seen.update(n for n in by_name if not _WORD.fullmatch(n) and n in lowered)
    return tuple(t for name in by_name if name in seen for t in by_name[name])
