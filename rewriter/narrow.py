"""Union compensation for a datamap whose filter range is narrower than the query's.

A datamap defined with `WHERE l_shipdate >= DATE '1995-01-01'` holds the groups of the
rows where that range predicate R is TRUE. A query over all dates (or a wider range)
reads the datamap as
    its rows  UNION ALL  its build SELECT over the rows where R is FALSE or NULL
which is the datamap that the definition without R would hold (as partial aggregates:
the two parts may share a group, so the query always re-aggregates). The complement
is `NOT COALESCE(R, FALSE)` in place of R, so rows where the column is NULL are read
from the base tables too. The query's own conjuncts are then compensated as on that
wider datamap, by the usual rule (rules/compensate_filters.py), and the union is built
where the fresh-rows compensation builds its own (match.py `_view_relation`).

Only a time window is widened: range conjuncts (col op constant, IN, BETWEEN) of a date or
timestamp column, which is what BI dashboards move and what base tables are laid out by,
so the complement reads few files. A narrower filter on any other column (a segment, a
measure) is refused: its complement is most of the table, slower than no datamap.
Only those range conjuncts are dropped;
a datamap whose narrower predicate is anything else (a residual, an equality of two
columns, a range inside a join condition) is refused with the reason. It is not tried
when the datamap covers the query's range already, and refused when the datamap holds
none of the query's range (the union would be the base tables plus a detour).
"""
from __future__ import annotations

import dataclasses

from sqlglot import exp

from rewriter import sparktypes
from rewriter.facts import Facts, class_ranges
from rewriter.layout import Compiled
from rewriter.normalize import canonical_predicate, column_key, conjuncts, parse
from rewriter.rules.compensate_filters import compensate_filters

PREFIX = "union compensation for the datamap's narrower filter refused: "


@dataclasses.dataclass
class Widened:
    preds: list[exp.Expression]       # the query's compensating conjuncts
    complement: exp.Select            # build SELECT over the rows the datamap leaves out


def widen(q: Facts, comp: Compiled) -> Widened | str | None:
    """The compensation over datamap ∪ complement, a reason, or None when the datamap's
    ranges are not what kept it from answering."""
    d = comp.facts
    rep = q.rep

    def cls(col_key: str) -> str:
        return rep.get(col_key, col_key)

    d_ranges = class_ranges(d.preds, rep)       # keyed by the query's classes
    wide = {c for c, dr in d_ranges.items() if c not in q.ranges or not q.ranges[c].within(dr)}
    if not wide:
        return None
    for c in wide:
        t = sparktypes.norm(q.column_types.get(c) or d.column_types.get(c))
        if t not in ("date", "timestamp"):
            return PREFIX + f"{_short(c)} is not a date or timestamp column"
    for c in wide:
        qr = q.ranges.get(c)
        if qr is not None and not qr.intersect(d_ranges[c]).intervals:
            return PREFIX + f"the datamap holds none of the query's range on {_short(c)}"
    dropped, kept = [], []
    for p in d.preds:
        cols = {column_key(col) for col in p.expr.find_all(exp.Column)}
        if len(cols) == 1 and cls(cols.pop()) in wide:
            if p.kind != "range":
                return PREFIX + f"datamap filter {p.expr.sql('spark')} is not a range"
            dropped.append(p)
        else:
            kept.append(p)
    comp_preds = compensate_filters(q, dataclasses.replace(d, preds=kept))
    if isinstance(comp_preds, str):
        return PREFIX + comp_preds
    complement = _complement(comp, wide, rep, len(dropped))
    if isinstance(complement, str):
        return PREFIX + complement
    return Widened(preds=comp_preds, complement=complement)


def _complement(comp: Compiled, wide: set, rep: dict, n_dropped: int) -> exp.Select | str:
    """The datamap's build SELECT with its range conjuncts on `wide` replaced by
    NOT COALESCE(<them>, FALSE)."""
    cached = comp.keyed.get(("narrow", "build"))
    if cached is None:
        cached = comp.keyed[("narrow", "build")] = parse(comp.definition.build_select)
    build = cached.copy()
    # the definition's aliases name its references (a self-join's two are two relations)
    tables = comp.facts.table_of_alias()

    def on_wide(c: exp.Expression) -> bool:
        cols = {f"{tables.get(col.table, col.table)}.{col.name}" for col in c.find_all(exp.Column)}
        return len(cols) == 1 and rep.get(next(iter(cols)), next(iter(cols))) in wide

    for j in build.args.get("joins") or []:
        if any(on_wide(c) for c in conjuncts(j.args.get("on"))):
            return "its range is part of a join condition"
    where = build.args.get("where")
    parts = conjuncts(where.this) if where is not None else []
    drop = [c for c in parts if on_wide(c)]
    if sum(len(canonical_predicate(c)) for c in drop) != n_dropped:
        return "its range conjuncts could not be isolated in the definition"
    rest = [c.copy() for c in parts if not on_wide(c)]
    outside = exp.Not(this=exp.Coalesce(this=exp.and_(*[c.copy() for c in drop]),
                                        expressions=[exp.false()]))
    build.set("where", exp.Where(this=exp.and_(*rest, outside)))
    return build


def _short(col_key: str) -> str:
    return col_key.split(".", 1)[1] if col_key.count(".") >= 2 else col_key
