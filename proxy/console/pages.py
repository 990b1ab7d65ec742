"""The console's pages as HTML strings, from the values views.py gathers (no I/O here):
the datamap list, one datamap, an action's confirmation, and the sign-in page. The query
and suggestion pages are in pages_log.py."""
from __future__ import annotations

import time

from proxy.console import chart
from proxy.console.actions import ACTIONS, ActionRecord
from proxy.console.markup import (
    ago, badge, count, duration, e, hidden, note, page, size, table, url, when,
)
from proxy.console.views import Detail, Serving, Summary
from proxy.datamaps.ddl.show import segment_status
from proxy.logsafe import redact

LABELS = {"rebuild": "REBUILD", "compact_minor": "COMPACT MINOR",
          "compact_major": "COMPACT MAJOR", "disable_rewrite": "DISABLE QUERY REWRITE",
          "enable_rewrite": "ENABLE QUERY REWRITE"}
_NO_LOG = "the query log is off ([querylog] enabled = false): no hits or time saved"


def login(error: str | None = None, kerberos: bool = False) -> str:
    if kerberos:
        body = ('<div class="login"><h1>Sign in</h1><p>This proxy uses Kerberos: the console '
                "signs you in with SPNEGO. Use a browser set up for Negotiate with this "
                "host, holding a ticket (kinit).</p>"
                + (note(e(error), error=True) if error else "") + "</div>")
        return page("Sign in", body)
    err = note(e(error), error=True) if error else ""
    body = ('<form class="login" method="post" action="/login"><h1>Sign in</h1>'
            f'{err}<label>User<input name="user" autocomplete="username" autofocus></label>'
            '<label>Password<input name="password" type="password" '
            'autocomplete="current-password"></label>'
            '<button class="primary" type="submit">Sign in</button></form>')
    return page("Sign in", body)


def message(title: str, text: str, *, user: str | None = None, csrf: str = "") -> str:
    return page(title, f"<h1>{e(title)}</h1>" + note(e(text)), user=user, csrf=csrf)


def _status(s: Summary) -> str:
    kind = "ok" if s.status == "ENABLED" and s.reason is None else (
        "warn" if s.status == "ENABLED" else "bad")
    label = s.status if s.reason is None or s.status != "ENABLED" else "ENABLED, not in sync"
    return badge(label, kind)


def _rewrite(on: bool) -> str:
    return badge("on", "ok") if on else badge("off", "warn")


def _freshness(s: Summary, now: float) -> str:
    if s.as_of is None:
        return '<span class="muted">not built</span>'
    age = f"data as of {e(ago(now - s.as_of))} ago"
    if s.pending:
        return f'{age}; <span class="warn">{s.pending} base segment(s) pending</span>'
    return age if s.reason is None else f'{age}; <span class="warn">{e(s.reason)}</span>'


def serving_line(s: Serving) -> str:
    """The datamap list's line on in-process serving (HTML)."""
    head = "In-process serving: "
    if s.state == "up":
        return note(f"{head}{badge('up', 'ok')} {e(s.engine)}: datamap answers it can "
                    "compute are served from the datamap files")
    if s.state == "down":
        return note(f"{head}{badge('down', 'bad')} {e(s.engine)} could not start: "
                    f"{e(s.cause)} (since {e(when(s.since))}). Fix: {e(s.fix)}. Datamap "
                    f"answers come from Spark until it starts (tried again every "
                    f"{s.retry_s:g} s).", error=True)
    if s.state == "off":
        return note(f"{head}{badge('off', 'warn')} [serving] enabled = false: datamap "
                    "answers come from Spark")
    return note(f"{head}{badge(s.state, 'warn')}")


def mirror_line(m) -> str:
    """The segment mirror's state per datamap (HTML): copies of segments the proxy cannot
    open, served in-process (docs/serving.md)."""
    head = (f"Segment mirror ({e(m.mode)}): {e(size(m.bytes))} of {e(size(m.max_bytes))}")
    if not m.datamaps:
        return note(f"{head}; no segment needs it")
    parts = []
    for name, held, nbytes, missing in m.datamaps:
        text = f"{e(name)}: {held} of {held + len(missing)} segments mirrored ({e(size(nbytes))})"
        if missing:
            why = "; ".join(f"segment {e(sid)}: {e(reason)}" for sid, reason in missing[:3])
            more = f" and {len(missing) - 3} more" if len(missing) > 3 else ""
            text += f' <span class="warn">{why}{more}</span>'
        parts.append(text)
    return note(f"{head}. " + ". ".join(parts))


