"""The SQL of external-format tables (docs/external.md), parsed without I/O.

    CREATE TABLE [IF NOT EXISTS] [db.]t (c type, ...) [STORED AS carbondata |
        STORED BY 'carbondata'] TBLPROPERTIES ('format'='csv', 'csv.<key>'='v', ...)
    ALTER TABLE [db.]t ADD SEGMENT LOCATION 'p1,p2'   (or OPTIONS ('path'='p1,p2'))
    DELETE FROM TABLE [db.]t WHERE SEGMENT.ID IN (0, 2)
    DELETE FROM TABLE [db.]t WHERE SEGMENT.STARTTIME BEFORE 'yyyy-MM-dd HH:mm:ss'
    ALTER TABLE [db.]t COMPACT 'MINOR' | 'MAJOR' | 'CUSTOM' WHERE SEGMENT.ID IN (0, 2)
    SET carbon.input.segments.<db>.<t> = 1,3 | *

A CREATE TABLE whose TBLPROPERTIES have no 'format' is not ours (parse_create -> None):
it is forwarded to Spark as written. The CSV options a table may carry, and the Spark
CSV option each one becomes, are CSV_KEYS.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

from proxy.routing.sqlscan import Cursor, StatementError, Token

# csv.<key> -> Spark's CSV reader option. skip_header: the files start with a header line.
CSV_KEYS = {
    "csv.delimiter": "sep", "csv.header": None, "csv.quote": "quote", "csv.escape": "escape",
    "csv.skip_header": "header", "csv.compression": None, "csv.null_value": "nullValue",
    "csv.comment": "comment", "csv.encoding": "encoding", "csv.multiline": "multiLine",
    "csv.date_format": "dateFormat", "csv.timestamp_format": "timestampFormat",
}
_ATOMIC = re.compile(r"(string|varchar\(\d+\)|char\(\d+\)|tinyint|smallint|int|integer|bigint|"
                     r"boolean|float|double|decimal(\(\d+(,\d+)?\))?|date|timestamp|"
                     r"timestamp_ntz)\Z")
_FORMAT_PROP = re.compile(r"""tblproperties\s*\([^)]*['"]format['"]\s*=""", re.IGNORECASE)
SEGMENTS_KEY = "carbon.input.segments."


@dataclass(frozen=True)
class CreateExternal:
    table: str                              # "db.t"
    fields: tuple[tuple[str, str], ...]     # (name, Spark type), in DDL order
    header: tuple[str, ...]                 # the files' columns, in file order
    properties: tuple[tuple[str, str], ...]  # format and csv.* keys, sorted
    if_not_exists: bool = False

    def options(self) -> dict[str, str]:
        return csv_options(dict(self.properties))


@dataclass(frozen=True)
class AddSegment:
    table: str
    paths: tuple[str, ...]                  # as written, blanks stripped


@dataclass(frozen=True)
class DeleteSegments:
    table: str
    ids: tuple[int, ...] = ()
    before: datetime | None = None          # SEGMENT.STARTTIME BEFORE


@dataclass(frozen=True)
class Compact:
    table: str
    kind: str                               # minor | major | custom
    ids: tuple[int, ...] = ()               # CUSTOM: WHERE SEGMENT.ID IN (...)


def _qualify(parts: list[str], current_db: str) -> str:
    return ".".join(parts[-2:]) if len(parts) > 1 else f"{current_db}.{parts[0]}"


def table_name(cur: Cursor, current_db: str) -> str:
    parts = [cur.ident("a table name")]
    while cur.accept_op(".") and len(parts) < 3:
        parts.append(cur.ident("a table name"))
    return _qualify(parts, current_db)


def properties(cur: Cursor) -> dict[str, str]:
    cur.expect_op("(", "to open the property list")
    props: dict[str, str] = {}
    while True:
        tok = cur.peek()
        key = cur.string("a property name").strip().lower()
        if key in props:
            raise cur.error(f"property '{key}' is given twice", tok)
        cur.expect_op("=", f"after property '{key}'")
        props[key] = cur.string(f"the value of property '{key}'")
        if cur.accept_op(")"):
            return props
        cur.expect_op(",", "or ')' in the property list")


