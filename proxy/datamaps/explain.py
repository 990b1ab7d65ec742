"""The lines of a datamap EXPLAIN (contract.md's preamble and what follows it) that say how
a query would be answered: the `== Datamap Rewrite ==` header with the datamap hit or the
reasons each was skipped (on a miss also the datamaps over the query's tables that were no
candidates), `Served by:` and `Result cache:` (docs/serving.md), an answer compensated with
new base files, and the `Approximate:` lines. The EXPLAIN runner that puts them together is
DatamapDdlHandler's (proxy/datamaps/handler.py); the external-format tables' EXPLAIN
(proxy/external/handler.py) uses the header too."""
from __future__ import annotations

from proxy.datamaps.catalog.records import display_name
from proxy.datamaps.service import DatamapService, referenced_tables
from proxy.serving import Served
from rewriter.api import RewriteResult


def add_unavailable(service: DatamapService, result: RewriteResult, query: str,
                    current_db: str) -> None:
    """A miss: say also why the datamaps over the query's tables that were no candidates
    (DISABLED, not in sync) did not answer it — what a user asks when a dashboard misses."""
    try:
        tables = referenced_tables(query, current_db)
    except Exception:  # noqa: BLE001 - Spark reports the syntax error itself
        return
    for name, reason in service.unavailable(tables).items():
        result.skipped.setdefault(name, reason)


def approximate_lines(result: RewriteResult) -> list[str]:
    """EXPLAIN's `Approximate:` lines: each aggregate estimated from a stored sketch
    (SET datamap.rewrite.approximate=true), whose value differs from Spark's own."""
    if not result.used:
        return []
    return [f"Approximate: {line} (not Spark's HLL++ estimate; "
            "SET datamap.rewrite.approximate=true)" for line in result.approximate]


def served_lines(serving, result: RewriteResult, conf, current_db: str | None = None
                 ) -> list[str]:
    """EXPLAIN's `Served by:` and `Result cache:` lines (docs/serving.md); `current_db`: the
    session's current database."""
    if not result.used:
        return ["Served by: spark", "Result cache: bypassed (not answered from a datamap)"]
    if serving is None:
        return ["Served by: spark (no local engine)", "Result cache: bypassed (not served "
                                                      "locally)"]
    if serving.enabled(conf) is None:      # a worker thread: may wait for the start
        serving.engine_problem(start=True)  # then plan() says when it cannot start
    served = serving.plan(result, conf, current_db)
    if not isinstance(served, Served):
        return [f"Served by: spark ({served})", "Result cache: bypassed (not served locally)"]
    by = "Served by: local engine" + (" (mirror)" if served.mirrored else "")
    return [by, f"Result cache: {serving.cache_state(served, conf)}"]


def compensated_line(served: str) -> str:
    """EXPLAIN's `Served by:` line of an answer compensated with new base files: `Served
    by: local engine (compensated with new base files)`, or Spark's with why."""
    if served == "Served by: local engine":
        return served + " (compensated with new base files)"
    if served == "Served by: local engine (mirror)":
        return "Served by: local engine (mirror; compensated with new base files)"
    why = served.removeprefix("Served by: spark").strip().removeprefix("(").removesuffix(")")
    return "Served by: spark (compensated with new base files" + (f"; {why})" if why else ")")


def explain_header(result: RewriteResult, current_db: str | None = None,
                   served: list[str] | None = None) -> str:
    """contract.md's EXPLAIN preamble, ending with the blank line."""
    lines = ["== Datamap Rewrite =="]
    if result.used:
        lines += [f"Hit mv DataMap: {display_name(name, current_db)}" for name in result.used]
    else:
        lines.append("No datamap hit")
    lines.append(f"Rewritten SQL: {result.sql}")
    if not result.used:
        # a reason without a datamap's name is about every one (the rewrite index has
        # not read the catalog yet)
        lines += [f"Skipped {display_name(name, current_db)}: {reason}" if name
                  else f"Skipped: {reason}" for name, reason in result.skipped.items()]
    lines += served or []          # added after contract.md's lines, before the blank one
    lines.append("")
    return "\n".join(lines)
