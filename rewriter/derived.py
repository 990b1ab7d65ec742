"""Opaque subqueries of a query block: derived tables joined onto the datamap's rows, and
uncorrelated subqueries in WHERE.

BI tools use one aggregate twice in a statement: Superset's series limit joins the
aggregate to a ranked, LIMITed copy of itself (`JOIN (SELECT k AS k__, ... ORDER BY m
DESC LIMIT n) AS series_limit ON k = k__`), top-N filters write `WHERE k IN (SELECT k ...
LIMIT n)`, Tableau and Power BI join "groups" and parameter tables written as a `UNION
ALL` of literal rows. The block reads a base table plus such a relation; the matcher
treats the relation as an opaque query-delta table (rewriter/rules/match_tables.py):

  * a derived table S joined (INNER, or as the right side of a LEFT JOIN) on conditions
    over datamap grouping columns: every base row of one datamap group carries the same
    values of those columns, so it joins the same rows of S, and re-aggregating the
    group's partial aggregates over the join equals aggregating its base rows over it;
  * a WHERE conjunct holding an uncorrelated subquery: the subquery is a constant of the
    statement, so the conjunct is a function of the outer columns it names and holds for
    all of a group's rows or none when those are grouping columns.

Either way the subquery runs as written, so its own block is matched on its own (the
same datamap may answer it). Correlated subqueries (a column of an alias the subquery
does not define) refuse; so does anything else the block holds (scalar subqueries in
the select list, EXISTS, subqueries in HAVING).

The matcher works on the qualified tree; the statement is emitted from the tree as
written. Each opaque subquery is marked (node.meta["opaque"]: the derived table's alias,
or the ordinal of a WHERE subquery) and `graft` swaps the marked copies in a rewritten
block for the written nodes, whose own blocks are then rewritten in place.
"""
from __future__ import annotations

from sqlglot import exp

DERIVED_DB = "#derived"     # pseudo database of a derived table's columns ("#derived.alias.col")
MARK = "opaque"


def _own_aliases(sel: exp.Select) -> set[str]:
    rels = _relations(sel)
    names = {r.alias_or_name.lower() for r in rels if r.alias_or_name}
    w = sel.args.get("with_")
    if w is not None:
        names |= {c.alias_or_name.lower() for c in w.expressions}
    return names


def correlated(sub: exp.Expression) -> bool:
    """Whether the subquery names a column of an alias that no SELECT between the column
    and the subquery's root defines (SQL scoping: the nearest enclosing definition wins)."""
    for col in sub.find_all(exp.Column):
        if not col.table:
            continue
        name, node, found = col.table.lower(), col.parent, False
        while node is not None and not found:
            found = isinstance(node, exp.Select) and name in _own_aliases(node)
            if node is sub:
                break
            node = node.parent
        if not found:
            return True
    return False


def _where_subqueries(select: exp.Select) -> list[exp.Subquery]:
    where = select.args.get("where")
    if where is None:
        return []
    return [n for n in where.walk(prune=lambda n: isinstance(n, exp.Subquery))
            if isinstance(n, exp.Subquery)]


def _relations(select: exp.Select) -> list[exp.Expression]:
    from_ = select.args.get("from_")
    return ([from_.this] if from_ else []) + [j.this for j in select.args.get("joins") or []]


def mark(select: exp.Select) -> set[int]:
    """Mark the block's opaque subqueries (see module docstring); their ids. A correlated
    one is not marked (the block then refuses it as a subquery)."""
    ids = set()
    for rel in _relations(select):
        if isinstance(rel, exp.Subquery) and rel.alias and not correlated(rel):
            rel.meta[MARK] = ("rel", rel.alias.lower())
            ids.add(id(rel))
    for i, sub in enumerate(_where_subqueries(select)):
        if not correlated(sub):
            sub.meta[MARK] = ("where", i)
            ids.add(id(sub))
    return ids


def outer_columns(e: exp.Expression):
    """The columns of `e` outside its subqueries."""
    for n in e.walk(prune=lambda n: isinstance(n, exp.Subquery) and n is not e):
        if isinstance(n, exp.Column):
            yield n


def has_opaque(sel: exp.Expression) -> bool:
    return any(MARK in n.meta for n in sel.find_all(exp.Subquery))


def graft(sel: exp.Select, written: exp.Select) -> bool:
    """Put the written block's subqueries in place of the marked copies in `sel`. False
    (sel unusable) when one has no written counterpart."""
    table = {}
    for rel in _relations(written):
        if isinstance(rel, exp.Subquery) and rel.alias:
            table[("rel", rel.alias.lower())] = rel
    for i, sub in enumerate(_where_subqueries(written)):
        table[("where", i)] = sub
    marks = [n for n in sel.find_all(exp.Subquery) if MARK in n.meta]
    if any(n.meta[MARK] not in table for n in marks):
        return False
    for n in marks:
        kind, alias = n.meta[MARK]
        if kind == "rel":
            # qualification names every column of the derived table; the written one
            # must have each name the rewritten block reads (no `_col_1` of an unnamed one)
            names = {x.lower() for x in table[n.meta[MARK]].this.named_selects}
            if any(c.table.lower() == alias and c.name.lower() not in names
                   for c in outer_columns(sel)):
                return False
    for n in marks:
        n.replace(table[n.meta[MARK]])
    return True


def put_matches(tree: exp.Expression, originals, matches, skipped):
    """Each block's match in place of the block as written: (the statement, the datamaps
    used, those answering with estimates, whether any block was replaced)."""
    used: list[str] = []
    approximate: list[str] = []
    replaced = False
    for orig, m in zip(originals, matches):
        if m is None:
            continue
        if has_opaque(m.select) and not graft(m.select, orig):
            skipped.setdefault(m.datamap, "a derived table's column has no name as written")
            continue
        if orig.args.get("with_") is not None:
            m.select.set("with_", orig.args["with_"])  # same nodes: CTE blocks still get rewritten
        if orig is tree:
            tree = m.select
        else:
            orig.replace(m.select)
        replaced = True
        approximate.extend(m.approximate)
        if m.datamap not in used:
            used.append(m.datamap)
    return tree, used, approximate, replaced
