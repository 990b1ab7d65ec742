"""Queries answered from datamaps refreshed in full (rewriter/rebuilt.py), when provable.

A full datamap stores its definition's rows as they are. A block of the query (the whole
statement, a derived table, a subquery, a CTE's body, a branch of a set operation) is
answered from it when:
  * exact: the block is the definition's, once both are qualified against the same schemas
    and put in one form (rebuilt.canonical: table aliases renamed in order, the output
    names set apart). The datamap's rows are then the block's rows; the block's ORDER BY
    (on its outputs) and LIMIT are applied to them;
  * rollup: the definition is one plain grouped block (no GROUPING SETS, HAVING, DISTINCT
    or window) and the query's block has the same FROM, joins and WHERE, groups by some of
    the definition's projected grouping expressions, and projects only those and
    aggregates the definition projects that merge exactly: count(...) (summed; 0 over no
    row when the query has no GROUP BY), sum stored as bigint (an integral sum: adding
    partial sums is exact, where decimal scale and double rounding are not), min and max.
Everything else is refused with a reason (a UNION ALL of aggregates, subtotal rows, an
avg, a decimal or double sum, a distinct count: no rollup is proven for them). A full
datamap is never compensated with new base rows: the freshness guard sends its queries
to the base tables until the rebuild publishes.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp

from rewriter.api import SEGMENT_COLUMN, Candidate, RewriteResult
from rewriter.flatten import flatten_tree
from rewriter.normalize import DIALECT, ident, parse, spark_output_name
from rewriter.rebuilt import FullForm, canonical, leftmost

NOT_ANSWERED = ("refreshed in full: answers only a block that is its definition, or a "
                "coarser GROUP BY of its one grouped block")
_MERGE = {exp.Sum: "SUM", exp.Min: "MIN", exp.Max: "MAX", exp.Count: "SUM"}


@dataclass(frozen=True)
class FullHit:
    datamap: str
    select: exp.Select      # what the block is replaced with


def rewrite_full(sql: str, qtree: exp.Expression, touched, compiled: dict, candidates: dict,
                 skipped: dict[str, str]) -> RewriteResult | None:
    """The statement with each block a full datamap answers replaced by a read of it, or
    None (then `skipped` says why for each full one among `touched`, whose compiled forms
    and candidates the index's dicts hold). `qtree` is the statement qualified (not
    changed); the blocks kept are emitted as written in `sql`."""
    forms = {n: (compiled[n], candidates[n]) for n in touched
             if isinstance(compiled.get(n), FullForm)}
    if not forms:
        return None
    blocks = list(qtree.find_all(exp.Select, exp.SetOperation))
    original = parse(sql)
    written = list(original.find_all(exp.Select, exp.SetOperation))
    if len(blocks) != len(written):
        return None
    hits: dict[int, FullHit] = {}
    for i, block in enumerate(blocks):
        if any(_inside(block, blocks[j]) for j in hits):
            continue
        hit = _answer(block, written[i], forms, skipped)
        if hit is not None:
            hits[i] = hit
    if not hits:
        return _flattened(qtree, original, forms, skipped)
    tree = original
    used: list[str] = []
    for i, hit in hits.items():
        if written[i] is original:
            tree = hit.select
        else:
            written[i].replace(hit.select)
        if hit.datamap not in used:
            used.append(hit.datamap)
    for n in used:
        skipped.pop(n, None)
    return RewriteResult(tree.sql(DIALECT), True, used, skipped, tree=tree)


def _flattened(qtree, original, forms, skipped) -> RewriteResult | None:
    """The whole statement answered once its BI wrappers (rewriter/flatten.py: trivial
    derived tables and CTEs around base tables) are inlined, as the incremental matcher
    reads it: a wrapper changes no answer. Only the statement as a whole is tried here."""
    flat = qtree.copy()
    if not flatten_tree(flat, []):
        return None
    with_ = flat.args.get("with_")
    if with_ is not None:
        names = {c.alias_or_name.lower() for c in with_.expressions}
        if any(not t.db and t.name.lower() in names for t in flat.find_all(exp.Table)):
            return None
        flat.set("with_", None)       # inlined CTEs stay defined, unused
    hit = _answer(flat, original, forms, skipped)
    if hit is None:
        return None
    skipped.pop(hit.datamap, None)
    return RewriteResult(hit.select.sql(DIALECT), True, [hit.datamap], skipped, tree=hit.select)


def _inside(node: exp.Expression, outer: exp.Expression) -> bool:
    p = node.parent
    while p is not None:
        if p is outer:
            return True
        p = p.parent
    return False


def _answer(block, written, forms, skipped) -> FullHit | None:
    head = leftmost(written)
    if head is None or not isinstance(block, (exp.Select, exp.SetOperation)):
        return None
    names = [spark_output_name(e) for e in head.expressions]
    canon = canonical(block)
    text = canon.sql(DIALECT)
    for name, (form, cand) in sorted(forms.items()):
        if cand.delta:
            skipped[name] = "union compensation refused: a datamap refreshed in full is never " \
                            "compensated"
            continue
        if None in names:
            skipped.setdefault(name, "an output of the block has no name Spark is known to give")
            continue
        try:
            if text == form.canon:
                sel = _exact(form, cand, block, names)
            else:
                sel = _rollup(form, cand, block, canon, names)
        except _NoMatch as e:
            skipped[name] = f"{NOT_ANSWERED} ({e})"
            continue
        if sel is None:
            skipped.setdefault(name, NOT_ANSWERED)
            continue
        return FullHit(name, sel)
    return None


class _NoMatch(Exception):
    def __init__(self, why: str):
        super().__init__(re.sub(r"\b_t\d+\.", "", why))   # rebuilt.canonical's aliases


def _relation(form: FullForm, cand: Candidate, alias: str) -> exp.Expression:
    db, table = (cand.storage or form.definition.table).split(".", 1)
    inner = exp.Select(expressions=[exp.Column(this=ident(c.name))
                                    for c in form.definition.columns])
    inner.set("from_", exp.From(this=exp.Table(this=ident(table), db=ident(db))))
    if cand.segments is not None:
        segs = [exp.Literal.string(s) for s in cand.segments]
        inner.set("where", exp.Where(this=exp.In(this=exp.Column(this=ident(SEGMENT_COLUMN)),
                                                 expressions=segs) if segs else exp.false()))
    return exp.Subquery(this=inner, alias=exp.TableAlias(this=ident(alias)))


def _col(alias: str, name: str) -> exp.Column:
    return exp.Column(this=ident(name), table=ident(alias))


def _exact(form: FullForm, cand: Candidate, block, names) -> exp.Select:
    alias = form.definition.name
    outs = [_col(alias, c.name) for c in form.definition.columns]
    if len(outs) != len(names):
        raise _NoMatch("the block projects other columns")
    return _finish(form, cand, block, names, outs, None)


def _finish(form, cand, block, names, outs, group) -> exp.Select:
    """SELECT outs AS names FROM the datamap [GROUP BY] with the block's ORDER BY / LIMIT."""
    alias = form.definition.name
    sel = exp.Select(expressions=[exp.alias_(o, ident(n)) for o, n in zip(outs, names)])
    sel.set("from_", exp.From(this=_relation(form, cand, alias)))
    if group:
        sel.set("group", exp.Group(expressions=group))
    order = block.args.get("order")
    if order is not None:
        sel.set("order", exp.Order(expressions=[_order_item(o, block, names, outs)
                                                for o in order.expressions]))
    for arg in ("limit", "offset"):
        if block.args.get(arg) is not None:
            sel.set(arg, block.args[arg].copy())
    return sel