def saved(s: Summary) -> str:
    """Time saved, an estimate (the base-table time of its hits' shapes, scaled by the
    base tables' rows: docs/querylog.md), so written with "≈"; "not measured yet" while
    none of its hits' shapes ran on the base tables (never a 0 that reads as worthless);
    NA with the query log off."""
    if s.saved_s is None:
        return "NA" if s.hits is None else "not measured yet"
    if s.measured is not None and s.hits and s.measured < s.hits:
        # the other hits' shapes had not run on the base tables: not counted, and said so
        return f"≈ {duration(s.saved_s)} ({s.measured} of {s.hits} hits measured)"
    return f"≈ {duration(s.saved_s)}"


def _saved_chart(usage: list[tuple[float, int, float | None]]) -> str:
    """The estimated seconds saved per hour; a note instead when the window has hits but
    none of them could be measured (a chart of zeros would say they saved nothing)."""
    if any(h for _, h, _ in usage) and all(sv is None for _, h, sv in usage if h):
        return note("time saved per hour: not measured yet (none of these hits' shapes "
                    "ran on the base tables, nor did the online audit run them there)")
    return chart.bars([(a, sv or 0.0) for a, _, sv in usage],
                      title="estimated seconds saved per hour", unit=" s",
                      colour="#1e7b3a")


def datamaps(rows: list[Summary], *, user: str, csrf: str, log_on: bool,
             now: float | None = None, serving: Serving | None = None) -> str:
    now = time.time() if now is None else now
    body = ['<h1>Datamaps</h1>']
    if serving is not None:
        body.append(serving_line(serving))
        if serving.mirror is not None:
            body.append(mirror_line(serving.mirror))
    if not log_on:
        body.append(note(e(_NO_LOG)))
    body.append(table(
        ["DataMap", "Status", "Rewrite", "Segments", "Rows", "Size", "Freshness", "Hits",
         "Time saved (estimate)"],
        [(f'<a href="{e(url("/datamaps/" + s.qualified))}">{e(s.qualified)}</a>',
          _status(s), _rewrite(s.rewrite), count(s.segments), count(s.rows), e(size(s.size)),
          _freshness(s, now), count(s.hits), e(saved(s)))
         for s in rows],
        numeric=(3, 4, 5, 7, 8), empty="no datamaps yet: CREATE DATAMAP ... makes one"))
    return page("Datamaps", "".join(body), user=user, csrf=csrf, here="datamaps")


def _buttons(s: Summary) -> str:
    wanted = ["rebuild", "compact_minor", "compact_major",
              "disable_rewrite" if s.rewrite else "enable_rewrite"]
    # a GET to the confirmation page: nothing changes before the POST there
    return "".join(
        f'<form class="inline" method="get" action="{e(url("/datamaps/" + s.qualified + "/confirm"))}">'
        f'{hidden("action", a)}<button type="submit"{" class=danger" if a == "disable_rewrite" else ""}>'
        f"{LABELS[a]}</button></form>" for a in wanted)


def action_rows(records: list[ActionRecord]) -> str:
    def state(r: ActionRecord) -> str:
        if r.state == "failed":
            return badge("failed", "bad") + f" <code>{e(r.sqlstate)}</code> {e(r.message)}"
        return badge(r.state, "ok" if r.state == "done" else "warn")
    return table(["Started", "By", "Statement", "State", "Took"],
                 [(e(when(r.at)), e(r.user), f"<code>{e(r.sql)}</code>", state(r),
                   e(duration(r.ended - r.at) if r.ended else "running"))
                  for r in records], empty="no console actions since the proxy started")


