"""Unions of the serving tier (pure): `UNION ALL` / `UNION` of served SELECTs -- datamap
reads, SELECTs over them, and rows of literals (`SELECT 'A' AS flag, 1 AS n UNION ALL
SELECT 'R', 2`) --, at the top of a query (with ORDER BY / LIMIT over the union) or as a
derived table (the rewriter's narrow-window union: a datamap's rows UNION ALL its build
SELECT over the base rows outside its window, served where each branch is).

As Spark (WidenSetOperationTypes) types a union: each column takes the wider type of its
branches (sqltypes.common: integers widen to the widest, integers and decimals to the
decimal holding the most integer digits and the largest scale, integers and doubles to
double; a NULL literal takes the others' type), and every branch is cast to it; the names
are the first branch's. `a UNION b` is the distinct rows of `a UNION ALL b`, where a
double reads -0.0 as 0.0 (Spark de-duplicates by aggregating, which folds -0.0 into 0.0);
mixed chains nest as written (`a UNION ALL b UNION c` is `(a UNION ALL b) UNION c`).
Refused: branches of different widths (Spark rejects them), types without a common one
here (a string and a number, a decimal and a double, decimals over 38 digits: Spark
answers), an unnamed or repeated column name in the first branch, UNION BY NAME,
INTERSECT / EXCEPT, a branch that is not served (a base table the tier does not read:
proxy/serving/basetables.py).
"""
from __future__ import annotations

from sqlglot import exp

from proxy.serving.expressions import Scope
from proxy.serving.sqltypes import INT_MAX, UNSERVED, NotServable, common, duck_type, q


ALLOWED = ("UNION ALL / UNION of served SELECTs, datamap reads and rows of literals, at the "
           "top (ORDER BY, LIMIT over it) or as a derived table; Spark's widened column "
           "types, the first branch's names")


class _NoColumns(Scope):
    def column(self, col: exp.Column) -> tuple[str, str]:
        raise NotServable("a column in a SELECT without FROM")


class _UnionScope(Scope):
    """ORDER BY over a union: its output names, as the union's columns u.c<i>."""

    def __init__(self, names: list[str], types: list[str]):
        self.cols = {n.lower(): (f'"u"."c{i}"', t) for i, (n, t) in enumerate(zip(names, types))}

    def column(self, col: exp.Column) -> tuple[str, str]:
        if col.table or col.name.lower() not in self.cols:
            raise NotServable(f"ORDER BY {col.sql('spark')} over a union: not one of its "
                              "output names")
        return self.cols[col.name.lower()]


def union(tr, node: exp.Union, top: bool = True) -> tuple[str, list[tuple[str, str]]]:
    """The union at the top of a query -> (DuckDB SQL, [(name, Spark type)]). `tr`: the
    translate._Translator of the query."""
    sql, names, types = _union(tr, node)
    outputs = []
    for i, (name, t) in enumerate(zip(names, types)):
        col = f'"u"."c{i}"'
        if t == "timestamp" and top:
            col = tr.zone.local(col)         # sent as the local wall-clock time
        outputs.append(f"CAST({col} AS {duck_type(t)}) AS {q(name)}")
    out_cols = list(zip(names, types))
    parts = [f"SELECT {', '.join(outputs)} FROM ({sql}) AS u"]
    order = node.args.get("order")
    if order:
        scope = _UnionScope(names, types)
        # timestamps ordered by instant where the zone prints two instants alike
        instants = [f'"u"."c{i}"' for i in range(len(names))] \
            if top and tr.zone is not None and not tr.zone.injective else None
        parts.append("ORDER BY " + ", ".join(tr.ordered(o, scope, out_cols, {}, instants)
                                             for o in order.expressions))
    limit = node.args.get("limit")
    if limit is not None:
        n = limit.expression       # as translate._limit: a whole number in the int range
        if not (isinstance(n, exp.Literal) and not n.is_string and n.this.isdigit()) \
                or limit.args.get("offset") or int(n.this) > INT_MAX:
            raise NotServable("LIMIT of a union other than a whole number in the int range")
        parts.append(f"LIMIT {int(n.this)}")
    return " ".join(parts), out_cols


def relation(tr, node: exp.Union) -> tuple[str, dict[str, str]]:
    """A union as a derived table -> (DuckDB SQL, {column: Spark type}); timestamps stay
    instants."""
    if node.args.get("order") or node.args.get("limit"):
        raise NotServable("ORDER BY or LIMIT over a union in a derived table")
    sql, out = union(tr, node, top=False)
    return sql, {n.lower(): t for n, t in out}


