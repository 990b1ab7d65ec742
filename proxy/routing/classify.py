"""The statement classifier: what a statement is, and which tables it writes.

One place answers "is this a query, a SET, a USE, a write, datamap DDL?" for the router's
handlers (proxy/routing/statements.py, proxy/datamaps/handler.py, the DDL parser's pre-check) and
for the session-state tracking that runs after Spark accepted a statement
(session.track_statement).

Most statements are plain SELECTs, so the first look is cheap: one possessive regex skips
the leading blanks and comments and reads the first word, and a SELECT is done there.
Other statements are matched, word by word (the lazy tokens of sqlscan.py, scanned once),
against `FORMS`: a table of statement shapes, tried in order, each a sequence of steps (a
word, `a|b` one of, `x?` or `if exists?` optional, NAME a table name, STRING a quoted
string). Only a statement's first few tokens are ever read this way, so classification
costs time linear in the leading blanks and comments and nothing in the rest, however
long the statement. Router.decide runs its handlers within `shared()`, so each statement
is classified once per decision however many handlers ask.

Writes whose target is not at the head (`WITH ... INSERT`, Hive's `FROM t INSERT ...`) are
found by parsing the whole statement with sqlglot (proxy/routing/classify_parse.py), which costs
~1-10 µs per byte: only when the caller passes a `parse_limit` (the datamap handlers pass
[datamaps] rewrite_max_sql_bytes; the Router already keeps long statements off the event
loop), and only when the word INSERT occurs in its text (the cheap pre-check: a plain
SELECT never gets there). When a parse was asked for but cannot tell (the text is over
the limit or does not parse) and INSERT occurs in it, the answer is MAYBE_WRITE: the
tables are unknown, so the caller re-syncs every base table the text mentions
(`classify_parse.mentioned`). A statement starting with a write-only word (INSERT, LOAD,
TRUNCATE, MERGE, UPDATE, DELETE, MSCK) that no form matches is MAYBE_WRITE too.
"""
from __future__ import annotations

import re
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Callable

from proxy.routing.kinds import Kind, Statement
from proxy.routing.sqlscan import Cursor, StatementError, Token, bare
from proxy.staleness import MAX_STALENESS_KEY, parse_duration

REWRITE_KEY = "datamap.rewrite.enabled"      # the proxy's own session settings
SERVING_KEY = "datamap.serving.enabled"      # answer datamap hits in-process (proxy/serving)
CACHE_KEY = "datamap.cache.enabled"          # the result cache of served answers
PRUNE_KEY = "datamap.prune.enabled"          # index datamaps skip files (proxy/datamaps/indexes)
PROXY_KEYS = (REWRITE_KEY, SERVING_KEY, CACHE_KEY, PRUNE_KEY)   # switches: true | false
# estimates from stored sketches (rewriter/distinct.py, same key): true | false, default false
APPROXIMATE_KEY = "datamap.rewrite.approximate"
SESSION_KEYS = PROXY_KEYS + (MAX_STALENESS_KEY, APPROXIMATE_KEY)  # every SET the proxy answers
TIME_ZONE_SETTING = "spark.sql.session.timeZone"


NAME, STRING = "<name>", "<string>"
_QUERY_WORDS = frozenset({"select", "with", "from"})
# First words of statements that only ever write: one no form matches may still write.
_WRITE_WORDS = frozenset({"insert", "load", "truncate", "merge", "update", "delete", "msck"})
_INSERT = re.compile(r"\binsert\b")     # over lower-cased text, once `in` found it (faster)
_DEEP_WORDS = frozenset({"with", "from"})        # may hide an INSERT behind a CTE / FROM
# The first word (or parenthesis) after blanks and comments; possessive, so linear.
_FIRST = re.compile(r"(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*+([A-Za-z0-9_]+|\()", re.DOTALL)
# ALTER TABLE clauses that add, remove or move data files. Matching a word is deliberately
# broad: a false positive only re-lists the table's files.
_FILE_CLAUSE = re.compile(r"\b(?:partitions?|location)\b", re.IGNORECASE)
_SET_KV = re.compile(r"(?P<key>[^\s=]+)\s*=\s*(?P<value>.*)", re.DOTALL)
_SET_REWRITE_VALUE = re.compile(r"\s*=\s*(?P<value>.*)", re.DOTALL)
_SHARED: ContextVar[dict | None] = ContextVar("classified_in_this_decision", default=None)