def csv_options(props: dict[str, str]) -> dict[str, str]:
    """Spark CSV reader options of validated properties (recursiveFileLookup: the files
    are links in one sub-directory per segment)."""
    out = {"header": "false", "recursiveFileLookup": "true"}
    for key, value in props.items():
        option = CSV_KEYS.get(key)
        if option:
            out[option] = value
    return out


def check_properties(table: str, props: dict[str, str], fields) -> tuple[str, ...]:
    """Validate the TBLPROPERTIES of an external table; returns the file's header."""
    fmt = props.get("format", "").strip().lower()
    if fmt != "csv":
        raise StatementError(f"Table {table}: format '{props.get('format')}' is not supported "
                             "for external-format tables (only 'csv')", "0A000")
    for key in props:
        if key == "format":
            continue
        if not key.startswith("csv."):
            raise StatementError(f"Table {table}: property '{key}' is not allowed on an "
                                 "external-format table (only 'format' and 'csv.' properties)",
                                 "42000")
        if key not in CSV_KEYS:
            raise StatementError(f"Table {table}: unknown property '{key}' (known: "
                                 f"{', '.join(sorted(CSV_KEYS))})", "42000")
    if "csv.delimiter" in props and not props["csv.delimiter"]:
        raise StatementError(f"Table {table}: 'csv.delimiter' must not be empty", "42000")
    for key in ("csv.quote", "csv.escape"):
        if key in props and len(props[key]) != 1:
            raise StatementError(f"Table {table}: '{key}' must be one character, "
                                 f"not '{props[key]}'", "42000")
    skip = props.get("csv.skip_header", "false").strip().lower()
    if skip not in ("true", "false"):
        raise StatementError(f"Table {table}: 'csv.skip_header' must be true or false, "
                             f"not '{props['csv.skip_header']}'", "42000")
    names = [f for f, _ in fields]
    if "csv.header" not in props:
        return tuple(names)
    header = tuple(h.strip().lower() for h in props["csv.header"].split(","))
    if any(not h for h in header):
        raise StatementError(f"Table {table}: 'csv.header' has an empty column name", "42000")
    twice = sorted({h for h in header if header.count(h) > 1})
    if twice:
        raise StatementError(f"Table {table}: 'csv.header' names {', '.join(twice)} twice",
                             "42000")
    missing = [n for n in names if n not in header]
    if missing:
        raise StatementError(f"Table {table}: 'csv.header' does not contain the table's "
                             f"field(s) {', '.join(missing)}", "42000")
    return header


def parse_create(statement: str, current_db: str = "default") -> CreateExternal | None:
    """CREATE TABLE ... TBLPROPERTIES('format'=...) -> CreateExternal; None for any other
    statement (a CREATE TABLE without 'format' is Spark's)."""
    if not _FORMAT_PROP.search(statement):
        return None
    cur = Cursor(statement)
    if not cur.accept("create"):
        return None
    cur.accept("external")          # Hive's word: the files are not the table's either
    if not cur.accept("table"):
        return None
    if_not_exists = False
    if cur.accept("if"):
        cur.expect("not"), cur.expect("exists")
        if_not_exists = True
    table = table_name(cur, current_db)
    cur.subject = f"table {table}"
    fields = _fields(cur, table) if cur.peek().value == "(" else ()
    props: dict[str, str] | None = None
    while not (cur.accept_op(";") or cur.peek().kind == "end"):
        tok = cur.next()
        word = tok.value if tok.kind == "word" else ""
        if word == "tblproperties":
            props = properties(cur)
        elif word == "stored":
            if cur.accept("by"):
                value = cur.string("the storage handler")
            else:
                cur.expect("as")
                value = cur.ident("a file format")
            if value.lower() != "carbondata":
                raise StatementError(f"Table {table}: STORED {value} contradicts "
                                     "'format' in TBLPROPERTIES (use STORED AS carbondata, "
                                     "or leave it out)", "42000")
        elif word == "comment":
            cur.string("the comment")
        elif word in ("as", "select"):
            raise StatementError(f"Table {table}: an external-format table cannot be created "
                                 "with AS SELECT (CTAS); create it, then ADD SEGMENT", "0A000")
        elif word in ("partitioned", "clustered", "location", "using", "row", "options"):
            raise StatementError(f"Table {table}: {word.upper()} is not supported on an "
                                 "external-format table", "0A000")
        else:
            raise cur.error("expected TBLPROPERTIES, STORED AS or COMMENT", tok)
    if props is None or "format" not in props:
        return None
    if not fields:
        raise StatementError(f"Table {table}: an external-format table needs its fields", "42000")
    header = check_properties(table, props, fields)
    return CreateExternal(table, fields, header, tuple(sorted(props.items())), if_not_exists)