def _order_item(o: exp.Ordered, block, names, outs) -> exp.Ordered:
    """An ORDER BY item on one of the block's outputs (its expression, its name, or its
    position), as the same output of the datamap's read."""
    target = o.this
    head = leftmost(block)
    keys = [(e.this if isinstance(e, exp.Alias) else e).sql(DIALECT) for e in head.expressions]
    i = None
    if isinstance(target, exp.Literal) and not target.is_string and target.this.isdigit():
        i = int(target.this) - 1
    elif target.sql(DIALECT) in keys:
        i = keys.index(target.sql(DIALECT))
    elif isinstance(target, exp.Column) and not target.table and target.name in names:
        i = names.index(target.name)
    if i is None or not 0 <= i < len(outs):
        raise _NoMatch(f"ORDER BY {target.sql(DIALECT)} is not on an output")
    item = o.copy()
    item.set("this", outs[i].copy())
    return item


def _grouped(sel) -> bool:
    group = sel.args.get("group")
    return bool(group is not None and group.expressions and not group.args.get("rollup")
                and not group.args.get("cube") and not any(
                    isinstance(g, (exp.GroupingSets, exp.Cube, exp.Rollup))
                    for g in group.expressions))


def _plain(sel) -> bool:
    return not (sel.args.get("having") or sel.args.get("distinct") or sel.args.get("qualify")
                or any(isinstance(n, exp.Window) for n in sel.walk()))


