"""ALTER TABLE on an external-format table: what is allowed (RENAME TO, DROP COLUMNS,
CHANGE [COLUMN] c c type, SET/UNSET TBLPROPERTIES of csv. keys) and a name for what is
not (the 0A000 message names the statement)."""
from __future__ import annotations

from dataclasses import dataclass

from proxy.external import grammar
from proxy.routing.sqlscan import Cursor, StatementError


@dataclass(frozen=True)
class DropColumns:
    columns: tuple[str, ...]


@dataclass(frozen=True)
class ChangeColumn:
    column: str
    new_name: str
    new_type: str


@dataclass(frozen=True)
class SetProperties:
    properties: dict
    unset: bool = False


@dataclass(frozen=True)
class Blocked:
    what: str            # e.g. "ADD COLUMNS"


Alter = DropColumns | ChangeColumn | SetProperties | Blocked


def parse(statement: str, table: str, current_db: str) -> Alter:
    """The clause after ALTER TABLE <table> (RENAME is classify's)."""
    cur = Cursor(statement)
    cur.expect("alter"), cur.expect("table")
    grammar.table_name(cur, current_db)
    cur.subject = f"ALTER TABLE {table}"
    tok = cur.peek()
    first = tok.value if tok.kind == "word" else tok.text
    if cur.accept("drop"):
        if cur.at("partition", "if"):
            return Blocked("DROP PARTITION")
        if not (cur.accept("columns") or cur.accept("column")):
            return Blocked(f"DROP {cur.peek().text.upper()}")
        paren = cur.accept_op("(")
        cols = [cur.ident("a field name").lower()]
        while cur.accept_op(","):
            cols.append(cur.ident("a field name").lower())
        if paren:
            cur.expect_op(")", "to close the field list")
        cur.end()
        return DropColumns(tuple(cols))
    if cur.accept("change", "alter"):
        cur.accept("column")
        column = cur.ident("a field name").lower()
        if cur.accept("type"):                   # ALTER COLUMN c TYPE t
            new_name = column
        elif cur.at("comment", "set", "drop", "first", "after"):
            return Blocked(f"{first.upper()} COLUMN ... {cur.peek().text.upper()}")
        else:
            new_name = cur.ident("the field's new name").lower()
        spelled = []
        while cur.peek().kind != "end" and not cur.at("comment") and cur.peek().value != ";":
            t = cur.next()
            spelled.append(t.value if t.kind == "word" else t.text)
        new_type = "".join(spelled).lower()
        if not grammar._ATOMIC.match(new_type):
            raise StatementError(f"ALTER TABLE {table}: type '{new_type}' of field {column} is "
                                 "not one a CSV file can hold", "0A000")
        return ChangeColumn(column, new_name, "int" if new_type == "integer" else new_type)
    if cur.accept("set", "unset"):
        unset = first.lower() == "unset"
        if not cur.accept("tblproperties"):
            return Blocked(f"{first.upper()} {cur.peek().text.upper()}")
        cur.accept("if") and cur.accept("exists")
        if unset:
            cur.expect_op("(", "to open the property list")
            keys = [cur.string("a property name").strip().lower()]
            while cur.accept_op(","):
                keys.append(cur.string("a property name").strip().lower())
            cur.expect_op(")", "to close the property list")
            cur.end()
            return SetProperties({k: "" for k in keys}, unset=True)
        props = grammar.properties(cur)
        cur.end()
        return SetProperties(props)
    if cur.accept("add"):
        if cur.at("columns", "column"):
            return Blocked("ADD COLUMNS")
        return Blocked(f"ADD {cur.peek().text.upper()}")
    return Blocked(f"{first.upper()}")