def _union(tr, node: exp.Union) -> tuple[str, list[str], list[str]]:
    """-> (SQL of columns c0..cn, the first branch's names, the common types)."""
    leaves: list[tuple[str, list[str | None], list[str | None]]] = []
    shape = _shape(tr, node, leaves, outer=True)
    widths = {len(types) for _, _, types in leaves}
    if len(widths) != 1:
        raise NotServable("union branches with different numbers of columns (Spark "
                          "rejects it)")
    names = leaves[0][1]
    if any(n is None for n in names):
        raise NotServable("an output without a name in a union's first branch")
    if len({n.lower() for n in names}) != len(names):
        raise NotServable("a union with two columns of one name")
    types = [common([lt[i] for _, _, lt in leaves], "UNION") for i in range(len(names))]
    cols = [f"c{i}" for i in range(len(names))]
    casts = [f"SELECT {', '.join(f'CAST(b.{c} AS {duck_type(t)}) AS {c}' for c, t in zip(cols, types))} "
             f"FROM ({sql}) AS b({', '.join(cols)})" for sql, _, _ in leaves]
    return _emit(shape, casts, cols, types), names, types


def _shape(tr, node, leaves: list, outer: bool = False) -> object:
    """The union's tree: ("ALL" | "DISTINCT", left, right) or a leaf's index in leaves."""
    while isinstance(node, exp.Subquery) and not node.alias and len(
            [v for v in node.args.values() if v not in (None, [], False)]) == 1:
        node = node.this            # a parenthesised branch
    if isinstance(node, exp.Union):
        if not outer and (node.args.get("order") or node.args.get("limit")):
            raise NotServable("ORDER BY or LIMIT inside a union")
        for key, value in node.args.items():
            if value not in (None, [], False) and key not in (
                    "this", "expression", "distinct", "order", "limit"):
                raise NotServable(f"{key.rstrip('_').upper()} of a union")
        return ("DISTINCT" if node.args.get("distinct") else "ALL",
                _shape(tr, node.this, leaves), _shape(tr, node.expression, leaves))
    if not isinstance(node, exp.Select):
        raise NotServable(f"a union of {node.key.upper()}")
    leaves.append(_branch(tr, node, first=not leaves))
    return len(leaves) - 1


def _branch(tr, sel: exp.Select, first: bool
            ) -> tuple[str, list[str | None], list[str | None]]:
    """One branch -> (SQL, names, Spark types); a NULL literal's type is None. Only the
    first branch's names are the union's: another's unnamed outputs get placeholders."""
    if sel.args.get("from_") is None:
        return _literal_row(tr, sel)
    if not first and any(not isinstance(e, (exp.Alias, exp.Column)) for e in sel.expressions):
        sel = sel.copy()
        for i, e in enumerate(list(sel.expressions)):
            if not isinstance(e, (exp.Alias, exp.Column)):
                e.replace(exp.alias_(e.copy(), f"_c{i}"))
    table = sel.args["from_"].this
    # a datamap read; any other branch is a SELECT served as translate serves one (a base
    # table's rows: where the translation reads base tables)
    read = tr._datamap_read(sel) if isinstance(table, exp.Table) and table.db and \
        f"{table.db}.{table.name}".lower() in tr.tables else None
    if read is not None:
        sql, cols = read
        if any(t.startswith(UNSERVED) for t in cols.values()):
            raise NotServable(next(t for t in cols.values()
                                   if t.startswith(UNSERVED))[len(UNSERVED):])
        return sql, [e.name for e in sel.expressions], list(cols.values())
    sql, out = tr.select(sel, top=False)
    return sql, [n for n, _ in out], [t for _, t in out]


def _literal_row(tr, sel: exp.Select) -> tuple[str, list[str | None], list[str | None]]:
    for key, value in sel.args.items():
        if value not in (None, [], False) and key != "expressions":
            raise NotServable(f"{key.rstrip('_').upper()} in a SELECT without FROM")
    parts, names, types = [], [], []
    for i, e in enumerate(sel.expressions):
        name, inner = (e.alias, e.this) if isinstance(e, exp.Alias) else (None, e)
        if isinstance(inner, exp.Null):
            sql, t = "NULL", None
        else:
            sql, t = tr.expr(inner, _NoColumns())
        parts.append(f"{sql} AS c{i}")
        names.append(name)
        types.append(t)
    return "SELECT " + ", ".join(parts), names, types


def _emit(shape, casts: list[str], cols: list[str], types: list[str]) -> str:
    if isinstance(shape, int):
        return casts[shape]
    op, left, right = shape
    both = f"({_emit(left, casts, cols, types)}) UNION ALL ({_emit(right, casts, cols, types)})"
    if op == "ALL":
        return both
    # Spark de-duplicates by aggregating: a -0.0 reads 0.0, every NaN is one row
    keys = ", ".join(f"({c} + 0.0) AS {c}" if t == "double" else c for c, t in zip(cols, types))
    return f"SELECT DISTINCT {keys} FROM ({both}) AS d"