class _Head:
    """A statement's tokens from its first word on, scanned once and shared by the forms
    tried; __getitem__ raises StatementError at an unterminated quote."""

    def __init__(self, statement: str, pos: int):
        self._cursor = Cursor(statement, pos)
        self._tokens: list[Token] = []

    def __getitem__(self, i: int) -> Token:
        while len(self._tokens) <= i:
            self._tokens.append(self._cursor.next())
        return self._tokens[i]


@dataclass(frozen=True)
class _Match:
    head: _Head
    at: int                        # index of the first token after the form
    words: frozenset[str]          # words consumed (optional ones that were there)
    tables: tuple[str, ...]

    @property
    def next(self) -> Token:
        return self.head[self.at]

    @property
    def end(self) -> int:
        """Position just after the form's last token."""
        last = self.head[self.at - 1]
        return last.pos + len(last.text)


Finish = Callable[[str, _Match], Statement]


@dataclass(frozen=True)
class Form:
    kind: Kind
    steps: tuple[str, ...]
    finish: Finish | None = None   # turns a match into the Statement when kind is not enough


def _written(kind: Kind) -> Finish:
    def finish(_sql: str, m: _Match) -> Statement:
        # INSERT INTO t REPLACE WHERE ... (Delta) replaces the rows it selects
        replaced = bool(m.words & {"overwrite", "replace"}) or _is(m.next, _REPLACE)
        return Statement(kind, m.tables, overwrite=replaced)
    return finish


def _rewritten(_statement: str, m: _Match) -> Statement:
    return Statement(Kind.FILES, m.tables, overwrite=True)


def _alter(statement: str, m: _Match) -> Statement:
    if _is(m.next, _RENAME) and _is(m.head[m.at + 1], _TO):
        # Spark keeps a renamed table in its database unless the new name says otherwise
        new, _ = _table_name(m.head, m.at + 2, m.tables[0].partition(".")[0])
        if new is not None:
            return Statement(Kind.ALTER_TABLE, (m.tables[0], new))
    files = _FILE_CLAUSE.search(statement, m.end) is not None
    return Statement(Kind.FILES if files else Kind.ALTER_TABLE, m.tables)


def _use(_statement: str, m: _Match) -> Statement:
    tok = m.next
    if tok.kind == "op" and tok.value == ";":
        tok = m.head[m.at + 1]
    if tok.kind != "end":
        return Statement(Kind.OTHER)
    return Statement(Kind.USE, database=m.tables[0].partition(".")[2])


def _set(statement: str, m: _Match) -> Statement:
    kv = _SET_KV.fullmatch(bare(statement), m.next.pos)
    if kv is None:                                    # SET, SET -v, SET k (show)
        return Statement(Kind.SET)
    return Statement(Kind.SET, key=kv.group("key"), value=kv.group("value"))


def _switch(raw: str, key: str) -> str:
    value = raw.strip("'\"`").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"Invalid value '{raw}' for {key}: expected true or false")
    return value


def _set_proxy_key(key: str):
    """SET <one of SESSION_KEYS> [= value]: the proxy's own session settings."""
    check = parse_duration if key == MAX_STALENESS_KEY else _switch
    def parse(statement: str, m: _Match) -> Statement:
        text = bare(statement)
        assign = _SET_REWRITE_VALUE.fullmatch(text, m.end)
        if assign is None:
            try:
                tok = m.next
            except StatementError as e:
                return Statement(Kind.SET_REWRITE, key=key, error=e.message)
            if tok.kind == "end" or (tok.kind == "op" and tok.value == ";"):
                return Statement(Kind.SET_REWRITE, key=key)       # show the value
            return Statement(Kind.SET_REWRITE, key=key, error=Cursor(statement).error(
                f"expected '=' after {key}", tok).message)
        raw = assign.group("value").strip()
        try:
            return Statement(Kind.SET_REWRITE, key=key, value=check(raw, key))
        except ValueError as e:          # staleness.BadDuration too
            return Statement(Kind.SET_REWRITE, key=key, error=str(e))
    return parse