def datamap(d: Detail, actions: list[ActionRecord], *, user: str, csrf: str,
            flash: ActionRecord | None = None, now: float | None = None) -> str:
    now = time.time() if now is None else now
    s, rec = d.summary, d.record
    out = [f"<h1>Datamap {e(s.qualified)}</h1>"]
    if flash is not None:
        if flash.state == "failed":
            out.append(note(f"<code>{e(flash.sql)}</code> failed: SQLSTATE "
                            f"<code>{e(flash.sqlstate)}</code>: {e(flash.message)}", error=True))
        else:
            word = "started; its progress shows below" if flash.state == "running" else flash.state
            out.append(note(f"<code>{e(flash.sql)}</code> {e(word)}"))
    out.append(f'<div>{_buttons(s)}</div>')
    out.append('<dl class="facts">'
               f"<dt>Status</dt><dd>{_status(s)} {e(s.status_reason) if s.status != 'ENABLED' else ''}</dd>"
               f"<dt>Query rewrite</dt><dd>{_rewrite(s.rewrite)}</dd>"
               f"<dt>Provider</dt><dd>{e(rec.provider)}</dd>"
               f"<dt>Table</dt><dd><code>{e(rec.table)}</code></dd>"
               f"<dt>Base tables</dt><dd>{e(', '.join(rec.base_tables))}</dd>"
               f"<dt>Freshness</dt><dd>{_freshness(s, now)}</dd>"
               f"<dt>Segments</dt><dd>{count(s.segments)} visible, {count(s.rows)} rows, "
               f"{e(size(s.size))}</dd>"
               f"<dt>Created</dt><dd>{e(when(rec.created_at))}</dd>"
               f"<dt>Hits</dt><dd>{count(s.hits)} (time saved {e(saved(s))}"
               f"{', estimated' if s.saved_s is not None else ''})</dd>"
               "</dl>")
    out.append("<h2>Definition</h2>" + f"<pre>{e(rec.original_sql)}</pre>")
    out.append("<h2>DMPROPERTIES</h2>" + table(
        ["Property", "Value"], [(e(k), e(v)) for k, v in sorted(rec.properties.items())]))
    out.append("<h2>Hits and estimated time saved, last 24 hours</h2>")
    if d.usage is None:
        out.append(note(e(_NO_LOG)))
    else:
        out.append(chart.bars([(a, h) for a, h, _ in d.usage], title="hits per hour"))
        out.append(_saved_chart(d.usage))
    out.append("<h2>Segments</h2>" + table(
        ["Segment", "Status", "Made by", "Rows", "Files", "Size", "Load start", "Load time",
         "Base segments"],
        [(e(g.id), e(segment_status(g.status)), e(g.kind or ""), count(g.rows), count(len(g.files)),
          e(size(d.sizes.get(g.id))), e(when(g.load_start)), e(duration(g.load_seconds)),
          e("; ".join(f"{t}: {', '.join(ids)}" for t, ids in sorted(g.extra_info.items()))))
         for g in d.segments], numeric=(3, 4, 5), empty="no segments: not built yet"))
    out.append("<h2>Recent queries it answered</h2>")
    out.append(note(e(_NO_LOG)) if d.answered is None else table(
        ["At", "User", "Tool", "Decision", "Duration", "Rows", "Statement"],
        [(e(when(q.at)), e(q.user), e(q.client), e(q.decision), e(duration(q.duration_s)),
          count(q.rows), f"<code>{e(redact(_cut(q.statement)))}</code>") for q in d.answered],
        empty="none logged"))
    out.append("<h2>Console actions</h2>" + action_rows(actions))
    out.append("<h2>History</h2>" + table(
        ["At", "Event", "Rows", "Took", "Detail"],
        [(e(when(v.at)), e(v.kind), count(v.rows), e(duration(v.seconds)), e(v.detail))
         for v in d.events[:200]], empty="no history"))
    return page(f"Datamap {s.qualified}", "".join(out), user=user, csrf=csrf, here="datamaps")


def confirm(qualified: str, action: str, sql: str, *, user: str, csrf: str) -> str:
    long = ACTIONS[action][1]
    body = (f"<h1>{e(LABELS[action])} {e(qualified)}?</h1>"
            f"<p>This runs</p><pre>{e(sql)}</pre>"
            + ("<p>It runs on Spark and may take minutes; the datamap page shows its "
               "progress.</p>" if long else "")
            + f'<form method="post" action="{e(url("/datamaps/" + qualified + "/action"))}">'
            f'{hidden("csrf", csrf)}{hidden("action", action)}'
            f'<button class="primary" type="submit">Run {e(LABELS[action])}</button> '
            f'<a href="{e(url("/datamaps/" + qualified))}">Cancel</a></form>')
    return page("Confirm", body, user=user, csrf=csrf, here="datamaps")


def _cut(text: str, limit: int = 400) -> str:
    return text if len(text) <= limit else text[:limit] + "…"

