"""Several relations in one served answer (pure): joins between datamap reads and derived
tables, CTEs, uncorrelated `IN (SELECT ...)` / `EXISTS` subqueries and single-row scalar
subqueries -- so the series-limit join and the top-N subquery BI tools write (Superset,
Tableau, Power BI) are served.

What is served, and why it is Spark's answer:
  * `[INNER | LEFT | RIGHT | FULL] [OUTER] JOIN r ON <condition>` and `CROSS JOIN r` (a
    comma join too): a join is the product of its sides filtered by the ON condition (a
    pair matches where it is TRUE) in both engines, padded with NULLs for the unmatched rows
    of an outer side. The condition is read by the tier's own rules, as a WHERE is
    (translate.ALLOWED): equalities of keys whose types meet as Spark makes them meet
    (integers widen, decimals of different scales compare exactly when their common type
    fits 38 digits), ranges, ORs, a filter on one side (`ON i.weight > 1.5 AND m.k = i.k`);
    a comparison the tier does not prove (a string against a number, a decimal against a
    double) refuses the query. `=` never matches a NULL key, `<=>` matches NULL to NULL, in
    both. Refused: aggregates and subqueries in ON, USING and NATURAL (Spark's merged key
    column), SEMI / ANTI / LATERAL joins, an outer join without ON;
  * a CTE (`WITH c AS (...)`) is the derived table it names wherever it is read; Spark
    inlines it too. Refused: WITH RECURSIVE, column lists `c(a, b)`;
  * `x [NOT] IN (SELECT y ...)` and `[NOT] EXISTS (SELECT ...)` over a subquery that names
    only its own relations (a correlated reference does not resolve in the subquery's own
    scope and is refused); IN keeps SQL's three-valued logic in both engines (a NULL x,
    or no match beside a NULL y, is NULL; an empty subquery is false);
  * a scalar subquery `(SELECT agg(...) FROM ...)` of one output, aggregating without GROUP
    BY: one row (none under a HAVING that drops it: NULL), in both engines.
Every datamap read inside them is one the rewriter wrote, over the segment ids it names,
and the files come from files_of (the catalog's listing) like any other read.
"""
from __future__ import annotations

from sqlglot import exp

from proxy.serving.sqltypes import DEC, NotServable, fits_one_decimal, is_num, q

_SIDES = ("LEFT", "RIGHT", "FULL")


def joins(t, sel: exp.Select, scope) -> str:
    """The JOIN clauses of `sel` (after its FROM relation is in `scope`), as DuckDB SQL."""
    out = []
    for j in sel.args.get("joins") or []:
        side = (j.args.get("side") or "").upper()
        kind = (j.args.get("kind") or "").upper()
        if j.args.get("using") or j.args.get("method") or kind not in ("", "INNER", "OUTER",
                                                                      "CROSS"):
            what = "USING" if j.args.get("using") else (j.args.get("method") or kind)
            raise NotServable(f"a {str(what).upper()} join")
        if side and side not in _SIDES:
            raise NotServable(f"a {side} join")
        rel_sql = relation(t, j.this, scope)
        on = j.args.get("on")
        if on is None:
            if side:
                raise NotServable(f"a {side} join without ON")
            out.append(f"CROSS JOIN {rel_sql}")
            continue
        if kind == "CROSS":
            raise NotServable("CROSS JOIN with ON")
        cond = _condition(t, on, scope)
        out.append(f"{side + ' OUTER' if side else 'INNER'} JOIN {rel_sql} ON {cond}")
    return " ".join(out)


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    while isinstance(e, exp.Paren):
        e = e.this
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    return [e]


def _condition(t, on: exp.Expression, scope) -> str:
    """Any condition the tier computes as Spark does (translate.ALLOWED): a pair of rows
    matches where it is TRUE (not FALSE, not NULL), in both engines, whatever join
    algorithm either picks; an error in it sends the query to Spark."""
    if on.find(exp.AggFunc, exp.Subquery, exp.Exists, exp.Window):
        raise NotServable("an aggregate or a subquery in a join condition")
    return " AND ".join(t.condition(c, scope) for c in _conjuncts(on))


def relation(t, rel: exp.Expression, scope) -> str:
    """One relation of a FROM or JOIN, registered in `scope` under its alias (once)."""
    alias = (rel.alias or (rel.name if isinstance(rel, exp.Table) else "")).lower()
    if alias and alias in scope.aliases:
        raise NotServable(f"two relations named {alias}")
    return t.relation(rel, scope)


