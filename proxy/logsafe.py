"""Client-supplied text in log lines, and log lines a flood must not multiply.

`safe(text)` makes one log event stay one line: user names, SASL mechanism names, SQL and
anything else a client sends may carry newlines or terminal escapes that would otherwise
forge a line (or recolour a terminal). `Sampler` lets a caller log the first of a burst of
identical events and then one summary per interval, so a connection flood cannot turn into
a log flood. `redact(text)` masks secrets (passwords, tokens, credentials, passwords in
URLs); `RedactingFilter` applies it to every log line.
"""
from __future__ import annotations

import logging
import re
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


# ---------------------------------------------------------------------------- redaction
#
# What counts as a secret, by the name it is given: Kyuubi's redaction pattern, plus the
# spellings JDBC URLs and Spark OPTIONS use. Values under such names become MASK in log
# lines, the audit log, error messages and doctor output; the name stays, so a reader
# still sees that a password was given.
MASK = "***"
_WORD = r"(?:password|passwd|pwd|secret|token|credential|access[._-]?key)"
_KEYWORD = re.compile(_WORD, re.IGNORECASE)
_SECRET_KEY = re.compile(rf"[\w.:-]*{_WORD}[\w.:-]*", re.IGNORECASE)
# A quote left open (a statement cut short) runs to the end: half a password is one too.
_QUOTED = r"'(?:[^'\\]|\\.)*'?|\"(?:[^\"\\]|\\.)*\"?|`[^`]*`?"
# From the end of a secret word: the rest of the name, then `= value` (SET, JDBC ;k=v and
# ?k=v&, conf dumps) or `: "value"` / ` 'value'` (JSON, Spark OPTIONS). Repeats are
# bounded and matching starts only at a secret word, so a long input costs linear time.
_VALUE = re.compile(rf"[\w.:-]{{0,80}}['\"`]?[ \t]*(?:=[ \t]*({_QUOTED}|[^\s;&,)'\"]+)"
                    rf"|:?[ \t]*({_QUOTED}))")
# scheme://user:password@host (JDBC, PostgreSQL, LDAP URLs)
_URL_PASSWORD = re.compile(r"://[^\s/:@'\"]{0,256}:([^\s/@'\"]{1,256})@")


def secret_key(name: str) -> bool:
    """Whether a setting or option of this name holds a secret."""
    return bool(_SECRET_KEY.fullmatch(str(name).split(":")[-1]))


def _spans(text: str):
    for m in _KEYWORD.finditer(text):
        v = _VALUE.match(text, m.end())
        if v is not None:
            g = 1 if v.group(1) is not None else 2
            yield v.start(g), v.end(g)
    if "://" in text:
        for m in _URL_PASSWORD.finditer(text):
            yield m.start(1), m.end(1)


def redact(text: object) -> str:
    """`text` with every secret value replaced by MASK (quotes kept)."""
    text = text if isinstance(text, str) else str(text)
    out, pos = [], 0
    for a, b in sorted(_spans(text)):
        if a < pos:
            continue                # inside a value masked already
        value = text[a:b]
        q = value[0] if value[:1] in ("'", '"', "`") else ""
        out += [text[pos:a], q, MASK, q if value.endswith(q) and len(value) > 1 else ""]
        pos = b
    return "".join(out) + text[pos:] if out else text


def redact_conf(conf: dict | None) -> dict:
    """A copy of a configuration map with the values of secret keys masked (the keys of an
    OpenSession configuration arrive as set:hiveconf:k, set:hivevar:k or k)."""
    return {k: (MASK if secret_key(k) else redact(v)) for k, v in (conf or {}).items()}


class RedactingFilter(logging.Filter):
    """Installed on the log handlers by `serve`: whatever a log call formats (a client's
    statement, an exception text, a URL from the settings), secrets never reach the log."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string is logging's to report
            return True
        clean = redact(message)
        if record.exc_info and record.exc_text is None and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        if clean != message:
            record.msg, record.args = clean, None
        return True
