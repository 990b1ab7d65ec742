"""What a datamap definition SELECT may be: the checks that refuse a definition before its
layout is placed (rewriter/layout.py), each with the SQLSTATE the client gets (a
DatamapDefinitionError): not a plain SELECT, LIMIT, UNION, SELECT *, an unknown table
(42S02), a window function, a WITH that is not a per-row filter and projection of base tables
(inlined: rewriter/flatten.py), more than one timeseries granularity, and an aggregate call
that cannot be stored re-aggregatable (STORABLE, the moments, an HLL sketch)."""
from __future__ import annotations

from sqlglot import exp

from rewriter import distinct, moments
from rewriter.api import DatamapDefinitionError
from rewriter.facts import has_aggregate
from rewriter.flatten import flatten_tree
from rewriter.normalize import DIALECT, NormalizeError, parse

STORABLE = (exp.Sum, exp.Count, exp.Min, exp.Max, exp.Avg)


def refuse(name: str, what: str, sqlstate: str = "0A000") -> DatamapDefinitionError:
    return DatamapDefinitionError(f"datamap {name}: {what}", sqlstate)


def parse_definition(name: str, select_sql: str) -> exp.Select:
    """The definition's tree, refused when its shape is not a plain SELECT block."""
    try:
        tree = parse(select_sql)
    except NormalizeError as e:
        raise refuse(name, str(e), "42000") from e
    if isinstance(tree, exp.Union):
        raise refuse(name, "UNION is not supported in a datamap query")
    if not isinstance(tree, exp.Select):
        raise refuse(name, "the query must be a SELECT")
    if tree.args.get("limit") or tree.args.get("offset"):
        raise refuse(name, "LIMIT is not supported in a datamap query")
    if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
           for e in tree.expressions):
        raise refuse(name, "SELECT * is not supported; list the columns")
    return tree


def check_tables(name: str, tree: exp.Select, schemas, current_db: str) -> None:
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    for t in tree.find_all(exp.Table):
        if not t.db and t.name.lower() in ctes:
            continue
        db = (t.db or current_db).lower()
        if db not in schemas or t.name.lower() not in schemas[db]:
            raise refuse(name, f"table {db}.{t.name.lower()} not found", "42S02")


def check_qualified(name: str, tree: exp.Select) -> None:
    if any(isinstance(n, exp.Window) for n in tree.walk()):
        raise refuse(name, "window functions are not supported in a datamap query")


def inline_ctes(name: str, tree: exp.Select) -> None:
    """A WITH at the head of the definition: each CTE that is a per-row filter and
    projection of base tables is inlined (rewriter/flatten.py); any other is refused."""
    notes: list[str] = []
    flatten_tree(tree, notes)
    with_ = tree.args.get("with_")
    if with_ is not None and with_.expressions:
        why = "; ".join(notes) or f"CTE {with_.expressions[0].alias_or_name} kept as written"
        raise refuse(name, f"WITH: {why}: only a CTE that filters and projects base tables is "
                            "inlined into a datamap definition")
    tree.set("with_", None)


def granularity(name: str, tree: exp.Select) -> str | None:
    """The one timeseries granularity the definition uses, if any."""
    grans = set()
    for node in tree.walk():
        if isinstance(node, exp.Anonymous) and node.name.lower() == "timeseries":
            args = node.expressions
            if len(args) != 2 or not isinstance(args[1], exp.Literal) or not args[1].is_string:
                raise refuse(name, "timeseries() takes a column and a granularity literal", "42000")
            grans.add(args[1].this.lower())
    if len(grans) > 1:
        raise refuse(name, f"more than one timeseries granularity ({', '.join(sorted(grans))})")
    return grans.pop() if grans else None


def check_storable(name: str, agg_node: exp.Expression, q_node: exp.Expression) -> None:
    if distinct.is_sketch_agg(agg_node):
        if distinct.sketch_lgk(agg_node) is None:
            raise refuse(name, f"{q_node.sql(DIALECT)}: lgConfigK must be a whole number from "
                                f"{distinct.MIN_LGK} to {distinct.MAX_LGK}")
        if has_aggregate(agg_node.expressions[0]):
            raise refuse(name, f"nested aggregate {q_node.sql(DIALECT)}")
        return
    if isinstance(agg_node, exp.ApproxDistinct):
        raise refuse(name, f"{q_node.sql(DIALECT)} cannot be re-aggregated; with "
                            f"DMPROPERTIES('{distinct.SKETCH_PROPERTY}'='hll') the datamap "
                            "stores a mergeable sketch of its argument instead")
    if not isinstance(agg_node, STORABLE) and not moments.is_moment(agg_node):
        raise refuse(name, f"aggregate {q_node.sql(DIALECT)} is not supported (sum, count, min, "
                            "max, avg, variance and standard deviation)")
    arg = agg_node.this
    if isinstance(arg, exp.Distinct) and (has_aggregate(arg) or not arg.expressions):
        raise refuse(name, f"{q_node.sql(DIALECT)}: a DISTINCT aggregate of this form cannot "
                            "be kept")
    if arg is not None and has_aggregate(arg):
        raise refuse(name, f"nested aggregate {q_node.sql(DIALECT)}")
