"""Subtotals of the serving tier (pure): GROUP BY ROLLUP / CUBE / GROUPING SETS (and Spark's
`WITH ROLLUP` / `WITH CUBE`, mixed forms such as `GROUP BY a, ROLLUP(b, c)`) with grouping()
and grouping_id(), emitted as DuckDB `GROUP BY GROUPING SETS (...)`.

Spark (GroupingAnalytics) reads a GROUP BY as a list of grouping sets -- the cartesian
product of its items, ROLLUP (a, b) being ((a, b), (a), ()), CUBE every subset, a plain key
one set of itself -- over its grouping expressions, the distinct expressions in order of
first appearance (for `GROUP BY a, b GROUPING SETS (...)`: a, b as listed).
grouping_id() without arguments is grouping_id over those in that order; grouping_id(x, y)
(Spark accepts only exactly those, in that order) sets bit n-1-i when expression i is rolled
up (the first is the most significant bit), which is DuckDB's GROUPING(x, y); grouping(x) is
one bit. Spark types them tinyint and bigint, and rejects both without ROLLUP, CUBE or
GROUPING SETS. Where the engines differ the SQL makes them agree or the query is refused:
  - a grouping set list with the empty set over no input rows: Spark's Expand produces no
    rows, so there is no grand total row; DuckDB gives one (the standard's). The emitted
    HAVING keeps only groups with a row (`count(*) > 0`), which every other group has;
  - a grouping set listed twice: Spark answers it twice; refused rather than trusting
    DuckDB to keep duplicates;
  - an ordinal or a constant inside ROLLUP / CUBE / GROUPING SETS: refused;
  - in a HAVING, grouping() / grouping_id() and columns outside aggregates: Spark fails
    to resolve them in some shapes (translate._subtotal_having), so they are refused
    rather than answered where Spark raises.
A subtotal's NULL and a NULL key read alike in both engines; grouping() tells them apart.
"""
from __future__ import annotations

from itertools import combinations, product
from typing import Callable

from sqlglot import exp

from proxy.serving.sqltypes import NotServable, duck_type

# grouping() -> tinyint, grouping_id() -> bigint (spark.sql.legacy.integerGroupingId off)
GROUPING_TYPE, GROUPING_ID_TYPE = "tinyint", "bigint"


class Grouping:
    """The grouping structure of one SELECT: its grouping expressions (DuckDB SQL, in
    Spark's order) and its grouping sets (tuples of their indices)."""

    def __init__(self, leaves: list[str], sets: list[tuple[int, ...]]):
        self.leaves, self.sets = leaves, sets

    def group_by(self) -> str:
        return "GROUPING SETS (" + ", ".join(
            "(" + ", ".join(self.leaves[i] for i in s) + ")" for s in self.sets) + ")"

    def having(self) -> str | None:
        """A condition to AND into HAVING (no grand total row over no input)."""
        return "(count(*) > 0)" if () in self.sets else None

    def function(self, e: exp.Expression, arg_sql: Callable[[exp.Expression], str]
                 ) -> tuple[str, str]:
        """grouping(x) / grouping_id(...) -> (DuckDB SQL, Spark type)."""
        if isinstance(e, exp.Grouping) and len(e.expressions) != 1:
            raise NotServable("grouping() with other than one argument")
        args = [arg_sql(a) for a in e.expressions] if e.expressions else list(self.leaves)
        for a in args:
            if a not in self.leaves:
                raise NotServable("an argument of grouping() / grouping_id() that is not "
                                  "a grouping expression")
        if isinstance(e, exp.GroupingId) and args != self.leaves:
            # Spark: GROUPING_ID_COLUMN_MISMATCH unless they are the grouping expressions
            raise NotServable("grouping_id() of other than all grouping expressions in "
                              "order (Spark rejects it)")
        if not args:
            raise NotServable("grouping_id() without grouping expressions")
        typ = GROUPING_TYPE if isinstance(e, exp.Grouping) else GROUPING_ID_TYPE
        return f"CAST(GROUPING({', '.join(args)}) AS {duck_type(typ)})", typ


def has_subtotals(group: exp.Group) -> bool:
    return any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals")) \
        or any(isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets))
               for g in group.expressions)


