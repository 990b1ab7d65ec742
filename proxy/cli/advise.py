"""`datamap-proxy advise`: the advisor of the running proxy, over HiveServer2 (like `sync`,
proxy/cli/sync.py): SHOW DATAMAP SUGGESTIONS, or EXPLAIN WHATIF of each statement of a file."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from proxy.cli.remote import remote_target, client_flags, run_statements


def add_parser(sub) -> None:
    v = sub.add_parser("advise", help="the datamap advisor's suggestions, or a what-if replay",
                       description="Connects to the running proxy and prints SHOW DATAMAP "
                                   "SUGGESTIONS, or with --what-if FILE the EXPLAIN WHATIF of "
                                   "each CREATE DATAMAP statement in FILE (separated by ';'): "
                                   "the logged workload replayed with it, nothing built "
                                   "(docs/advisor.md).")
    client_flags(v)
    v.add_argument("--what-if", metavar="FILE", dest="what_if",
                   help="CREATE DATAMAP statements to replay the logged workload against")
    v.add_argument("--timeout", type=float, default=600.0, metavar="SECONDS",
                   help="how long one answer may take (default 600)")


def run(a: argparse.Namespace) -> int:
    """`datamap-proxy advise`: SHOW DATAMAP SUGGESTIONS or EXPLAIN WHATIF on the running
    proxy (the advisor reads the proxy's query log and catalog)."""
    statements = ["SHOW DATAMAP SUGGESTIONS"]
    if a.what_if:
        try:
            text = Path(a.what_if).read_text()
        except OSError as e:
            print(f"error: cannot read --what-if file {a.what_if}: {e.strerror or e}",
                  file=sys.stderr)
            return 2
        statements = [f"EXPLAIN WHATIF {s}" for s in _split_statements(text)]
        if not statements:
            print(f"error: --what-if file {a.what_if} holds no statement", file=sys.stderr)
            return 2
    target = remote_target(a, "advise", statements[0].split(" CREATE")[0])
    if isinstance(target, int):
        return target
    up, user, password = target

    def show(result) -> int:
        if a.what_if:
            print("\n".join(str(r[0]) for r in result.rows) + "\n")
        else:
            print(_format_suggestions([c[0] for c in result.columns], result.rows))
        return 0
    return run_statements(up, user, password, statements, show)


def _split_statements(text: str) -> list[str]:
    """Statements separated by ';' outside quotes and comments; empty ones dropped."""
    out, cur, quote, i = [], [], None, 0
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\" and i + 1 < len(text):
                cur.append(text[i:i + 2])
                i += 2
                continue
            if ch == quote:
                quote = None
        elif ch in "'\"`":
            quote = ch
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
            continue
        elif ch == ";":
            out.append("".join(cur))
            cur = []
            i += 1
            continue
        cur.append(ch)
        i += 1
    out.append("".join(cur))
    return [s.strip() for s in out if s.strip()]


def _format_suggestions(columns: list[str], rows) -> str:
    """One block per suggestion: the table's lines are too wide for a CREATE statement."""
    if not rows:
        return "no suggestions: the query log holds no statement a datamap change would help"
    blocks = []
    for i, r in enumerate(rows, 1):
        lines = [f"{i}. {r[0]} {r[1]}"]
        lines += [f"   {c}: {'' if v is None else v}" for c, v in zip(columns[2:], r[2:])]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)
