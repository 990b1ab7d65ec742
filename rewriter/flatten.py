"""Flatten the wrappers BI tools put around a base table, before facts are extracted.

Superset sends every virtual dataset as `FROM (<dataset sql>) AS virtual_table`, Power BI
nests the native query as `(...) AS ITBL` under its aggregate, Metabase nests a saved
question as `(...) AS source`, and dbt-style SQL names a filtered table in a CTE (often
after the table itself). The matcher sees one SELECT block at a time, so the aggregate
block reads a derived table, not the base table a datamap is defined on.

`flatten_tree` works on a *qualified* tree (normalize.qualify_tree: every column carries
its source alias, stars are expanded, a CTE reference is a Table without a db and the
CTE's own body reads the base table it shadows) and inlines a derived table or CTE only
when its block is trivial, i.e. provably a per-row map and filter of one base table:

  SELECT e1 AS a1, ..., en AS an FROM db.t AS x [[INNER] JOIN db.u AS y ON c ...]
  [WHERE p] [ORDER BY ...]

with every ei and p deterministic, free of aggregates, windows, generators, subqueries
and functions sqlglot does not know (a UDF may be non-deterministic), and nothing else
(no LIMIT/OFFSET, DISTINCT, GROUP BY, HAVING, QUALIFY, LATERAL VIEW, TABLESAMPLE,
hints, set operations, outer, NATURAL or USING joins). Why that is exact: such a block
yields, for each row r of t (of the inner join of its tables) with p(r) true, the row
(e1(r), ..., en(r)); so `SELECT f(alias.ai) FROM (block) alias WHERE q` equals
`SELECT f(ei) FROM db.t AS alias WHERE p AND q` once ei is substituted for alias.ai. An
ORDER BY without LIMIT in a derived table fixes no order of the outer result (SQL gives
a derived table no order), so dropping it changes no row. A block that joins
(Superset's virtual dataset over a star schema) is inlined only as the FROM source of
an outer block whose own joins are inner too: inner joins associate, so `(t JOIN u ON c)
JOIN d ON e` is `t JOIN u ON c JOIN d ON e`; its tables keep their aliases unless the
outer scope has them already.

The outer block must not be able to tell the difference either: the derived table is its
FROM source (or an INNER/LEFT join's left side), its RIGHT/FULL joins would let a moved
filter reject preserved rows, so they refuse; a nested subquery in the outer block could
be correlated on the alias, so it refuses too. The base table takes the derived table's
alias, which is unique in the outer scope, so no name can be captured.
Anything else leaves the tree as it is.
"""
from __future__ import annotations

from sqlglot import exp

from rewriter.normalize import nondeterministic

# Arguments a trivial block may carry; any other non-empty argument refuses it.
_BLOCK_ARGS = frozenset({"expressions", "from_", "where", "order", "joins"})
_TABLE_ARGS = frozenset({"this", "db", "catalog", "alias"})
_JOIN_ARGS = frozenset({"this", "on", "kind"})
_SUBQUERY_ARGS = frozenset({"this", "alias"})
# Nodes that change how many rows a block has, or what a row means, or that we cannot
# prove deterministic: a block holding one is not inlined.
_REFUSED_NODES = (exp.AggFunc, exp.Window, exp.Select, exp.Subquery, exp.Exists, exp.Explode,
                  exp.Inline, exp.Unnest, exp.Anonymous, exp.Lambda, exp.Star, exp.UDTF,
                  exp.Placeholder, exp.Parameter)


def _set_args(node: exp.Expression) -> set[str]:
    return {k for k, v in node.args.items() if v is not None and v is not False and v != []}


def _unsafe(e: exp.Expression) -> str | None:
    """What keeps `e` from being moved or substituted, or None."""
    for n in e.walk():
        if isinstance(n, _REFUSED_NODES):
            return f"{n.key} inside" if not isinstance(n, exp.Anonymous) else f"unknown function {n.name}"
    bad = nondeterministic(e)
    return f"non-deterministic {bad}" if bad else None


def _inner_join(j: exp.Join) -> bool:
    return not j.side and (j.kind or "INNER").upper() in ("INNER", "CROSS")


def _table_refusal(src) -> str | None:
    if isinstance(src, exp.Subquery):
        return "a derived table that is not trivial inside"
    if not isinstance(src, exp.Table) or not src.db or not isinstance(src.this, exp.Identifier):
        return "no base table inside"
    extra = sorted(_set_args(src) - _TABLE_ARGS)
    if extra:
        return f"table modifier {extra[0].upper()} inside"
    if not src.alias or src.args["alias"].args.get("columns"):
        return "column aliases on the table inside"
    return None


