"""What a datamap must hold to answer one query: the advisor's view of a logged statement.

A `Profile` is read off the same facts the matcher uses (rewriter/facts.py), so the
advisor and the rewriter agree on what a query needs:
  graph     the join graph: tables, join kinds and join conditions (the key shapes are
            grouped by; a datamap answers only queries over its exact join graph)
  dims      what the datamap must group by: the query's grouping expressions, every
            column its filters read (so the rewriter can apply them over the datamap's
            rows), and the argument of each count(DISTINCT x) (answered by grouping on x)
  aggs      the mergeable partials the rewriter rolls up: sum, count, count(*), min, max
            (avg(x) needs sum(x) and count(x)); a variance or standard deviation of x
            needs var_pop(x), which stores its moments (rewriter/moments.py)
Only aggregate queries get a profile: a projection-only datamap saves nothing over its base
tables. Expressions are printed over `table.column` with each table aliased by its bare
name, which is how `definition_sql` writes the FROM clause.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp

from rewriter import moments
from rewriter.aggregates import is_aggregate_call
from rewriter.facts import Facts, Unsupported, extract
from rewriter.normalize import (DIALECT, NormalizeError, column_key, key_of, make_schema, parse,
                                qualify_tree, spark_output_name)


@dataclass(frozen=True)
class Graph:
    key: str                              # identity of the join graph
    tables: tuple[str, ...]               # "db.table" in FROM order
    from_sql: str                         # FROM ... JOIN ... ON ... (aliases = bare names)

    @property
    def database(self) -> str:
        return self.tables[0].split(".", 1)[0]


@dataclass
class Profile:
    graph: Graph
    dims: dict[str, str] = field(default_factory=dict)      # key -> SQL
    aggs: dict[str, str] = field(default_factory=dict)      # key -> SQL ("SUM(f.amt)")
    dim_columns: dict[str, frozenset[str]] = field(default_factory=dict)  # key -> "db.t.c"


_PARTIALS = {exp.Sum: "sum", exp.Min: "min", exp.Max: "max"}
_DISTINCT_AS_GROUP = ("approx_count_distinct",)


def profile(statement: str, current_db: str, schemas) -> Profile | str:
    """The Profile of a statement's outer SELECT block, or why it has none (one line)."""
    try:
        tree = parse(statement)
    except NormalizeError as e:
        return f"does not parse: {e}"
    if not isinstance(tree, exp.Select):
        return "not a single SELECT block"
    if tree.find(exp.Subquery) is not None or tree.args.get("with_") is not None:
        return "has subqueries"
    names = [spark_output_name(e) for e in tree.expressions]
    try:
        qualify_tree(tree, make_schema(schemas), (current_db or "default").lower())
        facts = extract(tree, schemas, names, in_place=True, as_query=True)
    except (Unsupported, NormalizeError) as e:
        return f"not supported: {e}"
    except Exception as e:  # noqa: BLE001 - sqlglot raises several kinds for unknown columns
        return f"does not resolve: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
    if not facts.is_aggregate:
        return "not an aggregate query"
    return _from_facts(facts)


def _from_facts(facts: Facts) -> Profile | str:
    if any(e.relation is not None for e in facts.edges):
        return "reads a derived table or a table twice"
    bare = [e.table.split(".", 1)[1] for e in facts.edges]
    if len(set(bare)) != len(bare):
        return "two tables of the same name"
    graph = _graph(facts)
    if isinstance(graph, str):
        return graph
    prof = Profile(graph)
    for g in facts.group:
        _add_dim(prof, g)
    for p in facts.preds:
        if p.kind == "eq" and len({c.rsplit(".", 1)[0] for c in p.cols}) > 1:
            continue                      # a join condition: part of the graph
        for col in p.expr.find_all(exp.Column):
            _add_dim(prof, col)
    roots = [o for _, o in facts.outputs] + ([facts.having] if facts.having is not None else [])
    roots += [item[1] if item[0] == "expr" else item[1][0] for item in facts.order]
    for root in roots:
        for node in root.walk():
            if is_aggregate_call(node):
                why = _add_agg(prof, node)
                if why:
                    return why
    prof.aggs.setdefault("count(*)", "COUNT(*)")   # every rollup of counts and averages needs it
    return prof