def _frame(sel: exp.Select) -> str:
    f = sel.copy()
    f.set("expressions", [exp.Star()])
    for arg in ("group", "having", "distinct", "qualify"):   # judged by _plain
        f.set(arg, None)
    return f.sql(DIALECT)


def _rollup(form, cand, block, canon, names) -> exp.Select | None:
    d = form.tree
    if not isinstance(d, exp.Select) or not isinstance(canon, exp.Select) or not _grouped(d):
        return None
    if _frame(d) != _frame(canon):
        return None
    if not _plain(d) or not _plain(canon):
        raise _NoMatch("HAVING, DISTINCT or a window in a block")
    cols = form.definition.columns
    d_groups = {g.sql(DIALECT) for g in d.args["group"].expressions}
    stored = {e.sql(DIALECT): c for e, c in zip(d.expressions, cols)}
    alias = form.definition.name
    q_group = canon.args.get("group")
    if q_group is not None and not _grouped(canon):
        raise _NoMatch("GROUPING SETS / CUBE / ROLLUP in the query")
    groups = []
    for g in q_group.expressions if q_group is not None else []:
        key = g.sql(DIALECT)
        if key not in d_groups or key not in stored:
            raise _NoMatch(f"{key} is not a projected grouping expression of the datamap")
        groups.append(_col(alias, stored[key].name))
    outs = [_merged(e, stored, d_groups, {g.sql(DIALECT) for g in q_group.expressions}
                    if q_group is not None else set(), alias) for e in canon.expressions]
    return _finish(form, cand, block, names, outs, groups)


def _merged(e, stored, d_groups, q_groups, alias) -> exp.Expression:
    key = e.sql(DIALECT)
    if key in q_groups:
        return _col(alias, stored[key].name)
    col = stored.get(key)
    if col is None or key in d_groups:
        raise _NoMatch(f"{key} is not stored by the datamap")
    arg = e.this
    if type(e) not in _MERGE or isinstance(arg, exp.Distinct):
        raise _NoMatch(f"{key} cannot be merged exactly from its stored values")
    if isinstance(e, exp.Sum) and col.type != "bigint":
        raise _NoMatch(f"{key} is a sum of type {col.type or 'unknown'}: only integral sums "
                       "merge exactly")
    if isinstance(e, (exp.Min, exp.Max)) and not col.type:
        raise _NoMatch(f"{key} has no known type")
    merged = exp.func(_MERGE[type(e)], _col(alias, col.name))
    if isinstance(e, exp.Count) and not q_groups:
        return exp.func("COALESCE", merged, exp.Literal.number(0))
    return merged
