"""The advisor's answers as result sets (SHOW DATAMAP SUGGESTIONS, EXPLAIN WHATIF).

Columns and plan lines are docs/advisor.md's."""
from __future__ import annotations

from typing import Callable

from proxy.datamaps.catalog.records import display_name
from proxy.datamaps.ddl import parser as ddl
from proxy.logsafe import safe
from proxy.routing.router import LocalResult

SUGGESTION_COLUMNS = (("Kind", "string"), ("DataMap", "string"), ("Statement", "string"),
                      ("Queries", "bigint"), ("Base Seconds", "double"),
                      ("Estimated Saving Seconds", "double"), ("Estimated Rows", "bigint"),
                      ("Reason", "string"))
PLAN_COLUMNS = (("plan", "string"),)


def suggestions_result(advisor, _stmt: ddl.ShowSuggestions, current_db: str) -> LocalResult:
    rows = [(s.kind, display_name(s.datamap, current_db), s.sql, s.queries,
             round(s.base_seconds, 3), s.est_saving_s, s.est_rows, s.reason)
            for s in advisor.suggest()]
    return LocalResult(SUGGESTION_COLUMNS, rows)


def whatif_result(advisor, stmt: ddl.ExplainWhatIf, current_db: str) -> LocalResult:
    w = advisor.what_if_statement(stmt.create, current_db)
    window = advisor.settings.window
    lines = [f"WhatIf DataMap: {display_name(w.datamap, current_db)}",
             f"Queries examined: {w.queries} (query log, last {window})",
             f"Hits: {w.hits} (hit rate {100 * w.hit_rate:.1f}%)",
             f"Gained: {w.gained} (read the base tables when logged)",
             f"Estimated saving: {w.est_saving_s:.3f} s",
             "Estimated rows: " + ("unknown" if w.est_rows is None else str(w.est_rows)),
             "Estimated maintenance: " + (
                 "unknown (no build or refresh history in the catalog)"
                 if w.est_maintenance_s is None else f"{w.est_maintenance_s:.3f} s per build")]
    lines += [f"Example: {n} x {safe(shape, 300)}" for shape, n in w.examples]
    return LocalResult(PLAN_COLUMNS, [("\n".join(lines),)])


def answers(advisor) -> Callable[[ddl.ShowSuggestions | ddl.ExplainWhatIf, str], LocalResult]:
    """The datamap DDL handler's `advise`: SHOW DATAMAP SUGGESTIONS and EXPLAIN WHATIF
    answered by `advisor` (blocking: the handler runs it in a worker thread)."""
    def advise(stmt: ddl.ShowSuggestions | ddl.ExplainWhatIf, current_db: str) -> LocalResult:
        if isinstance(stmt, ddl.ShowSuggestions):
            return suggestions_result(advisor, stmt, current_db)
        return whatif_result(advisor, stmt, current_db)
    return advise
