"""The console's pages over the query log and the advisor: recent queries (filtered by
user, decision, datamap) and the advisor's suggestions. Statements are redacted here
(logsafe.redact) even though the query log stores them redacted already."""
from __future__ import annotations

from proxy.console.markup import count, duration, e, note, page, table, url, when
from proxy.logsafe import redact

DECISIONS = ("", "forwarded", "rewritten", "served", "local", "refused", "bypassed")


def _why_not(q) -> str:
    parts = []
    if getattr(q, "reason_class", None):
        parts.append(f"<b>{e(q.reason_class)}</b>")
    parts += [f"{e(dm)}: {e(reason)}" for dm, reason in (q.why_not or ())[:5]]
    return "<br>".join(parts)


def _outcome(q) -> str:
    return e(q.outcome) + (f" <code>{e(q.sqlstate)}</code>" if q.sqlstate else "")


def _statement(text: str, limit: int = 300) -> str:
    text = redact(text or "")
    return f"<code>{e(text if len(text) <= limit else text[:limit] + '…')}</code>"


def queries(entries: list | None, *, user: str, csrf: str, filters: dict[str, str]) -> str:
    out = ["<h1>Recent queries</h1>"]
    if entries is None:
        out.append(note("The query log is off ([querylog] enabled = false): nothing is "
                        "recorded to show here."))
        return page("Recent queries", "".join(out), user=user, csrf=csrf, here="queries")
    chosen = filters.get("decision", "")
    options = "".join(f'<option value="{e(d)}"{" selected" if d == chosen else ""}>'
                      f'{e(d or "any")}</option>' for d in DECISIONS)
    out.append('<form class="filters" method="get" action="/queries">'
               f'<label>User<input name="user" value="{e(filters.get("user", ""))}"></label>'
               f'<label>Decision<select name="decision">{options}</select></label>'
               f'<label>Datamap<input name="datamap" placeholder="db.name" '
               f'value="{e(filters.get("datamap", ""))}"></label>'
               '<button type="submit">Filter</button> <a href="/queries">clear</a></form>')
    out.append(table(
        ["At", "User", "Tool", "Decision", "Datamaps", "Why not", "Duration", "Rows",
         "Outcome", "Statement"],
        [(e(when(q.at)), e(q.user), e(q.client), e(q.decision),
          ", ".join(f'<a href="{e(url("/datamaps/" + dm))}">{e(dm)}</a>' for dm in q.datamaps),
          _why_not(q), e(duration(q.duration_s)), count(q.rows), _outcome(q),
          _statement(q.statement)) for q in entries],
        numeric=(6, 7), empty="no statements logged (with these filters)"))
    return page("Recent queries", "".join(out), user=user, csrf=csrf, here="queries")


def suggestions(items: list | None, *, user: str, csrf: str, error: str | None = None) -> str:
    out = ["<h1>Suggestions</h1>"]
    if error is not None:
        out.append(note(e(error), error=True))
    elif items is None:
        out.append(note("The advisor is off (it needs the query log: [querylog] enabled)."))
    else:
        out.append("<p class=muted>From the query log: datamaps that would answer the most "
                   "base-table time, near misses, and datamaps that cost more than they save. "
                   "Review a statement, then run it from a SQL client.</p>")
        out.append(table(
            ["Kind", "DataMap", "Queries", "Base time", "Est. saving", "Est. rows",
             "Est. maintenance", "Reason", "Statement"],
            [(e(s.kind), e(s.datamap), count(s.queries), e(duration(s.base_seconds)),
              e(duration(s.est_saving_s)), count(s.est_rows), e(duration(s.est_maintenance_s)),
              e(s.reason), f"<pre>{e(s.sql)}</pre>") for s in items],
            numeric=(2, 3, 4, 5, 6), empty="no suggestions: the logged workload is answered "
                                           "well, or too little is logged yet"))
    return page("Suggestions", "".join(out), user=user, csrf=csrf, here="suggestions")
