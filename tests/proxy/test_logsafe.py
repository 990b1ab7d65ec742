import pytest

from proxy.logsafe import Sampler, safe


@pytest.mark.parametrize("text,expected", [
    ("alice", "alice"),
    ("bob\nFORGED 2026 INFO proxy: ready", "bob\\nFORGED 2026 INFO proxy: ready"),
    ("a\r\nb\tc", "a\\r\\nb\\tc"),
    ("\x1b[31mred", "\\x1b[31mred"),                 # terminal escape
    ("line\u2028sep\x85", "line\\u2028sep\\x85"),    # Unicode line breaks too
    ("héllo wörld", "héllo wörld"),                 # printable non-ASCII stays readable
    (b"mech\nX", "b'mech\\nX'"),
    (None, "None"),
])
def test_one_event_stays_one_line(text, expected):
    out = safe(text)
    assert out == expected
    assert len(out.splitlines()) <= 1


def test_truncates_before_escaping_and_says_how_much():
    assert safe("x" * 1000, 10) == "x" * 10 + "…(+990 chars)"
    assert safe("\n" * 50, 3) == "\\n\\n\\n…(+47 chars)"
    assert safe("y" * 10, 10) == "y" * 10


def test_sampler_logs_first_then_one_line_per_interval_with_count():
    now = [0.0]
    s = Sampler(interval=10.0, max_keys=2, clock=lambda: now[0])
    assert s.take("a") == 0
    assert [s.take("a") for _ in range(5)] == [None] * 5
    now[0] = 10.0
    assert s.take("a") == 5                      # the summary: five held back
    assert s.take("b") == 0 and s.take("c") == 0
    assert len(s._keys) == 2                     # bounded: "a" was dropped
    assert s.take("a") == 0
