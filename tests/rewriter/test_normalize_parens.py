"""canonical_expr drops the parentheses a query was written with; those its meaning needs
must come back, else the rewrite prints (and runs) `a - 1 * c` for `(a - 1) * c`."""
import pytest
import sqlglot

from rewriter.normalize import canonical_expr


@pytest.mark.parametrize("written,canonical", [
    ("-(month(d) - 1) % 3", "-(MONTH(d) - 1) % 3"),       # Superset's Hive P3M grain
    ("(a - 1) * c", "(a - 1) * c"),
    ("((a - b)) - (c - d)", "a - b - (c - d)"),
    ("a / (b * c)", "a / (b * c)"),
    ("~(a + b)", "~(a + b)"),
    ("-(-a)", "-(-a)"),
    ("-(-(a + b)) * 2", "-(-(a + b)) * 2"),
    ("NOT (a OR b) AND c", "NOT (a OR b) AND c"),
    ("(a AND b) AND (c AND d)", "a AND b AND c AND d"),
    ("NOT (a IS NULL)", "NOT a IS NULL"),
    ("(a + b) + c", "a + b + c"),
    ("CAST((a) AS INT)", "CAST(a AS INT)"),
])
def test_parentheses_the_meaning_needs_are_kept(written, canonical):
    assert canonical_expr(sqlglot.parse_one(written, read="spark")).sql("spark") == canonical


def test_differently_nested_expressions_key_differently():
    a = canonical_expr(sqlglot.parse_one("(a - b) * c", read="spark")).sql("spark")
    b = canonical_expr(sqlglot.parse_one("a - (b * c)", read="spark")).sql("spark")
    assert a != b
