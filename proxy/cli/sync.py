"""`datamap-proxy sync`: SYNC DATAMAPS on the running proxy."""
from __future__ import annotations

import argparse
import json
import sys

from proxy.cli.remote import remote_target, client_flags, run_statements


def add_parser(sub) -> None:
    y = sub.add_parser("sync", help="find files written to base tables outside the proxy",
                       description="Connects to the running proxy and runs SYNC DATAMAPS [ON "
                                   "TABLE t]: files that other applications wrote into base "
                                   "tables of datamaps become new segments, non-lazy datamaps "
                                   "are refreshed (rebuilt when files vanished), lazy ones "
                                   "disabled. Defaults come from the serve settings (--config, "
                                   "environment).")
    client_flags(y)
    y.add_argument("--table", action="append", metavar="DB.TABLE",
                   help="only this base table (repeatable); default: every base table of a "
                        "datamap")
    y.add_argument("--timeout", type=float, default=3600.0, metavar="SECONDS",
                   help="how long one sync may take (default 3600)")


def run(a: argparse.Namespace) -> int:
    """`datamap-proxy sync`: SYNC DATAMAPS on the running proxy, over HiveServer2 (in
    embedded mode the proxy owns the metastore and the catalog, so only it can do this)."""
    target = remote_target(a, "sync", "SYNC DATAMAPS")
    if isinstance(target, int):
        return target
    up, user, password = target
    tables = a.table or [None]
    for t in tables:
        if t is not None and not t.strip():
            print("error: --table needs a table name", file=sys.stderr)
            return 2

    def show(result) -> int:
        print(_format_rows([c[0] for c in result.columns], result.rows))
        if any(_has_failed(r[-1]) for r in result.rows):
            print("error: some datamaps could not be refreshed and are DISABLED "
                  "(see the rows above); REBUILD DATAMAP retries", file=sys.stderr)
            return 1
        return 0
    statements = ["SYNC DATAMAPS" + (f" ON TABLE {_quote_table(t)}" if t else "")
                  for t in tables]
    return run_statements(up, user, password, statements, show)


def _has_failed(actions) -> bool:
    """A SYNC DATAMAPS row's DataMaps column names a datamap that could not be refreshed."""
    from proxy.datamaps.upkeep.maintenance import RefreshOutcome
    try:
        return any(str(v).startswith(RefreshOutcome.FAILED) for v in json.loads(actions).values())
    except (TypeError, ValueError, AttributeError):
        return False


def _quote_table(name: str) -> str:
    """A --table value as typed (`db.t`, `` `db`.`t` ``, with spaces) -> a quoted name."""
    from pipeline.files import quote_table
    return quote_table(".".join(p.strip().strip("`") for p in name.strip().split(".")))


def _format_rows(columns: list[str], rows) -> str:
    cells = [[str(c) for c in columns]] + [["" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(row, widths)).rstrip() for row in cells]
    if not rows:
        lines.append("(no base tables with datamaps)")
    return "\n".join(lines)