def _fields(cur: Cursor, table: str) -> tuple[tuple[str, str], ...]:
    cur.expect_op("(", "to open the field list")
    fields: list[tuple[str, str]] = []
    while True:
        tok = cur.peek()
        name = cur.ident("a field name").lower()
        if any(name == n for n, _ in fields):
            raise cur.error(f"field '{name}' is declared twice", tok)
        fields.append((name, _type(cur, table, name)))
        while cur.accept("comment"):
            cur.string("the comment")
        if cur.accept_op(")"):
            return tuple(fields)
        cur.expect_op(",", "or ')' in the field list")


def _type(cur: Cursor, table: str, field: str) -> str:
    text = []
    depth = 0
    while True:
        tok = cur.peek()
        if tok.kind == "end" or (depth == 0 and (tok.value in (",", ")") or
                                                 (tok.kind == "word" and tok.value == "comment"))):
            break
        depth += tok.value == "(" or tok.value == "<"
        depth -= tok.value == ")" or tok.value == ">"
        text.append(tok.value if tok.kind == "word" else tok.text)
        cur.next()
    spelled = "".join(text).lower()
    if spelled == "integer":
        spelled = "int"
    if not _ATOMIC.match(spelled):
        raise StatementError(f"Table {table}: field {field} has type '{spelled or '?'}', which "
                             "a CSV file cannot hold (atomic types only)", "0A000")
    return spelled


def _tail(statement: str, current_db: str) -> tuple[Cursor, str] | None:
    """ALTER TABLE name ... -> (cursor after the name, "db.t")."""
    cur = Cursor(statement)
    if not (cur.accept("alter") and cur.accept("table")):
        return None
    return cur, table_name(cur, current_db)


def parse_alter(statement: str, current_db: str = "default") -> AddSegment | Compact | None:
    """ALTER TABLE t ADD SEGMENT ... | COMPACT ...; None for any other ALTER."""
    try:
        found = _tail(statement, current_db)
        if found is None:
            return None
        cur, table = found
        if cur.at("compact"):
            compact = True
        elif not cur.accept("add") or not cur.accept("segment"):
            return None
        else:
            compact = False
    except StatementError:
        return None
    if compact:        # its syntax errors are the client's (the caller knows t is ours)
        return _compact(cur, table)
    cur.subject = f"ADD SEGMENT of {table}"
    if cur.accept("location"):
        raw = cur.string("the segment's paths")
    else:
        cur.expect("options", "LOCATION or OPTIONS")
        props = properties(cur)
        if "path" not in props:
            raise StatementError(f"ADD SEGMENT of {table}: OPTIONS need 'path'", "42000")
        if props.get("format", "csv").lower() != "csv":
            raise StatementError(f"ADD SEGMENT of {table}: format '{props['format']}' is not "
                                 "the table's (csv)", "0A000")
        raw = props["path"]
    cur.end()
    paths = tuple(p.strip() for p in raw.split(","))
    if not any(paths) or any(not p for p in paths):
        raise StatementError(f"ADD SEGMENT of {table}: an empty path in '{raw}'", "42000")
    return AddSegment(table, paths)


