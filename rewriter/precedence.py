"""Where a printed expression needs parentheses.

normalize.canonical_expr drops the parentheses a query was written with, so that
`(a)` and `a` key alike; sqlglot prints operators as the tree nests them and adds none
back. These rules put back exactly those the meaning needs: `parenthesize` after
canonicalising, and on every operator a rule builds around a derived expression
(rules/equal_aggregates.py: g * rows with g = `a - 1` would print `a - 1 * rows`), and
`wrap_operands` on a node rebuilt over derived operands (`100 / avg(x)` derives to a
sum / count, which must stay one operand).
"""
from __future__ import annotations

from sqlglot import exp


# Spark's operator precedence, loosest first; an operator not listed is always wrapped
_PRECEDENCE = {cls: rank for rank, group in enumerate((
    (exp.Or,), (exp.And,), (exp.Not,),
    (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.NullSafeEQ, exp.Is, exp.Like,
     exp.ILike, exp.RegexpLike, exp.In, exp.Between),
    (exp.BitwiseOr,), (exp.BitwiseXor,), (exp.BitwiseAnd,),
    (exp.BitwiseLeftShift, exp.BitwiseRightShift),
    (exp.Add, exp.Sub, exp.DPipe), (exp.Mul, exp.Div, exp.Mod, exp.IntDiv),
    (exp.Neg, exp.BitwiseNot))) for cls in group}


def needs_parens(node: exp.Expression) -> bool:
    """Whether `node`, an operand of an operator, must be wrapped to keep its meaning."""
    parent = node.parent
    if type(parent) not in _PRECEDENCE or node.arg_key not in ("this", "expression"):
        return False
    if not isinstance(node, (exp.Binary, exp.Unary, exp.In, exp.Between)) \
            or isinstance(node, (exp.Dot, exp.Paren)):       # a Paren is a Unary to sqlglot
        return False
    mine, theirs = _PRECEDENCE.get(type(node), -1), _PRECEDENCE[type(parent)]
    if mine != theirs:
        return mine < theirs
    if isinstance(parent, exp.Unary):
        return not isinstance(parent, exp.Not)         # `- -x` would start a comment
    # left-associative: the left operand of an equal operator needs none; AND/OR any side
    return node.arg_key == "expression" and not isinstance(parent, exp.Connector)


def parenthesize(e: exp.Expression) -> exp.Expression:
    """`e` (changed in place) with the parentheses its operators need wrapped around their
    operands; one already wrapped is left alone."""
    for node in list(e.walk()):
        if node is not e and needs_parens(node):
            paren = exp.Paren()
            node.replace(paren)
            paren.set("this", node)     # the node itself: its operands are walked next
    return e


def wrap_operands(node: exp.Expression) -> exp.Expression:
    """`node` (changed in place) with each direct operand that needs it parenthesised: for
    a node rebuilt over derived operands, which may be operators themselves."""
    for child in list(node.iter_expressions()):
        if needs_parens(child):
            paren = exp.Paren()
            child.replace(paren)
            paren.set("this", child)
    return node
