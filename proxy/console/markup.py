"""HTML building blocks of the console's pages: escaping, the page frame, tables and the
formats of times, durations and sizes. Everything user-supplied or read from the catalog
or the query log goes through `e()`; statements shown are redacted by the caller."""
from __future__ import annotations

import html
import time
from typing import Iterable, Sequence
from urllib.parse import quote

from proxy.console.style import CSS

NAV = (("datamaps", "/datamaps", "Datamaps"), ("queries", "/queries", "Recent queries"),
       ("suggestions", "/suggestions", "Suggestions"))


def e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def url(path: str, **query: object) -> str:
    q = "&".join(f"{k}={quote(str(v), safe='')}" for k, v in query.items() if v not in (None, ""))
    return path + ("?" + q if q else "")


def page(title: str, body: str, *, user: str | None = None, csrf: str = "",
         here: str = "") -> str:
    nav = "".join(f'<a href="{href}"{" class=here" if key == here else ""}>{label}</a>'
                  for key, href, label in NAV)
    who = ""
    if user is not None:
        who = (f'<span class="who">signed in as <b>{e(user)}</b>'
               f'<form class="inline" method="post" action="/logout">{hidden("csrf", csrf)}'
               '<button type="submit">Sign out</button></form></span>')
    head = (f'<header><span class="brand">datamap-proxy</span><nav>{nav}</nav>{who}</header>'
            if user is not None else "")
    return ("<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width'><title>{e(title)} · "
            f"datamap-proxy</title><style>{CSS}</style></head><body>{head}<main>"
            f"{body}</main></body></html>")


def hidden(name: str, value: str) -> str:
    return f'<input type="hidden" name="{e(name)}" value="{e(value)}">'


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], *, numeric: Iterable[int] = (),
          empty: str = "none", cls: str = "") -> str:
    """`rows` hold HTML already (cells built with e())."""
    nums = set(numeric)
    head = "".join(f"<th>{e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f'<td{" class=num" if i in nums else ""}>{c}</td>'
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    if not body:
        body = f'<tr><td colspan="{len(headers)}" class="muted">{e(empty)}</td></tr>'
    return f'<table{f" class={cls}" if cls else ""}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def note(text: str, error: bool = False) -> str:
    """`text` is HTML already."""
    return f'<div class="note{" error" if error else ""}">{text}</div>'


def badge(text: str, kind: str) -> str:
    return f'<span class="badge {kind}">{e(text)}</span>'


def when(at: float | None) -> str:
    if at is None:
        return "NA"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(at)) + " UTC"


def ago(seconds: float | None) -> str:
    if seconds is None:
        return "NA"
    s = max(0.0, seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if s >= size:
            return f"{s / size:.1f} {unit}"
    return f"{s:.0f} s"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "NA"
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def size(n: int | None) -> str:
    if n is None:
        return "NA"
    v = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if v < 1024 or unit == "GiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return f"{v:.1f} TiB"   # pragma: no cover


def count(n: int | None) -> str:
    return "NA" if n is None else f"{n:,}"
