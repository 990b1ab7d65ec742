"""Where a printed expression needs parentheses.

normalize.canonical_expr drops the parentheses a query was written with, so that
`(a)` and `a` key alike; sqlglot prints operators as the tree nests them and adds none
back. These rules put back exactly those the meaning needs.
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
    if not isinstance(node, (exp.Binary, exp.Unary, exp.In, exp.Between)) or isinstance(node, exp.Dot):
        return False
    mine, theirs = _PRECEDENCE.get(type(node), -1), _PRECEDENCE[type(parent)]
    if mine != theirs:
        return mine < theirs
    if isinstance(parent, exp.Unary):
        return not isinstance(parent, exp.Not)         # `- -x` would start a comment
    # left-associative: the left operand of an equal operator needs none; AND/OR any side
    return node.arg_key == "expression" and not isinstance(parent, exp.Connector)