def _graph(facts: Facts) -> Graph | str:
    joins: dict[int, list[exp.Expression]] = {}
    order = {e.table: i for i, e in enumerate(facts.edges)}
    keys = []
    for p in facts.preds:
        if p.kind != "eq":
            continue
        tabs = sorted({c.rsplit(".", 1)[0] for c in p.cols}, key=order.__getitem__)
        if len(tabs) < 2:
            continue
        joins.setdefault(order[tabs[-1]], []).append(p.expr)
        keys.append("=".join(sorted(p.cols)))
    parts = []
    for i, e in enumerate(facts.edges):
        name = e.table.split(".", 1)[1]
        rel = f"{e.table} AS {name}"
        if i == 0:
            parts.append(f"FROM {rel}")
            continue
        if e.kind == "left":
            on = e.on
            keys.append(f"left:{e.table}:{e.on_key}")
        elif e.kind in ("inner", "from"):
            on = joins.get(i, [])
        else:
            return f"{e.kind} join"
        if not on:
            return f"no join condition for {e.table}"
        cond = " AND ".join(_aliased(c).sql(DIALECT) for c in on)
        parts.append(f"{'LEFT JOIN' if e.kind == 'left' else 'JOIN'} {rel} ON {cond}")
    key = "|".join(sorted(e.table for e in facts.edges)) + "#" + "&".join(sorted(keys))
    return Graph(key, tuple(e.table for e in facts.edges), " ".join(parts))


def _aliased(e: exp.Expression) -> exp.Expression:
    """A canonical expression (columns `db.table.column`) over `table.column`."""
    e = e.copy()
    for col in list(e.find_all(exp.Column)):
        parts = col.parts
        if len(parts) >= 3:
            new = exp.column(parts[-1].name, table=parts[-2].name)
            if col is e:
                return new
            col.replace(new)
    return e


def _add_dim(prof: Profile, e: exp.Expression) -> None:
    key = key_of(e)
    if key not in prof.dims:
        prof.dims[key] = _aliased(e).sql(DIALECT)
        prof.dim_columns[key] = frozenset(column_key(c) for c in e.find_all(exp.Column))


def _add_agg(prof: Profile, node: exp.Expression) -> str | None:
    arg = node.this
    if isinstance(node, exp.Count):
        if isinstance(arg, exp.Distinct):
            for x in arg.expressions:
                _add_dim(prof, x)
        elif arg is None or isinstance(arg, exp.Star):
            prof.aggs["count(*)"] = "COUNT(*)"
        else:
            _put(prof, "count", arg)
        return None
    if isinstance(node, exp.Avg):
        _put(prof, "sum", arg)
        _put(prof, "count", arg)
        return None
    for cls, fn in _PARTIALS.items():
        if isinstance(node, cls):
            if isinstance(arg, exp.Distinct):
                for x in arg.expressions:
                    _add_dim(prof, x)
            else:
                _put(prof, fn, arg)
            return None
    if moments.is_moment(node):
        # one variance of x stores what every form of it needs (rewriter/moments.py):
        # count, sum and sum of squares as double, min and max
        x = moments.argument(node)
        prof.aggs.setdefault(f"moments({key_of(x)})", f"VAR_POP({_aliased(x).sql(DIALECT)})")
        return None
    name = node.name.lower() if isinstance(node, exp.Anonymous) else node.key
    if name in _DISTINCT_AS_GROUP or isinstance(node, exp.ApproxDistinct):
        _add_dim(prof, arg)
        return None
    return f"aggregate {name} has no mergeable partial"


def _put(prof: Profile, fn: str, arg: exp.Expression) -> None:
    prof.aggs.setdefault(f"{fn}({key_of(arg)})", f"{fn.upper()}({_aliased(arg).sql(DIALECT)})")


def definition_sql(graph: Graph, dims: dict[str, str], aggs: dict[str, str]) -> str:
    """The datamap SELECT grouping by `dims` with the partials `aggs`, every output named."""
    used: set[str] = set()
    select, group = [], []
    for i, (key, sql) in enumerate(sorted(dims.items())):
        name = _name(sql, f"g{i}", used)
        select.append(f"{sql} AS {name}")
        group.append(sql)
    for i, (key, sql) in enumerate(sorted(aggs.items())):
        select.append(f"{sql} AS {_name(sql, f'a{i}', used)}")
    out = f"SELECT {', '.join(select)} {graph.from_sql}"
    return out + (f" GROUP BY {', '.join(group)}" if group else "")


def _name(sql: str, fallback: str, used: set[str]) -> str:
    """A readable stored-column name: `region`, `sum_amount`, `count_all`, else fallback."""
    try:
        e = parse(sql)
    except NormalizeError:
        e = None
    name = fallback
    if isinstance(e, exp.Column):
        name = e.name
    elif isinstance(e, exp.Count) and isinstance(e.this, exp.Star):
        name = "count_all"
    elif isinstance(e, (exp.Sum, exp.Count, exp.Min, exp.Max)) and isinstance(e.this, exp.Column):
        name = f"{e.key}_{e.this.name}"
    elif isinstance(e, exp.VariancePop) and isinstance(e.this, exp.Column):
        name = f"var_pop_{e.this.name}"
    name = name.lower()
    if name in used:
        name = f"{name}_{fallback}"
    used.add(name)
    return name
