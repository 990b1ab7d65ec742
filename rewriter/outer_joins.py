"""Outer-join simplification: a LEFT JOIN whose NULL-extended rows the WHERE rejects is
an inner join.

`A LEFT JOIN T ON p WHERE q` yields A's rows matched through p, plus A's unmatched rows
with every column of T NULL. When a conjunct of q is null-rejecting on T (it is NULL or
false whenever T's columns are all NULL), the second kind of row never survives the
WHERE, so the block equals `A JOIN T ON p WHERE q` (Galindo-Legaria & Rosenthal; Calcite's
outer-join simplification). The converted ON conjuncts become WHERE conjuncts, which may
reject an earlier NULL-supplying table in turn, so the rule runs to a fixpoint.

A conjunct counts as null-rejecting on T only in forms where that is plain SQL semantics:
a column equality or range conjunct on a column of T, `T.c IS NOT NULL`, and a
comparison, LIKE, IN or BETWEEN whose operand (a column of T, maybe under CAST) is NULL
when T's row is NULL-extended. `<=>`, COALESCE, IS NULL, OR and CASE are never counted.

Used by the matcher only when the query's outer join would otherwise refuse an
inner-join datamap: a datamap with the same LEFT JOIN answers the query as written
(its NULL-extended rows are filtered out by the same conjunct).
"""
from __future__ import annotations

import dataclasses

from sqlglot import exp

from rewriter.facts import Facts, Pred, _classify, _equivalence, class_ranges
from rewriter.normalize import key_of

_STRICT = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.ILike, exp.In,
           exp.Between)


def _table_of(e: exp.Expression) -> str | None:
    while isinstance(e, (exp.Cast, exp.TryCast, exp.Paren)):
        e = e.this
    if isinstance(e, exp.Column) and e.table and e.db:
        return f"{e.db}.{e.table}"
    return None


def rejected_tables(p: Pred) -> set[str]:
    """Tables on which conjunct `p` is null-rejecting (see module docstring)."""
    if p.kind in ("eq", "range"):
        return {c.rsplit(".", 1)[0] for c in p.cols}
    e = p.expr
    if isinstance(e, exp.Not) and isinstance(e.this, exp.Is) and isinstance(e.this.expression, exp.Null):
        t = _table_of(e.this.this)
        return {t} if t else set()
    if not isinstance(e, _STRICT):
        return set()
    if isinstance(e, exp.In):
        if e.args.get("query") is not None:
            return set()
        operands = [e.this]
    elif isinstance(e, exp.Between):
        operands = [e.this]
    else:
        operands = [e.this, e.expression]
    return {t for t in map(_table_of, operands) if t}


def inner_form(q: Facts) -> Facts | None:
    """The facts with every null-rejected LEFT JOIN made inner, or None when none is."""
    edges = list(q.edges)
    preds = list(q.preds)
    changed = False
    while True:
        rejected = set().union(*(rejected_tables(p) for p in preds)) if preds else set()
        hit = next((i for i, e in enumerate(edges) if e.kind == "left" and e.table in rejected), None)
        if hit is None:
            break
        e = edges[hit]
        # an inner edge keeps no ON of its own; a derived relation stays what it joins
        edges[hit] = dataclasses.replace(e, kind="inner", on=[], on_key="")
        preds.extend(_classify(c, q.column_types) for c in e.on)
        changed = True
    if not changed:
        return None
    # a later LEFT JOIN's ON may name a table made inner: its ON is unchanged, so is its key
    rep = _equivalence(preds)
    seen = set()
    unique = []
    for p in preds:
        k = key_of(p.expr)
        if k not in seen:
            seen.add(k)
            unique.append(p)
    return dataclasses.replace(q, edges=edges, preds=unique, rep=rep,
                               ranges=class_ranges(unique, rep))