# Tried in order; the first form whose steps all match wins. Forms for the same first word
# go most specific first.
FORMS: tuple[Form, ...] = (
    # -- writes (the freshness work extends these rows) ------------------------------------
    Form(Kind.OTHER, ("insert", "overwrite", "local?", "directory")),      # files, no table
    Form(Kind.WRITE, ("insert", "into|overwrite", "table?", NAME), _written(Kind.WRITE)),
    Form(Kind.WRITE, ("load", "data", "local?", "inpath", STRING, "overwrite?", "into",
                      "table", NAME), _written(Kind.WRITE)),
    Form(Kind.WRITE, ("truncate", "table", NAME)),
    Form(Kind.FILES, ("msck", "repair", "table", NAME)),
    # rows rewritten in place (table formats that allow it: Delta, Iceberg, Hudi; Spark
    # refuses them on plain Parquet): files replaced, so the datamaps are re-synced
    # (any row may have changed: overwrite, i.e. rebuilt rather than appended to)
    Form(Kind.FILES, ("delete", "from", NAME), _rewritten),
    Form(Kind.FILES, ("update", NAME), _rewritten),
    Form(Kind.FILES, ("merge", "into", NAME), _rewritten),
    # files written behind Spark's back, now listed again: re-sync as SYNC DATAMAPS does
    Form(Kind.FILES, ("refresh", "table", NAME)),
    Form(Kind.DROP_TABLE, ("drop", "table", "if exists?", NAME)),
    # a datamap's live table is a view: DROP VIEW of it is refused; of any other view it
    # is forwarded and drops no datamaps (a temporary view may shadow a base table)
    Form(Kind.DROP_VIEW, ("drop", "view", "if exists?", NAME)),
    Form(Kind.CREATE_TABLE, ("create", "or replace?", "temporary|external?", "table",
                             "if not exists?", NAME), _written(Kind.CREATE_TABLE)),
    Form(Kind.CREATE_TABLE, ("replace", "table", NAME), _written(Kind.CREATE_TABLE)),
    # -- datamap DDL (proxy/datamaps/ddl/parser.py parses the frame) ------------------------
    Form(Kind.DATAMAP, ("create", "datamap")),
    Form(Kind.DATAMAP, ("create", "materialized", "view")),
    Form(Kind.DATAMAP, ("drop", "datamap")),
    Form(Kind.DATAMAP, ("drop", "materialized", "view")),
    Form(Kind.DATAMAP, ("show", "datamap|datamaps|segments")),
    Form(Kind.DATAMAP, ("show", "materialized", "views")),
    Form(Kind.DATAMAP, ("rebuild", "datamap")),
    Form(Kind.DATAMAP, ("refresh", "materialized", "view")),
    Form(Kind.DATAMAP, ("alter", "datamap")),
    Form(Kind.DATAMAP, ("sync", "datamap|datamaps")),
    Form(Kind.DATAMAP, ("sync", "materialized", "views")),
    Form(Kind.DATAMAP, ("audit", "datamap")),
    Form(Kind.DATAMAP, ("explain",)),
    # -- after the datamap forms that share their first word --------------------------------
    Form(Kind.ALTER_TABLE, ("alter", "table", NAME), _alter),
    # -- session state ----------------------------------------------------------------------
    *(Form(Kind.SET_REWRITE, ("set", *re.split(r"(\.)", key)), _set_proxy_key(key))
      for key in SESSION_KEYS),
    Form(Kind.SET, ("set", "time", "zone"),
         lambda _sql, _m: Statement(Kind.SET, key=TIME_ZONE_SETTING)),
    Form(Kind.SET, ("set",), _set),
    Form(Kind.USE, ("use", "database|schema?", NAME), _use),
)


def _compile(step: str) -> tuple[str, tuple[frozenset[str], ...], bool]:
    """"if not exists?" -> ("words", ({if}, {not}, {exists}), optional); "a|b" -> one of."""
    if step in (NAME, STRING):
        return step, (), False
    return "words", tuple(frozenset(w.split("|")) for w in step.rstrip("?").split(" ")), \
        step.endswith("?")


Steps = tuple[tuple[str, tuple[frozenset[str], ...], bool], ...]
_BY_FIRST_WORD: dict[str, list[tuple[Form, Steps]]] = {}
for _form in FORMS:
    _BY_FIRST_WORD.setdefault(_form.steps[0], []).append(
        (_form, tuple(_compile(step) for step in _form.steps)))
_QUERY, _OTHER = Statement(Kind.QUERY), Statement(Kind.OTHER)
_UNKNOWN_WRITE = Statement(Kind.MAYBE_WRITE)
_REPLACE, _RENAME, _TO = frozenset({"replace"}), frozenset({"rename"}), frozenset({"to"})
# A QUERY that starts with WITH or FROM, so an INSERT may follow (told apart by identity).
_DEEP_QUERY = Statement(Kind.QUERY)


