"""Union compensation: when a datamap's segments miss the newest rows of one base table,
the datamap is read as its segments UNION ALL its definition over just those rows.

That union equals the datamap over all rows only when the definition is linear in the
changed table, f(T_old + T_new, rest) = f(T_old, rest) + f(T_new, rest): each row of the
table contributes on its own, whatever else is in the table. True for every table of an
inner-join chain and for the preserved (left) input of left joins; false for the
NULL-extended side of an outer join (a new row there removes the NULL-extended rows the
segments hold), for a table read twice (new x new pairs), and for two changed tables at
once (the old x new cross terms are missing). The pipeline's incremental refresh rests on
the same identity (pipeline/jobs.py plan_delta), so both use `linear_in`.
"""
from __future__ import annotations

from rewriter.api import DatamapDefinition

INNER = frozenset({"inner", "cross", "join", ""})
LINEAR_FOR_LEFT_INPUT = INNER | {"left", "left outer", "left_outer"}


def linear_in(definition: DatamapDefinition, k: int) -> bool:
    """Whether the definition is linear in its k-th base table (FROM order)."""
    kinds = [j.strip().lower() for j in definition.join_kinds]
    if len(kinds) != len(definition.base_tables) - 1:
        # Join shape not described per table: only a pure inner-join block is safe.
        return all(j in INNER for j in kinds)
    if any(j not in LINEAR_FOR_LEFT_INPUT for j in kinds[k:]):
        return False
    return k == 0 or kinds[k - 1] in INNER


def delta_refusal(definition: DatamapDefinition, tables) -> str | None:
    """Why new rows of `tables` cannot be compensated by a union, or None when they can."""
    tables = list(tables)
    base = list(definition.base_tables)
    stray = [t for t in tables if t not in base]
    if stray:
        return f"new rows of {stray[0]}, which datamap {definition.name} does not read"
    if len(tables) > 1:
        return (f"{len(tables)} delta relations ({', '.join(tables)}): one union "
                "compensates new rows of one base table only")
    if not tables:
        return None
    table = tables[0]
    if base.count(table) > 1:
        return f"{table} appears more than once in datamap {definition.name}"
    if not linear_in(definition, base.index(table)):
        return f"{table} is on the NULL-extended side of an outer join in datamap {definition.name}"
    return None
