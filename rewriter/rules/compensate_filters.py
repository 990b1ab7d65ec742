"""Rule: the datamap's predicate must be implied by the query's; compensate the rest.

Goldstein & Larson as Calcite states them, over canonical conjuncts:
  * every datamap column equality must hold in the query's equivalence classes;
  * every datamap range (per equivalence class) must contain the query's range;
  * every datamap residual conjunct must appear among the query's residuals (same key
    after mapping columns to the query's class representatives).
Then the query ⊆ datamap, and applying the query's conjuncts on the datamap rows gives
exactly the query's rows. Conjuncts the datamap already guarantees are dropped so that
the compensation needs fewer columns: equalities the datamap's classes imply, residuals
the datamap has, and a class's range conjuncts when both ranges are equal.
"""
from __future__ import annotations

from sqlglot import exp

from rewriter.facts import Facts, class_ranges
from rewriter.normalize import DIALECT, key_of


def compensate_filters(q: Facts, d: Facts) -> list[exp.Expression] | str:
    """The query conjuncts to apply on the datamap rows, or a reason."""
    rep = q.rep

    def r(c: str) -> str:
        return rep.get(c, c)

    for p in d.preds:
        if p.kind == "eq" and r(p.cols[0]) != r(p.cols[1]):
            return f"datamap requires {p.expr.sql(DIALECT)}, the query does not"
    d_ranges = class_ranges(d.preds, rep)       # the datamap's ranges, by the query's classes
    for c, dr in d_ranges.items():
        qr = q.ranges.get(c)
        if qr is None:
            return f"query does not restrict {_short(c)} as the datamap does"
        if not qr.within(dr):
            return f"query range on {_short(c)} is wider than the datamap's"
    q_res = {key_of(p.expr, rep) for p in q.preds if p.kind == "residual"}
    d_res = set()
    for p in d.preds:
        if p.kind == "residual":
            k = key_of(p.expr, rep)
            if k not in q_res:
                return f"datamap filter {p.expr.sql(DIALECT)} is not implied by the query"
            d_res.add(k)
    drep = d.rep
    out = []
    for p in q.preds:
        if p.kind == "eq":
            a, b = p.cols
            if drep.get(a, a) == drep.get(b, b):
                continue
        elif p.kind == "range":
            c = r(p.cols[0])
            dr = d_ranges.get(c)
            if dr is not None and dr.within(q.ranges[c]) and q.ranges[c].within(dr):
                continue
        elif key_of(p.expr, rep) in d_res:
            continue
        out.append(p.expr)
    return out


def _short(col_key: str) -> str:
    return col_key.split(".", 1)[1] if col_key.count(".") >= 2 else col_key
