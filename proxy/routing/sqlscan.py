"""SQL text scanning: a lazy tokenizer with a cursor over it (no parse, no I/O).

Shared by the statement classifier (proxy/routing/classify.py), which reads only a statement's
first few words, and the datamap DDL parser (proxy/datamaps/ddl/parser.py), which reads a frame
and hands the query after it over as text. Tokens are made on demand, so neither pays for
the rest of a long statement. Every pattern here runs in time linear in its input: the
tokenizer never backtracks over a run of blanks or comments (24 blanks once took 7 s in
a pattern that did).
"""
from __future__ import annotations

import re
from typing import NamedTuple

_TOKEN = re.compile(r"""
    (?P<ws>\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)
  | (?P<word>[A-Za-z0-9_]+)
  | (?P<bq>`(?:[^`]|``)*`)
  | (?P<str>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<op>.)
""", re.VERBOSE | re.DOTALL)


class StatementError(Exception):
    """A statement the proxy refuses. `sqlstate` per contract.md (42000 for syntax)."""

    def __init__(self, message: str, sqlstate: str = "42000",
                 position: int | None = None, token: str | None = None):
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.position = position
        self.token = token


class Token(NamedTuple):       # a tuple: made for every token, cheaply
    kind: str        # word | ident (backquoted) | str | op | end
    text: str        # as written
    value: str       # word lower-cased, ident/str unquoted, op itself
    pos: int


def unquote_string(text: str) -> str:
    q = text[0]
    body = text[1:-1].replace(q + q, q)
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def bare(statement: str) -> str:
    r"""The statement without trailing blanks and one trailing ';'. Patterns match this in
    full instead of ending in `\s*;?\s*$`, which backtracks quadratically (or worse, next
    to another `\s*`) over a long run of blanks: seconds of event loop for a few KB."""
    s = statement.rstrip()
    return s[:-1].rstrip() if s.endswith(";") else s


class Cursor:
    """Lazy tokenizer: text after the last token asked for is never looked at.
    `reserved` words are refused as unquoted names."""

    def __init__(self, text: str, pos: int = 0, reserved: frozenset[str] = frozenset()):
        self.text = text
        self.pos = pos
        self.reserved = reserved
        self.subject = ""            # "datamap foo" once known, for error messages
        self._peeked: Token | None = None

    def peek(self) -> Token:
        if self._peeked is None:
            self._peeked = self._scan()
        return self._peeked

    def next(self) -> Token:
        tok = self.peek()
        self._peeked = None
        self.pos = tok.pos + len(tok.text)
        return tok

    def _scan(self) -> Token:
        pos = self.pos
        while True:
            if pos >= len(self.text):
                return Token("end", "", "", len(self.text))
            m = _TOKEN.match(self.text, pos)
            kind = m.lastgroup
            if kind == "ws":
                pos = m.end()
                continue
            text = m.group()
            if kind == "word":
                return Token("word", text, text.lower(), pos)
            if kind == "bq":
                return Token("ident", text, text[1:-1].replace("``", "`"), pos)
            if kind == "str":
                return Token("str", text, unquote_string(text), pos)
            if text in "'\"`":
                raise self.error("unterminated quoted text", Token("op", text, text, pos))
            return Token("op", text, text, pos)

    # -- helpers -------------------------------------------------------------------------
    def error(self, expected: str, tok: Token | None = None) -> StatementError:
        tok = tok or self.peek()
        line = self.text.count("\n", 0, tok.pos) + 1
        col = tok.pos - (self.text.rfind("\n", 0, tok.pos) + 1)
        near = "end of input" if tok.kind == "end" else f"'{tok.text}'"
        where = f" in {self.subject}" if self.subject else ""
        return StatementError(f"Syntax error at or near {near} (line {line}, pos {col}){where}: "
                              f"{expected}", "42000", tok.pos, tok.text)

    def at(self, *words: str) -> bool:
        tok = self.peek()
        return tok.kind == "word" and tok.value in words

    def accept(self, *words: str) -> bool:
        if self.at(*words):
            self.next()
            return True
        return False

    def expect(self, word: str, what: str | None = None) -> Token:
        if not self.at(word):
            raise self.error(f"expected {what or word.upper()}")
        return self.next()

    def accept_op(self, op: str) -> bool:
        tok = self.peek()
        if tok.kind == "op" and tok.value == op:
            self.next()
            return True
        return False

    def expect_op(self, op: str, what: str) -> None:
        if not self.accept_op(op):
            raise self.error(f"expected '{op}' {what}")

    def ident(self, what: str) -> str:
        tok = self.peek()
        if tok.kind == "ident" and tok.value.strip():
            self.next()
            return tok.value.lower()
        if tok.kind == "word" and tok.value not in self.reserved:
            self.next()
            return tok.value
        raise self.error(f"expected {what}")

    def string(self, what: str) -> str:
        tok = self.peek()
        if tok.kind != "str":
            raise self.error(f"expected {what} as a quoted string")
        self.next()
        return tok.value

    def end(self) -> None:
        self.accept_op(";")
        if self.peek().kind != "end":
            raise self.error("expected end of statement")

    def rest(self) -> tuple[str, int]:
        """The remaining text (a query), without a trailing ';'."""
        tok = self.peek()
        body = self.text[tok.pos:].rstrip()
        while body.endswith(";"):
            body = body[:-1].rstrip()
        return body, tok.pos