def refusal(sel: exp.Expression) -> str | None:
    """Why the block is not trivial (see module docstring), or None when it is."""
    if isinstance(sel, exp.SetOperation):
        return f"{sel.key.upper()} inside"
    if not isinstance(sel, exp.Select):
        return f"{sel.key} inside"
    extra = sorted(_set_args(sel) - _BLOCK_ARGS)
    if extra:
        return f"{extra[0].rstrip('_').upper()} inside"
    order = sel.args.get("order")
    if order is not None and _set_args(order) - {"expressions"}:
        return "ORDER BY modifier inside"
    src = sel.args["from_"].this if sel.args.get("from_") else None
    joins = sel.args.get("joins") or []
    for j in joins:
        if not _inner_join(j) or _set_args(j) - _JOIN_ARGS:
            return "an outer, NATURAL or USING join inside"
        why = _unsafe(j.args["on"]) if j.args.get("on") is not None else None
        if why:
            return why
    for t in [src] + [j.this for j in joins]:
        why = _table_refusal(t)
        if why:
            return why
    for item in sel.expressions:
        if not isinstance(item, (exp.Alias, exp.Column)) or not item.alias_or_name:
            return "an unnamed output inside"
        why = _unsafe(item)
        if why:
            return why
    where = sel.args.get("where")
    why = _unsafe(where.this) if where is not None else None
    if why:
        return why
    names = [i.alias_or_name.lower() for i in sel.expressions]
    if len(set(names)) != len(names):
        return "duplicate output names inside"
    return None


def _renames_only(sel: exp.Select) -> bool:
    return sel.args.get("where") is None and all(isinstance(i.unalias(), exp.Column) for i in sel.expressions)


def _outer_refusal(outer: exp.Select, sub: exp.Subquery) -> str | None:
    """The outer block cannot tell the derived table from its inlined form. Where an outer
    join may null-extend the derived table's rows, only a pure renaming is inlined: a
    filter moved to WHERE would drop the null-extended rows, and an expression such as
    coalesce(x, 0) is not NULL there, while the derived table's column is."""
    joins = outer.args.get("joins") or []
    if sub.parent is not outer.args.get("from_") and sub.parent not in joins:
        return "not a FROM or JOIN source"
    if sub.this.args.get("joins") and (sub.parent is not outer.args.get("from_")
                                       or not all(_inner_join(j) for j in joins)):
        return "it joins, and it is not the FROM source of inner joins only"
    null_extended = (sub.parent in joins and not _inner_join(sub.parent)) or any(
        (j.side or "").upper() in ("RIGHT", "FULL") for j in joins)
    if null_extended and not _renames_only(sub.this):
        return "an outer join null-extends it and it filters or computes"
    for j in joins:
        if j.args.get("method") or j.args.get("using") or isinstance(j.this, exp.Lateral):
            return "NATURAL, USING or LATERAL join beside it"   # names by text, correlation
    if outer.args.get("laterals") or outer.args.get("pivots"):
        return "LATERAL VIEW or PIVOT beside it"
    parts = [v for k, v in outer.args.items() if k not in ("from_", "with_", "joins") and v is not None]
    parts += [j.args.get("on") for j in joins if j.args.get("on") is not None]
    for v in parts:
        for part in v if isinstance(v, list) else [v]:
            if isinstance(part, exp.Expression) and any(isinstance(n, exp.Select) for n in part.walk()):
                return "a subquery beside it may be correlated on it"
    return None


def _fresh_aliases(outer: exp.Select, sub: exp.Subquery, base: exp.Table,
                   joined: list[exp.Table]) -> dict[str, str]:
    """Inner alias -> its name in the outer scope: the FROM table takes the derived
    table's alias; a joined table keeps its own unless the outer scope has it."""
    taken = {sub.alias}
    for holder in [outer.args.get("from_")] + (outer.args.get("joins") or []):
        if holder is not None and holder.this is not sub:
            taken.add(holder.this.alias_or_name)
    out = {base.alias: sub.alias}
    for t in joined:
        name, k = t.alias, 1
        while name in taken:
            name, k = f"{sub.alias}_{t.alias}_{k}", k + 1
        taken.add(name)
        out[t.alias] = name
    return out