def grouping(group: exp.Group, key_sql: Callable[[exp.Expression], str]) -> Grouping:
    """The grouping sets of a GROUP BY with subtotals; key_sql translates one expression."""
    if group.args.get("totals"):
        raise NotServable("WITH TOTALS")
    leaves: list[str] = []

    def leaf(e: exp.Expression) -> int:
        if isinstance(e, exp.Paren):
            e = e.this
        if isinstance(e, exp.Literal) or isinstance(e, exp.Null):
            raise NotServable("an ordinal or a constant in ROLLUP / CUBE / GROUPING SETS")
        sql = key_sql(e)
        if sql not in leaves:
            leaves.append(sql)
        return leaves.index(sql)

    def members(e: exp.Expression) -> list[exp.Expression]:
        if isinstance(e, exp.Tuple):
            return list(e.expressions)
        if isinstance(e, exp.Paren) and isinstance(e.this, exp.Tuple):
            return list(e.this.expressions)
        return [e]

    def sets_of_list(items: list[exp.Expression]) -> list[list[tuple[int, ...]]]:
        """Each GROUP BY item -> its grouping sets."""
        out = []
        for g in items:
            if isinstance(g, exp.Rollup):
                keys = [leaf(x) for x in g.expressions]
                out.append([tuple(keys[:n]) for n in range(len(keys), -1, -1)])
            elif isinstance(g, exp.Cube):
                keys = [leaf(x) for x in g.expressions]
                out.append(_cube(keys))
            elif isinstance(g, exp.GroupingSets):
                out.append([tuple(leaf(x) for x in members(s)) for s in g.expressions])
            else:
                out.append([(leaf(g),)])
        return out

    plain = group.expressions
    if group.args.get("rollup") or group.args.get("cube") or group.args.get("grouping_sets"):
        # `GROUP BY a, b WITH ROLLUP | WITH CUBE | GROUPING SETS (...)`: a, b are the
        # grouping expressions, in that order
        if any(isinstance(g, (exp.Rollup, exp.Cube, exp.GroupingSets)) for g in plain):
            raise NotServable("ROLLUP / CUBE inside a GROUP BY ... WITH ROLLUP / CUBE")
        keys = [leaf(g) for g in plain]
        if group.args.get("rollup"):
            sets = [tuple(keys[:n]) for n in range(len(keys), -1, -1)]
        elif group.args.get("cube"):
            sets = _cube(keys)
        else:
            (gs,) = group.args["grouping_sets"]
            sets = [tuple(leaf(x) for x in members(s)) for s in gs.expressions]
            if len(leaves) != len(keys):
                raise NotServable("a grouping set with an expression not in the GROUP BY list")
    else:
        sets = [()]
        for choices in sets_of_list(list(plain)):
            sets = [a + b for a, b in product(sets, choices)]
    # within one set a repeated expression groups once (Spark and DuckDB alike)
    sets = [tuple(dict.fromkeys(s)) for s in sets]
    if len(set(sets)) != len(sets):
        raise NotServable("a grouping set listed twice (Spark answers it twice)")
    if all(s == () for s in sets):
        raise NotServable("only empty grouping sets")
    return Grouping(leaves, sets)


def _cube(keys: list[int]) -> list[tuple[int, ...]]:
    # Spark's order: by subsets of decreasing size... the order of sets changes no row
    return [c for n in range(len(keys), -1, -1) for c in combinations(keys, n)]


def subtotal_having(having: exp.Having) -> None:
    """Spark resolves a HAVING over subtotals only in some shapes: grouping() / grouping_id()
    there fails, and so does a grouping column beside an ORDER BY over grouping() (Spark
    raises UNRESOLVED_COLUMN). Served: a HAVING whose columns are all inside aggregates."""
    if having.find(exp.Grouping, exp.GroupingId):
        raise NotServable("grouping() / grouping_id() in HAVING (Spark fails to resolve it)")
    for col in having.find_all(exp.Column):
        if col.find_ancestor(exp.AggFunc) is None:
            raise NotServable("a column outside an aggregate in a HAVING over subtotals "
                              "(Spark resolves it only in some shapes)")
