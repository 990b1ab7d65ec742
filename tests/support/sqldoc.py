"""Reading docs/sql.md (and any page's ```sql blocks) for the tests that hold the docs to
the code: its entries ("### STATEMENT" sections with a grammar block, an output columns
table, SQLSTATEs and ```sql examples), which statement an example is, and whether a
```sql statement parses. No Spark: the proxy's own parsers and sqlglot."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SQL_DOC = ROOT / "docs" / "sql.md"
_BLOCK = re.compile(r"```(\w*)\n(.*?)```", re.S)


def block_statements(block: str) -> list[tuple[str, str]]:
    """A ```sql block's statements (whitespace folded) with the `--` comment after each;
    a comment on a line of its own continues the previous statement's."""
    pairs: list[tuple[str, str]] = []
    text = ""
    for line in block.splitlines():
        code, _, comment = line.partition("--")
        if not code.strip() and pairs and not text:
            pairs[-1] = (pairs[-1][0], pairs[-1][1] + " " + comment.strip())
            continue
        *done, text_tail = (text + " " + code).split(";")
        for stmt in done:
            pairs.append((" ".join(stmt.split()), ""))
        if done and comment:
            pairs[-1] = (pairs[-1][0], comment.strip())
        text = text_tail if text_tail.strip() else ""
    return pairs


def unterminated(block: str) -> str:
    """SQL text after the block's last `;` (block_statements drops it), or ""."""
    code = "\n".join(line.partition("--")[0] for line in block.splitlines())
    return code.rpartition(";")[2].strip()


def sql_blocks(doc: Path) -> list[str]:
    """The text of every ```sql block of a page, in order."""
    return [body for lang, body in _BLOCK.findall(doc.read_text()) if lang == "sql"]


@dataclass
class Entry:
    heading: str                                  # "SHOW SEGMENTS (external-format table)"
    body: str
    grammar: list[str] = field(default_factory=list)
    columns: list[tuple[str, str]] = field(default_factory=list)   # (name, spark type)
    examples: list[str] = field(default_factory=list)

    def owns(self, statement: str) -> bool:
        """The statement is this entry's own (not a setup statement of its example): it
        starts as the heading says (a parenthesised tail of the heading is a note, `…`
        stands for any text) or with the keywords a grammar line starts with."""
        head = re.sub(r"\s*\(.*\)\s*$", "", self.heading)
        patterns = [r"\s*".join(".*" if part == "…" else re.escape(part)
                                for part in re.split(r"\s*(…)\s*", head) if part)]
        for block in self.grammar:
            patterns += [_leading_keywords(line) for line in block.splitlines()
                         if line[:1].isalpha()]
        return any(re.match(p + r"\b", statement, re.I) for p in patterns)


def _leading_keywords(line: str) -> str:
    """"DESC | DESCRIBE [TABLE] ..." -> a pattern of its leading upper-case keywords."""
    words: list[str] = []
    tokens = line.split()
    for i, tok in enumerate(tokens):
        if tok == "|" and words and i + 1 < len(tokens):
            continue
        if not re.fullmatch(r"[A-Z_]+", tok):
            break
        if i and tokens[i - 1] == "|":
            words[-1] = f"(?:{words[-1]}|{tok})"
        else:
            words.append(tok)
    return r"\s+".join(words)


def entries(doc: Path = SQL_DOC) -> list[Entry]:
    """The page's "### " sections, with what each holds."""
    return [e for e, _ in walk(doc.read_text()) if e is not None]


def walk(text: str) -> list[tuple[Entry | None, list[tuple[str, str]]]]:
    """The page in order: each "##"/"###" section's entry (None for a "## " section's
    own text) with its ```sql statements and their comments."""
    out = []
    for chunk in re.split(r"^(?=##+ )", text, flags=re.M):
        heading, _, body = chunk.partition("\n")
        if not heading.startswith("#"):
            continue
        e = Entry(heading[4:].strip(), body) if heading.startswith("### ") else None
        statements = []
        for lang, block in _BLOCK.findall(body):
            if lang == "sql":
                statements += block_statements(block)
            elif lang == "text" and e is not None:
                e.grammar.append(block)
        if e is not None:
            e.examples = [stmt for stmt, _ in statements]
            e.columns = _columns(body)
        out.append((e, statements))
    return out


def _columns(body: str) -> list[tuple[str, str]]:
    lines = body.splitlines()
    for i, line in enumerate(lines):
        if re.match(r"\|\s*Column\s*\|\s*Type\s*\|", line):
            cols = []
            for row in lines[i + 2:]:
                if not row.startswith("|"):
                    break
                cells = [c.strip() for c in row.strip("|").split("|")]
                cols.append((cells[0].strip("`"), cells[1]))
            return cols
    return []


def statement_kind(statement: str) -> str | None:
    """Which of the proxy's own statements this is, by its parsers: a DDL class name
    ("CreateDatamap", "AddSegment", ...), "SET <key>" for a session setting, or None for
    a statement Spark answers. Raises the parser's error for a malformed one."""
    from proxy.routing.classify import Kind, classify
    from proxy.datamaps.ddl import parser as ddl
    from proxy.external import grammar
    parsed = ddl.parse(statement)
    if parsed is not None:
        return type(parsed).__name__
    for parse in (grammar.parse_create, grammar.parse_alter, grammar.parse_delete_segments):
        got = parse(statement)
        if got is not None:
            return type(got).__name__
    stmt = classify(statement)
    if stmt.kind is Kind.SET_REWRITE:
        return f"SET {stmt.key}"
    if stmt.kind is Kind.SET and stmt.key and stmt.key.lower().startswith(grammar.SEGMENTS_KEY):
        return "SET carbon.input.segments"
    return None


def check_parses(statement: str) -> None:
    """Raise when a ```sql statement is not SQL: the proxy's parsers for its own
    statements (an EXPLAIN's query by sqlglot too), sqlglot's Spark dialect for the rest."""
    import sqlglot
    from proxy.datamaps.ddl import parser as ddl
    kind = statement_kind(statement)
    if kind == "Explain":
        statement = ddl.parse(statement).query
    elif kind is not None:
        return
    sqlglot.parse_one(statement, dialect="spark",
                      error_level=sqlglot.ErrorLevel.RAISE)