def _inline(outer: exp.Select, sub: exp.Subquery, notes: list[str]) -> bool:
    inner = sub.this
    alias = sub.alias
    why = refusal(inner)
    if why is None and (not alias or not _set_args(sub) <= _SUBQUERY_ARGS
                        or sub.args["alias"].args.get("columns")):
        why = "a modifier on the derived table"
    if why is None:
        why = _outer_refusal(outer, sub)
    if why is not None:
        notes.append(f"derived table {alias or '?'} kept as written ({why})")
        return False
    inner = inner.copy()
    base = inner.args["from_"].this
    inner_joins = list(inner.args.get("joins") or [])
    renames = _fresh_aliases(outer, sub, base, [j.this for j in inner_joins])
    for c in inner.find_all(exp.Column):
        if c.table in renames:
            c.set("table", exp.to_identifier(renames[c.table]))
    for t in [j.this for j in inner_joins]:
        t.set("alias", exp.TableAlias(this=exp.to_identifier(renames[t.alias])))
    values = {i.alias_or_name.lower(): i.unalias() for i in inner.expressions}
    # the outer block's own references only: the body and other derived tables beside it
    # are scopes of their own, where the same alias may name something else
    refs = [c for c in outer.find_all(exp.Column)
            if c.table == alias and c.find_ancestor(exp.Select) is outer]
    if any(c.name.lower() not in values for c in refs):
        return False                      # cannot happen after qualify; refuse rather than guess
    base.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
    sub.replace(base)
    if inner_joins:
        outer.set("joins", [j.pop() for j in inner_joins] + (outer.args.get("joins") or []))
    for c in refs:
        v = values[c.name.lower()].copy()
        c.replace(v if isinstance(v, exp.Column) else exp.Paren(this=v))
    inner_where = inner.args.get("where")
    if inner_where is not None:
        outer.where(exp.Paren(this=inner_where.this), copy=False)
    return True


def _inline_ctes(tree: exp.Expression, notes: list[str]) -> bool:
    """Replace references to a trivial CTE by its body as a derived table (then flattened
    like any other). A CTE name defined twice in the statement refuses (scoping)."""
    withs = list(tree.find_all(exp.With))
    ctes = [c for w in withs for c in w.expressions]
    names = [c.alias_or_name.lower() for c in ctes]
    if any(w.args.get("recursive") for w in withs) or len(set(names)) != len(names):
        return False
    changed = False
    for cte in ctes:
        body = cte.this
        _flatten_selects(body, notes)         # a chain: the body may wrap an earlier CTE
        why = refusal(body)
        if why is not None:
            notes.append(f"CTE {cte.alias_or_name} kept as written ({why})")
            continue
        name = cte.alias_or_name.lower()
        refs = [t for t in tree.find_all(exp.Table)
                if not t.db and t.name.lower() == name and t.find_ancestor(exp.CTE) is not cte]
        if not refs or any(_set_args(t) - _TABLE_ARGS for t in refs):
            continue
        for t in refs:
            t.replace(exp.Subquery(this=body.copy(),
                                   alias=exp.TableAlias(this=exp.to_identifier(t.alias or t.name))))
        changed = True
        cte.pop()          # matched no more as a block of its own
    for w in withs:
        if not w.expressions:
            w.pop()
    return changed


def _flatten_selects(tree: exp.Expression, notes: list[str]) -> bool:
    changed = False
    # innermost first, so a chain of wrappers collapses in one pass
    for sel in reversed(list(tree.find_all(exp.Select))):
        from_ = sel.args.get("from_")
        sources = [from_] if from_ is not None else []
        sources += sel.args.get("joins") or []
        for holder in sources:
            # a source inlined may be a wrapper itself: inline until a table is left
            while isinstance(holder.this, exp.Subquery) and _inline(sel, holder.this, notes):
                changed = True
    return changed


def flatten_tree(tree: exp.Expression, notes: list[str]) -> bool:
    """Inline trivial CTEs and derived tables of a qualified tree in place; True when the
    tree changed. Inlined CTEs stay defined (unused): the caller re-attaches the WITH as
    written anyway. Why a wrapper was kept is appended to `notes` (it feeds EXPLAIN)."""
    changed = _inline_ctes(tree, notes)
    return _flatten_selects(tree, notes) or changed


def flattened_blocks(tree: exp.Expression, blocks: list[exp.Select], notes: list[str]) -> list[int] | None:
    """Flatten `tree` (qualified, its SELECT blocks `blocks` in find_all order) in place.
    None when nothing was inlined; else the indexes in `blocks` of the blocks left, which
    the caller matches and emits at the same index of the statement as written; [] when a
    block left is none of `blocks` (not expected: inlined bodies are flattened away), the
    caller then starts again from the text without flattening."""
    if not flatten_tree(tree, notes):
        return None
    index = {id(b): i for i, b in enumerate(blocks)}
    left = [index.get(id(s)) for s in tree.find_all(exp.Select)]
    return [] if None in left else left


def with_notes(res, flat_skipped: dict[str, str], notes: list[str]):
    """A miss's reasons, for EXPLAIN: what the flattened query was refused for (it says
    more than the wrapper's own block does), else the reason as written, plus why a
    wrapper was kept."""
    for n, why in flat_skipped.items():
        res.skipped[n] = why
    if notes:
        tail = "; ".join(dict.fromkeys(notes))
        for n in res.skipped:
            res.skipped[n] = f"{res.skipped[n]}; {tail}"
    return res