class shared:
    """Within it, classify() works out each statement once (and parses it at most once):
    the Router decides a statement in one, so that its handlers share the work. (A class,
    not a generator: it is entered for every statement.)"""

    def __enter__(self) -> None:
        self._token = _SHARED.set({})

    def __exit__(self, *_exc) -> None:
        _SHARED.reset(self._token)


def classify(statement: str, current_db: str = "default",
             parse_limit: int | None = 0) -> Statement:
    """What `statement` is. `parse_limit`: the longest statement (UTF-8 bytes) that may be
    parsed with sqlglot to find an INSERT behind a CTE or FROM clause; 0 never (a look at
    the first words only: such a statement stays a QUERY), None any length. Over the
    limit, an INSERT in the text makes it MAYBE_WRITE."""
    stmt = _shared(_head, statement, current_db)
    if stmt is _DEEP_QUERY and parse_limit != 0 and _mentions_insert(statement):
        if over_limit(statement, parse_limit):
            return _UNKNOWN_WRITE
        return _shared(_parsed, statement, current_db)
    return stmt


def _mentions_insert(statement: str) -> bool:
    low = statement.lower()
    return "insert" in low and _INSERT.search(low) is not None


def _shared(fn: Callable[[str, str], Statement], statement: str, current_db: str) -> Statement:
    memo = _SHARED.get()
    if memo is None:
        return fn(statement, current_db)
    key = (fn, statement, current_db)        # str hashes are cached: O(1) after once
    found = memo.get(key)
    if found is None:
        found = memo[key] = fn(statement, current_db)
    return found


def _head(statement: str, current_db: str) -> Statement:
    """From the first words only."""
    first = _FIRST.match(statement)
    if first is None:
        return _OTHER
    word = first.group(1).lower()
    if word == "(":
        return _QUERY
    if word in _QUERY_WORDS:
        return _DEEP_QUERY if word in _DEEP_WORDS else _QUERY
    forms = _BY_FIRST_WORD.get(word)
    if not forms:
        return _OTHER
    head = _Head(statement, first.start(1))
    try:
        for form, steps in forms:
            m = _match(steps, head, current_db)
            if m is not None:
                return form.finish(statement, m) if form.finish else Statement(form.kind, m.tables)
    except StatementError:               # an unterminated quote: Spark refuses it
        return _OTHER
    return _UNKNOWN_WRITE if word in _WRITE_WORDS else _OTHER


def over_limit(sql: str, limit: int | None) -> bool:
    """Is sql longer than `limit` bytes in UTF-8? (encodes only when the length in
    characters cannot tell)"""
    if limit is None:
        return False
    if len(sql) > limit:
        return True
    return len(sql) * 4 > limit and len(sql.encode("utf-8", "surrogatepass")) > limit


def _match(steps: Steps, head: _Head, current_db: str) -> _Match | None:
    at, words, tables = 0, set(), []
    for kind, sequence, optional in steps:
        if kind == NAME:
            name, at = _table_name(head, at, current_db)
            if name is None:
                return None
            tables.append(name)
        elif kind == STRING:
            if head[at].kind != "str":
                return None
            at += 1
        elif not _is(head[at], sequence[0]):
            if not optional:
                return None
        else:
            for allowed in sequence:
                tok = head[at]
                if not _is(tok, allowed):
                    return None
                words.add(tok.value)
                at += 1
    return _Match(head, at, frozenset(words), tuple(tables))


def _is(tok: Token, allowed: frozenset[str]) -> bool:
    return tok.kind in ("word", "op") and tok.value in allowed


def _table_name(head: _Head, at: int, current_db: str) -> tuple[str | None, int]:
    """A table name of up to three parts (catalog.db.table) -> "db.table"."""
    parts: list[str] = []
    while True:
        tok = head[at]
        if not (tok.kind == "word" or (tok.kind == "ident" and tok.value)):
            return None, at
        parts.append(tok.value.lower())
        at += 1
        dot = head[at]
        if len(parts) == 3 or dot.kind != "op" or dot.value != ".":
            break
        at += 1
    return (".".join(parts[-2:]) if len(parts) > 1 else f"{current_db}.{parts[0]}"), at


def _parsed(statement: str, current_db: str) -> Statement:
    from proxy.routing.classify_parse import parsed_writes     # imports sqlglot: not for SELECTs
    return parsed_writes(statement, current_db)