def cte_reference(t, rel: exp.Table, scope) -> str | None:
    """A FROM / JOIN naming a CTE in force -> its derived table; None if it names none."""
    if rel.db or rel.catalog:
        return None
    name = rel.name.lower()
    for ctes in reversed(t.ctes):
        if name in ctes:
            sql, cols = ctes[name].translated(t)
            alias = (rel.alias or name).lower()
            if isinstance(rel.args.get("alias"), exp.TableAlias) and rel.args["alias"].columns:
                raise NotServable("a relation alias with a column list")
            scope.aliases[alias] = cols
            return f"({sql}) AS {q(alias)}"
    return None


class _Cte:
    """A CTE, translated when first read (Spark drops one that is never read: its reads
    are not made), with the CTEs in force where it is defined."""

    def __init__(self, node: exp.Expression, visible: list[dict]):
        self.node, self.visible = node, visible
        self.done: tuple[str, dict[str, str]] | None = None
        self.names: list[str] = []      # its output names, as Spark spells them

    def translated(self, t) -> tuple[str, dict[str, str]]:
        if self.done is None:
            saved, t.ctes = t.ctes, self.visible
            try:
                sql, cols, self.names = _body(t, self.node)
                self.done = sql, cols
            finally:
                t.ctes = saved
        return self.done


def with_ctes(t, sel: exp.Select) -> bool:
    """Translate the WITH of `sel` (if any) and put its CTEs in force; True if it pushed
    a level onto t.ctes (the caller pops it after the SELECT)."""
    w = sel.args.get("with_")
    if w is None:
        return False
    if w.args.get("recursive"):
        raise NotServable("WITH RECURSIVE")
    level: dict[str, _Cte] = {}
    for cte in w.expressions:
        alias = cte.args.get("alias")
        if alias is not None and alias.columns:
            raise NotServable("a CTE with a column list")
        name = cte.alias.lower()
        if name in level:
            raise NotServable(f"CTE {name} defined twice")
        # a CTE reads the CTEs in force and the earlier ones of its WITH
        level[name] = _Cte(cte.this, list(t.ctes) + [dict(level)])
    t.ctes.append(level)
    return True


def body(t, inner: exp.Expression) -> tuple[str, dict[str, str]]:
    """A derived table's, CTE's or subquery's SELECT -> (DuckDB SQL, {column: Spark type});
    its timestamps stay instants (only the outermost SELECT prints local times)."""
    return _body(t, inner)[:2]


def _body(t, inner: exp.Expression) -> tuple[str, dict[str, str], list[str]]:
    if not isinstance(inner, exp.Select):
        raise NotServable("a derived table that is not a SELECT")
    read = t._datamap_read(inner)
    if read is not None:
        return read[0], read[1], list(read[1])
    sql, out = t.select(inner, top=False)
    cols = {n.lower(): typ for n, typ in out}
    if len(cols) != len(out):
        raise NotServable("a derived table with two columns of one name")
    return sql, cols, [n for n, _ in out]


def _one_column(t, e: exp.Expression, what: str) -> tuple[str, str, str]:
    """(SQL, the column's name, its Spark type) of a subquery of one output."""
    inner = e.this if isinstance(e, exp.Subquery) else e
    if isinstance(inner, exp.Subquery):
        inner = inner.this
    sql, cols = body(t, _named(inner))
    if len(cols) != 1:
        raise NotServable(f"{what} of other than one column")
    (name, typ), = cols.items()
    return sql, name, typ


def subquery(t, e: exp.Expression, scope) -> tuple[str, str]:
    """IN (SELECT ...), EXISTS (SELECT ...) or a scalar subquery -> (DuckDB SQL, type).
    The subquery is read in a scope of its own: an outer (correlated) reference fails to
    resolve there and the query is refused."""
    if isinstance(e, exp.Exists):
        inner = e.this.this if isinstance(e.this, exp.Subquery) else e.this
        if isinstance(inner, exp.Select) and len(inner.expressions) == 1 \
                and isinstance(inner.expressions[0], exp.Star):    # EXISTS (SELECT * ...)
            inner = inner.copy()
            inner.set("expressions", [exp.alias_(exp.Literal.number(1), "_c0")])
        sql, _ = body(t, _named(inner))
        return f"(EXISTS ({sql}))", "boolean"
    if isinstance(e, exp.In):
        if not _filter_conjunct(e):
            raise NotServable("IN (subquery) other than a condition of WHERE or HAVING "
                              "(elsewhere Spark answers false where SQL says NULL)")
        x_sql, xt = t.expr(e.this, scope)
        sql, name, yt = _one_column(t, e.args["query"], "IN (subquery)")
        if not (xt == yt or (is_num(xt) and is_num(yt) and not (
                "double" in (xt, yt) and (DEC.match(xt) or DEC.match(yt))))):
            raise NotServable(f"IN (subquery) comparing {xt} with {yt}")
        fits_one_decimal([xt, yt])
        return f"({x_sql} IN (SELECT {q(name)} FROM ({sql}) AS _in))", "boolean"
    inner = e.this
    if not (isinstance(inner, exp.Select) and not inner.args.get("group")
            and len(inner.expressions) == 1 and inner.expressions[0].find(exp.AggFunc)
            and not inner.args.get("distinct")):
        raise NotServable("a scalar subquery other than one aggregate without GROUP BY")
    sql, name, typ = _one_column(t, inner, "a scalar subquery")
    return f"(SELECT {q(name)} FROM ({sql}) AS _scalar)", typ


