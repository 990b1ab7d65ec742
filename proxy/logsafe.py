"""Client-supplied text in log lines: one event = one line.

User names, mechanism names and SQL come from the network; written raw, a newline in them
forges a log line. `safe` escapes control characters and truncates with a marker.
"""
from __future__ import annotations


def safe(text: object, limit: int = 200) -> str:
    """`text` with control characters escaped (\\n, \\x1b, ...) and cut to about `limit`
    characters, the cut marked with the number of characters left out."""
    s = text if isinstance(text, str) else str(text)
    cut = len(s) - limit if limit >= 0 and len(s) > limit else 0
    if cut:
        s = s[:limit]
    out = s.encode("unicode_escape").decode("ascii") if not s.isprintable() else s
    return f"{out}…[+{cut} chars]" if cut else out
