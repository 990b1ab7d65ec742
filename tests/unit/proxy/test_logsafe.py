"""Client-supplied text in a log line stays one line and bounded (issue 10, defect 5)."""
from proxy.logsafe import safe


def test_control_characters_are_escaped_so_one_event_is_one_line():
    out = safe("bob\n2026-01-01 INFO forged\r\x1b[31m\t\\ \u2028x")
    assert "\n" not in out and "\r" not in out and "\x1b" not in out and "\u2028" not in out
    assert out == "bob\\n2026-01-01 INFO forged\\r\\x1b[31m\\t\\\\ \\u2028x"


def test_long_text_is_cut_with_a_marker():
    out = safe("x" * 1000 + "\n", limit=10)
    assert out == "x" * 10 + "…[+991 chars]"
    assert safe("short", limit=10) == "short" and safe(None) == ""
