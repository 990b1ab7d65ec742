"""Client-supplied text in log lines, and log lines a flood must not multiply.

`safe(text)` makes one log event stay one line: user names, SASL mechanism names, SQL and
anything else a client sends may carry newlines or terminal escapes that would otherwise
forge a line (or recolour a terminal). `Sampler` lets a caller log the first of a burst of
identical events and then one summary per interval, so a connection flood cannot turn into
a log flood.
"""
from __future__ import annotations

import time
from collections import OrderedDict
from typing import Callable


def _escape(ch: str) -> str:
    return repr(ch)[1:-1]          # \n, \x1b, \u2028: visible, and never a line break


def safe(text: object, limit: int = 200) -> str:
    """`text` cut to `limit` characters, with every non-printable character escaped.

    Truncation comes first so that a multi-megabyte statement costs O(limit) here; the
    marker says how much was cut so a reader knows the line is partial."""
    if not isinstance(text, str):
        text = str(text)           # bytes come out as their (escaped) repr
    cut = len(text) - limit
    if cut > 0:
        text = text[:limit]
    if not text.isprintable():
        text = "".join(c if c.isprintable() else _escape(c) for c in text)
    return f"{text}…(+{cut} chars)" if cut > 0 else text


class Sampler:
    """Decides which events of a repeating kind get a log line.

    `take(key)` is None while the key logged less than `interval` seconds ago; otherwise it
    returns how many events of that key were held back since its last line (0 at first).
    Keys are bounded (least recently logged dropped first), so distinct keys chosen by a
    client cannot grow memory."""

    def __init__(self, interval: float = 10.0, max_keys: int = 1024,
                 clock: Callable[[], float] = time.monotonic):
        self.interval = interval
        self.max_keys = max_keys
        self._clock = clock
        self._keys: OrderedDict[object, list] = OrderedDict()   # key -> [last logged, held back]

    def take(self, key: object = None) -> int | None:
        now = self._clock()
        entry = self._keys.get(key)
        if entry is not None and now - entry[0] < self.interval:
            entry[1] += 1
            return None
        held = entry[1] if entry is not None else 0
        self._keys[key] = [now, 0]
        self._keys.move_to_end(key)
        while len(self._keys) > self.max_keys:
            self._keys.popitem(last=False)
        return held