def expand_star(t, sel: exp.Select) -> exp.Select:
    """`SELECT *` / `SELECT r.*` over derived tables, CTEs and datamap reads -> their
    columns by name, as Spark expands them (relations in FROM / JOIN order, each in its own
    order; Power BI's `SELECT * FROM (...) AS OTBL`, dbt's `SELECT * FROM final`). `*` over
    a table is refused."""
    if not any(_is_star(e) for e in sel.expressions):
        return sel
    rels = [sel.args["from_"].this] + [j.this for j in sel.args.get("joins") or []]
    out: list[exp.Expression] = []
    for e in sel.expressions:
        if not _is_star(e):
            out.append(e)
            continue
        which = e.table.lower() if isinstance(e, exp.Column) else None
        hit = False
        for rel in rels:
            alias, names = _star_names(t, rel)
            if which is not None and alias.lower() != which:
                continue
            hit = True
            for name in names:
                out.append(exp.alias_(exp.column(name, table=alias, quoted=True), name,
                                      quoted=True))
        if not hit:
            raise NotServable(f"{which}.* of a relation not in the query")
    sel = sel.copy()
    sel.set("expressions", out)
    return sel


def _is_star(e: exp.Expression) -> bool:
    star = e if isinstance(e, exp.Star) else (
        e.this if isinstance(e, exp.Column) and isinstance(e.this, exp.Star) else None)
    if star is not None and any(v for v in star.args.values()):
        raise NotServable("* with EXCEPT / REPLACE")
    return star is not None


def _star_names(t, rel: exp.Expression) -> tuple[str, list[str]]:
    """(alias, output names) of a relation `*` reads."""
    if isinstance(rel, exp.Subquery) and rel.alias and isinstance(rel.this, exp.Select):
        if rel.this.args.get("with_"):      # its stars would read its own CTEs
            raise NotServable("* over a derived table with a WITH of its own")
        return rel.alias, _names(t, rel.this)
    if isinstance(rel, exp.Table) and not rel.db and not rel.catalog:
        for ctes in reversed(t.ctes):
            if rel.name.lower() in ctes:
                cte = ctes[rel.name.lower()]
                cte.translated(t)
                return rel.alias or rel.name, cte.names
    raise NotServable("* over a relation other than a derived table or a CTE")


def _names(t, sel: exp.Select) -> list[str]:
    """The output names of a derived table's SELECT, as Spark names them."""
    names = []
    for e in expand_star(t, sel).expressions:
        if isinstance(e, exp.Alias):
            names.append(e.alias)
        elif isinstance(e, exp.Column):
            names.append(e.name)
        else:
            raise NotServable("* over an output without a name")
    return names


def _named(sel: exp.Expression) -> exp.Expression:
    """A subquery's outputs need no names (`EXISTS (SELECT 1 ...)`, `(SELECT max(x) ...)`):
    each unnamed one gets one of its own, never read by name outside."""
    if not isinstance(sel, exp.Select) or all(
            isinstance(e, (exp.Alias, exp.Column)) for e in sel.expressions):
        return sel
    sel = sel.copy()
    sel.set("expressions", [e if isinstance(e, (exp.Alias, exp.Column))
                            else exp.alias_(e, f"_c{i}") for i, e in enumerate(sel.expressions)])
    return sel


def _filter_conjunct(e: exp.Expression) -> bool:
    """`e` is a conjunct of a WHERE or HAVING, itself or under one NOT: where a NULL and
    false filter alike (Spark's semi join) and NOT IN is Spark's null-aware anti join."""
    node = e.parent
    while isinstance(node, exp.Paren):
        node = node.parent
    if isinstance(node, exp.Not):       # NOT right above it, not above an AND
        node = node.parent
    while isinstance(node, (exp.Paren, exp.And)):
        node = node.parent
    return isinstance(node, (exp.Where, exp.Having))


def is_subquery(e: exp.Expression) -> bool:
    return isinstance(e, (exp.Exists, exp.Subquery)) or (
        isinstance(e, exp.In) and e.args.get("query") is not None)
