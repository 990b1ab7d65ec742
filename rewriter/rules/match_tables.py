"""Rule: the datamap's tables and joins must be the query's (no extra datamap tables).

Spark has no enforced foreign keys, so a datamap that joins a table the query does not
(query-partial in Calcite's terms) is never used: the join may drop or duplicate rows.
The query may join extra tables (query-delta): they are joined onto the datamap table
later, through columns the datamap exposes. Outer joins are matched structurally: a
datamap with a LEFT JOIN is used only when the query has the same join sequence (tables,
kinds, ON conditions) as its prefix; an inner-join datamap is used only when the query
joins those tables with inner joins (inner joins commute, so order does not matter).
"""
from __future__ import annotations

from sqlglot import exp

from rewriter.facts import Edge, Facts
from rewriter.self_joins import describe_reference


def match_tables(q: Facts, d: Facts) -> list[Edge] | str:
    """Extra query edges to join onto the datamap table, or a reason."""
    dt = d.tables
    missing = dt - q.tables
    if missing:
        return f"datamap table {describe_reference(sorted(missing)[0])} is not in the query"
    if any(e.kind == "left" for e in d.edges):
        prefix = q.edges[:len(d.edges)]
        for de, qe in zip(d.edges, prefix):
            if de.table != qe.table or de.kind != qe.kind or de.on_key != qe.on_key:
                return "join structure differs from the datamap's (outer join)"
        extra = q.edges[len(d.edges):]
    else:
        for qe in q.edges:
            if qe.table in dt and qe.kind == "left":
                return f"query LEFT JOINs {qe.table}, the datamap joins it with an inner join"
        extra = [qe for qe in q.edges if qe.table not in dt]
    for e in extra:
        if e.kind != "left":
            continue
        for on in e.on:
            for col in on.find_all(exp.Column):
                owner = f"{col.db}.{col.table}"
                if owner != e.table and owner not in dt:
                    return f"LEFT JOIN {e.table} is conditioned on another joined table ({owner})"
    return extra
