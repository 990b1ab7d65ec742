"""Client-supplied text made safe for a log line: one event is one line.

A newline or other control character in a user name, mechanism name or statement would
otherwise start what looks like a second, forged log line; a multi-megabyte statement
would flood the log.
"""
from __future__ import annotations

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}


def safe(text: str, limit: int = 200) -> str:
    """`text` with control characters escaped (\\n, \\r, \\t, \\xNN, \\uNNNN) and cut to
    `limit` characters of the original, marked with how much was left out."""
    text = "" if text is None else str(text)
    cut = len(text) - limit if limit >= 0 and len(text) > limit else 0
    head = text[:limit] if cut else text
    out = []
    for ch in head:
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        else:
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
    if cut:
        out.append(f"…[+{cut} chars]")
    return "".join(out)