def _compact(cur: Cursor, table: str) -> Compact | None:
    """COMPACT 'MINOR' | 'MAJOR' | 'CUSTOM' WHERE SEGMENT.ID IN (...); None (not ours:
    forwarded, then refused as any other COMPACT) for another kind."""
    cur.next()
    kind = cur.string("MINOR, MAJOR or CUSTOM").strip().lower()
    if kind not in ("minor", "major", "custom"):
        return None
    ids: tuple[int, ...] = ()
    if kind == "custom":
        cur.subject = f"COMPACT 'CUSTOM' of {table}"
        cur.expect("where", "WHERE SEGMENT.ID IN (...) after 'CUSTOM'")
        cur.expect("segment")
        cur.expect_op(".", "after SEGMENT")
        cur.expect("id")
        ids = _id_list(cur)
    cur.end()
    return Compact(table, kind, ids)


def _id_list(cur: Cursor) -> tuple[int, ...]:
    """IN (0, 2, ...): the ids, each once, in order."""
    cur.expect("in")
    cur.expect_op("(", "to open the segment ids")
    ids = []
    while True:
        ids.append(_segment_id(cur, cur.next()))
        if cur.accept_op(")"):
            return tuple(dict.fromkeys(ids))
        cur.expect_op(",", "or ')' in the segment ids")


def parse_delete_segments(statement: str, current_db: str = "default") -> DeleteSegments | None:
    """DELETE FROM TABLE t WHERE SEGMENT.ID IN (...) | SEGMENT.STARTTIME BEFORE '...'."""
    cur = Cursor(statement)
    try:
        if not (cur.accept("delete") and cur.accept("from") and cur.accept("table")):
            return None
        table = table_name(cur, current_db)
    except StatementError:
        return None
    cur.subject = f"DELETE SEGMENT of {table}"
    cur.expect("where"), cur.expect("segment")
    cur.expect_op(".", "after SEGMENT")
    if cur.accept("id"):
        ids = _id_list(cur)
        cur.end()
        return DeleteSegments(table, ids)
    cur.expect("starttime", "ID or STARTTIME")
    cur.expect("before")
    raw = cur.string("the time (yyyy-MM-dd HH:mm:ss)")
    cur.end()
    try:
        when = datetime.strptime(raw.strip(), "%Y-%m-%d %H:%M:%S")
    except ValueError:
        raise StatementError(f"DELETE SEGMENT of {table}: '{raw}' is not a time of the form "
                             "yyyy-MM-dd HH:mm:ss", "42000") from None
    return DeleteSegments(table, before=when)


def _segment_id(cur: Cursor, tok: Token) -> int:
    value = tok.value
    if tok.kind in ("word", "str") and value.strip().isdigit():
        return int(value.strip())
    raise cur.error("expected a segment id (a whole number)", tok)


def segment_selection(key: str, value: str, current_db: str) -> tuple[str, tuple[int, ...] | None]:
    """SET carbon.input.segments.<db>.<t> = 1,3 | * -> ("db.t", (1, 3) or None for all)."""
    rest = key.strip().lower()[len(SEGMENTS_KEY):]
    parts = [p.strip("`") for p in rest.split(".")]
    if not all(parts) or len(parts) > 2:
        raise StatementError(f"Bad segment selection key '{key}': expected "
                             f"{SEGMENTS_KEY}<db>.<table>", "42000")
    table = _qualify(parts, current_db)
    raw = value.strip().strip("'\"").strip()
    if raw == "*":
        return table, None
    try:
        ids = tuple(dict.fromkeys(int(p) for p in raw.split(",")))
    except ValueError:
        raise StatementError(f"Bad segment selection '{value}' for {table}: expected segment "
                             "ids separated by commas, or *", "42000") from None
    return table, ids
