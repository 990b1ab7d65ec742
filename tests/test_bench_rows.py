"""The benches' row comparison: rows that tie at a LIMIT's cut may differ, nothing else."""
from __future__ import annotations

from decimal import Decimal as D

from bench.rows import same_rows, tied_at_limit

SQL = "SELECT d, mode, sum(q) FROM t GROUP BY 1, 2 ORDER BY 1 DESC\nLIMIT 3"
BASE = [("1998-09-22", "AIR", D(1)), ("1998-09-21", "AIR", D(5363)),
        ("1998-09-21", "FOB", D(2))]


def test_rows_tying_with_the_last_one_may_differ():
    other = [BASE[0], ("1998-09-21", "MAIL", D(5745)), BASE[2]]
    assert same_rows(BASE, other, False) is not None
    assert tied_at_limit(BASE, other, SQL)


def test_any_other_difference_is_a_mismatch():
    wrong_head = [("1998-09-22", "FOB", D(9))] + BASE[1:]
    assert not tied_at_limit(BASE, wrong_head, SQL)
    wrong_value = BASE[:2] + [("1998-09-21", "FOB", D(3))]
    assert tied_at_limit(BASE, wrong_value, SQL)    # FOB's row may be left out at the cut
    assert not tied_at_limit(BASE, BASE[:2] + [("1998-09-20", "FOB", D(2))], SQL)
    named = SQL.replace("ORDER BY 1", "ORDER BY d")                 # not judged
    assert not tied_at_limit(BASE, [BASE[0], ("1998-09-21", "MAIL", D(5745)), BASE[2]], named)
    assert not tied_at_limit(BASE, [BASE[0], ("1998-09-21", "MAIL", D(1)), BASE[2]],
                             SQL.replace("LIMIT 3", "LIMIT 4"))     # not cut by the LIMIT
    assert not tied_at_limit(BASE, BASE[:2], SQL)                   # a row missing
