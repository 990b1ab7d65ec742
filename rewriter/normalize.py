"""The one normaliser used for queries and datamap definitions alike.

Pipeline: parse (dialect spark, datetime patterns kept as written: `DIALECT`) -> remember
Spark's output column names -> sqlglot `qualify` against the schemas (tables become db.table
AS alias, every column is qualified, stars and alias references are expanded, identifiers
are lower-cased) -> per predicate, a canonical form (`canonical_predicate`) and per
expression a canonical key (`key_of`).

Canonical forms, so that the same meaning gives the same key:
  * commutative operators (AND, OR, +, *, =, <>, <=>) have their operands sorted;
  * `literal op column` becomes `column op' literal`; NOT over a comparison is folded;
  * BETWEEN becomes two range conjuncts; an OR of equalities on one column becomes IN,
    IN lists are sorted and deduplicated, a one-element IN is an equality;
  * DATE '...' / TIMESTAMP '...' literals and CAST('...' AS DATE) are one form (sqlglot
    already parses both to a Cast of a string literal);
  * table aliases disappear: columns are keyed as db.table.column.
"""
from __future__ import annotations

import re

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import OptimizeError, ParseError, TokenError
from sqlglot.optimizer.qualify import qualify
from sqlglot.schema import MappingSchema
from sqlglot.time import format_time

from rewriter.precedence import parenthesize



# Spark names an unaliased aggregate's column after the spelling used; sqlglot reads
# variance(x) and var_samp(x) into one node (exp.Variance). parse() keeps the spelling in
# the node's meta (SPELLED) when the statement uses one spelling only; the other moments
# have one spelling each (_FUNC_NAMES).
_VARIANCE_SPELLINGS = ("variance", "var_samp")
SPELLED = "spelled"


class SparkVerbatim(Spark):
    """Spark SQL whose datetime patterns stay as written. sqlglot's Spark reads
    `date_format(c, 'YYYY')` as strftime's `%Y` and writes it back as 'yyyy' (likewise
    'y', 'yyyyy', and letters inside quoted text): another pattern, with other values (or
    none: Spark 4 rejects 'YYYY'). Here the pattern literal holds Spark's own text, in the
    tree and in the SQL written from it (rewriter/grains.py and the serving tier read it).
    """
    TIME_MAPPING: dict[str, str] = {}


SparkVerbatim.INVERSE_TIME_MAPPING = {}     # the metaclass adds strftime's strict forms
SparkVerbatim.INVERSE_TIME_TRIE = {}
DIALECT = SparkVerbatim

# Functions whose value changes from call to call: a block using one is never rewritten.
NONDETERMINISTIC_CLASSES = (exp.Rand, exp.Randn, exp.Uuid, exp.CurrentTimestamp, exp.CurrentDate,
                            exp.CurrentTime, exp.CurrentDatetime)
NONDETERMINISTIC_NAMES = frozenset({
    "rand", "random", "randn", "uuid", "now", "current_timestamp", "current_date",
    "localtimestamp", "current_timezone", "shuffle", "monotonically_increasing_id",
    "spark_partition_id", "input_file_name", "input_file_block_start", "input_file_block_length",
    "unix_timestamp", "rand_str", "randstr", "uniform", "try_reflect", "reflect", "java_method",
    "curdate", "sysdate", "current_user", "user", "session_user",
})


class NormalizeError(Exception):
    """The SQL does not parse or does not resolve against the schemas."""

    def __init__(self, message: str, sqlstate: str = "42000"):
        super().__init__(message)
        self.sqlstate = sqlstate


def parse(sql: str) -> exp.Expression:
    """One statement, dialect spark."""
    try:
        trees = sqlglot.parse(sql, read=DIALECT)
    except (ParseError, TokenError) as e:     # TokenError: e.g. an unterminated string
        raise NormalizeError(f"cannot parse SQL: {str(e).splitlines()[0]}") from e
    trees = [t for t in trees if t is not None]
    if len(trees) != 1:
        raise NormalizeError(f"expected one statement, got {len(trees)}")
    return keep_spelled_formats(_keep_variance_spelling(trees[0], sql))


def _keep_variance_spelling(tree: exp.Expression, sql: str) -> exp.Expression:
    """Mark each exp.Variance with the spelling the statement used (SPELLED), when it used
    only one of variance / var_samp (tokens, so strings and comments do not count)."""
    nodes = list(tree.find_all(exp.Variance))
    if not nodes:
        return tree
    used = {t.text.lower() for t in DIALECT().tokenize(sql)
            if t.text.lower() in _VARIANCE_SPELLINGS and t.token_type.name == "VAR"}
    if len(used) == 1:
        spelling = used.pop()
        for node in nodes:
            node.meta[SPELLED] = spelling
    return tree


def keep_spelled_formats(tree: exp.Expression) -> exp.Expression:
    """sqlglot writes `to_date(x, 'yyyy-MM-dd')` and `to_date(x, 'yyyy-MM-dd HH:mm:ss')`
    back as `TO_DATE(x)`, taking either pattern for Hive's default; in Spark they differ on
    text (the pattern parses strictly: '2024-1-5' or '2024-01-05 10:00' give NULL or an
    error, `to_date(x)` gives a date). A to_date with its pattern is kept as the call the
    user wrote, with the pattern the user wrote."""
    for node in list(tree.find_all(exp.TsOrDsToDate)):
        fmt = node.args.get("format")
        if fmt is not None and "," not in node.sql(DIALECT):
            pattern = format_time(fmt.name, Spark.INVERSE_TIME_MAPPING, Spark.INVERSE_TIME_TRIE)
            node.replace(exp.Anonymous(this="to_date", expressions=[
                node.this.copy(), exp.Literal.string(pattern)]))
    return tree


def make_schema(schemas) -> MappingSchema:
    nested = {db: {t: dict(cols) for t, cols in tables.items()} for db, tables in schemas.items()}
    return MappingSchema(nested, dialect=DIALECT, normalize=False)


def qualify_tree(tree: exp.Expression, schema: MappingSchema, current_db: str) -> exp.Expression:
    """Qualify in place (tables, columns, stars). Raises NormalizeError(42S02) on unknown names."""
    try:
        return qualify(tree, schema=schema, db=current_db, dialect=DIALECT,
                       validate_qualify_columns=True, quote_identifiers=False,
                       identify=False)
    except OptimizeError as e:
        raise NormalizeError(f"cannot resolve: {e}", "42S02") from e


# ---------------------------------------------------------------- Spark's output names

_BIN_OPS = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*", exp.Div: "/", exp.Mod: "%",
            exp.EQ: "=", exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<=",
            exp.And: "AND", exp.Or: "OR", exp.NullSafeEQ: "<=>"}
_FUNC_NAMES = {exp.Sum: "sum", exp.Count: "count", exp.Min: "min", exp.Max: "max",
               exp.Avg: "avg", exp.Upper: "upper", exp.Lower: "lower", exp.Abs: "abs",
               exp.Coalesce: "coalesce", exp.Year: "year", exp.Month: "month", exp.Day: "day",
               exp.Quarter: "quarter", exp.Length: "length", exp.VariancePop: "var_pop",
               exp.Stddev: "stddev", exp.StddevSamp: "stddev_samp", exp.StddevPop: "stddev_pop"}


def spark_output_name(e: exp.Expression) -> str | None:
    """The column name Spark gives a SELECT item, or None when we cannot be sure."""
    if isinstance(e, exp.Alias):
        return e.alias
    if isinstance(e, exp.Column):
        return e.name if not isinstance(e.this, exp.Star) else None
    if isinstance(e, exp.Cast) and not e.args.get("safe") and isinstance(e.this, exp.Column):
        return e.this.name              # Spark (ResolveAliases) names CAST(col AS t) after col
    return _pretty(e)


def _pretty(e: exp.Expression) -> str | None:
    if isinstance(e, exp.Paren):
        return _pretty(e.this)
    if isinstance(e, exp.Column):
        return e.name
    if isinstance(e, exp.Literal):
        return e.this
    if isinstance(e, exp.Boolean):
        return "true" if e.this else "false"
    if isinstance(e, exp.Null):
        return "NULL"
    if isinstance(e, exp.Cast) and not e.args.get("safe"):
        inner = _pretty(e.this)
        to = e.to.sql(DIALECT).upper().replace(", ", ",")
        return None if inner is None else f"CAST({inner} AS {to})"
    if isinstance(e, exp.Neg):
        inner = _pretty(e.this)
        if isinstance(e.this, exp.Literal) and inner is not None:
            return "-" + inner
        return None if inner is None else f"(- {inner})"
    if isinstance(e, exp.Not):
        inner = _pretty(e.this)
        return None if inner is None else f"(NOT {inner})"
    if isinstance(e, exp.NEQ):
        a, b = _pretty(e.this), _pretty(e.expression)
        return None if a is None or b is None else f"(NOT ({a} = {b}))"
    op = _BIN_OPS.get(type(e))
    if op:
        a, b = _pretty(e.this), _pretty(e.expression)
        return None if a is None or b is None else f"({a} {op} {b})"
    if isinstance(e, exp.Count):
        arg = e.this
        if arg is None or isinstance(arg, exp.Star):
            return "count(1)"
        if isinstance(arg, exp.Distinct):
            parts = [_pretty(x) for x in arg.expressions]
            return None if None in parts else f"count(DISTINCT {', '.join(parts)})"
        inner = _pretty(arg)
        return None if inner is None else f"count({inner})"
    name = _FUNC_NAMES.get(type(e))
    if name:
        args = []
        for a in [e.this, *e.expressions] if not isinstance(e, exp.Coalesce) else [e.this, *e.expressions]:
            if a is None:
                continue
            if isinstance(a, exp.TsOrDsToDate):   # sqlglot wraps year(d) etc.
                a = a.this
            if isinstance(a, exp.Distinct):
                inner = [_pretty(x) for x in a.expressions]
                if None in inner:
                    return None
                args.append("DISTINCT " + ", ".join(inner))
                continue
            p = _pretty(a)
            if p is None:
                return None
            args.append(p)
        return f"{name}({', '.join(args)})"
    if isinstance(e, exp.Variance) and e.meta.get(SPELLED):
        inner = _pretty(e.this)
        return None if inner is None else f"{e.meta[SPELLED]}({inner})"
    if isinstance(e, exp.Anonymous):
        args = [_pretty(a) for a in e.expressions]
        return None if None in args else f"{e.name.lower()}({', '.join(args)})"
    if isinstance(e, exp.Case) and e.this is None:
        parts = ["CASE"]
        for w in e.args.get("ifs") or []:
            c, v = _pretty(w.this), _pretty(w.args.get("true"))
            if c is None or v is None:
                return None
            parts.append(f"WHEN {c} THEN {v}")
        if e.args.get("default") is not None:
            d = _pretty(e.args["default"])
            if d is None:
                return None
            parts.append(f"ELSE {d}")
        parts.append("END")
        return " ".join(parts)
    return None


# ---------------------------------------------------------------- canonical forms

_FLIP = {exp.GT: exp.LT, exp.LT: exp.GT, exp.GTE: exp.LTE, exp.LTE: exp.GTE,
         exp.EQ: exp.EQ, exp.NEQ: exp.NEQ}
_NEGATE = {exp.GT: exp.LTE, exp.LTE: exp.GT, exp.LT: exp.GTE, exp.GTE: exp.LT,
           exp.EQ: exp.NEQ, exp.NEQ: exp.EQ}
COMMUTATIVE = (exp.And, exp.Or, exp.Add, exp.Mul, exp.EQ, exp.NEQ, exp.NullSafeEQ)


def is_constant(e: exp.Expression) -> bool:
    """A literal, possibly negated or cast (DATE '...' is a Cast of a string literal)."""
    if isinstance(e, exp.Literal):
        return True
    if isinstance(e, (exp.Neg, exp.Paren)):
        return is_constant(e.this)
    if isinstance(e, exp.Cast):
        return isinstance(e.this, exp.Literal)
    return False


def strip_parens(e: exp.Expression) -> exp.Expression:
    while isinstance(e, exp.Paren):
        e = e.this
    return e


def conjuncts(e: exp.Expression | None) -> list[exp.Expression]:
    if e is None:
        return []
    e = strip_parens(e)
    if isinstance(e, exp.And):
        return conjuncts(e.this) + conjuncts(e.expression)
    return [e]


def disjuncts(e: exp.Expression) -> list[exp.Expression]:
    e = strip_parens(e)
    if isinstance(e, exp.Or):
        return disjuncts(e.this) + disjuncts(e.expression)
    return [e]


def canonical_predicate(e: exp.Expression, copy: bool = True) -> list[exp.Expression]:
    """One predicate -> canonical conjuncts (fresh trees unless copy=False, which may reuse
    parts of a disposable `e`)."""
    e = strip_parens(e)
    if isinstance(e, exp.And):
        return canonical_predicate(e.this, copy) + canonical_predicate(e.expression, copy)
    if isinstance(e, exp.Between):
        c = e.this.copy()
        return canonical_predicate(exp.GTE(this=c, expression=e.args["low"].copy())) + \
            canonical_predicate(exp.LTE(this=c.copy(), expression=e.args["high"].copy()))
    if isinstance(e, exp.Not):
        inner = strip_parens(e.this)
        if isinstance(inner, exp.Not):
            return canonical_predicate(inner.this)
        if type(inner) in _NEGATE:
            neg = _NEGATE[type(inner)](this=inner.this.copy(), expression=inner.expression.copy())
            return canonical_predicate(neg)
        return [exp.Not(this=canonical_expr(inner))]
    if type(e) in _FLIP and is_constant(e.this) and not is_constant(e.expression):
        e = _FLIP[type(e)](this=e.expression.copy(), expression=e.this.copy())
    if isinstance(e, exp.Or):
        return [_canonical_or(e)]
    if isinstance(e, exp.In) and not e.args.get("query") and not e.args.get("unnest"):
        return [_make_in(canonical_expr(e.this, copy), [x.copy() if copy else x for x in e.expressions])]
    return [canonical_expr(e, copy)]


def _canonical_or(e: exp.Expression) -> exp.Expression:
    parts = []
    for d in disjuncts(e):
        cs = canonical_predicate(d)
        parts.append(cs[0] if len(cs) == 1 else exp.and_(*cs))
    # x = 1 OR x = 2 OR x IN (3)  ->  x IN (1, 2, 3)
    col_keys = set()
    values: list[exp.Expression] = []
    for p in parts:
        if isinstance(p, exp.EQ) and is_constant(p.expression):
            col_keys.add(p.this.sql(DIALECT))
            values.append(p.expression)
        elif isinstance(p, exp.In) and not p.args.get("query"):
            col_keys.add(p.this.sql(DIALECT))
            values.extend(p.expressions)
        else:
            col_keys.add(None)
    if len(col_keys) == 1 and None not in col_keys:
        return _make_in(parts[0].this.copy(), [v.copy() for v in values])
    return exp.or_(*parts) if len(parts) > 1 else parts[0]


def _make_in(col: exp.Expression, values: list[exp.Expression]) -> exp.Expression:
    uniq = {}
    # a literal's text from the generator itself: .sql() copies the node first, which
    # was most of the cost of an IN list of 100,000 values (the same text either way)
    text = DIALECT().generator().sql
    for v in values:
        uniq.setdefault(text(v) if type(v) is exp.Literal else v.sql(DIALECT), v)
    ordered = [uniq[k] for k in sorted(uniq)]
    if len(ordered) == 1 and all(is_constant(v) for v in ordered):
        return exp.EQ(this=col, expression=ordered[0])
    return exp.In(this=col, expressions=ordered)


def canonical_expr(e: exp.Expression, copy: bool = True) -> exp.Expression:
    """Canonical form of a value expression (parentheses dropped, then those precedence
    needs put back: rewriter.precedence). copy=False works on `e` itself (a disposable tree)."""
    if copy:
        e = e.copy()
    for node in list(e.walk()):
        if isinstance(node, exp.Paren) and node is not e:
            node.replace(node.this)
    # sqlglot prints operators as the tree nests them and adds no parentheses itself:
    # without these `(a - 1) * c` would print, run and key as `a - 1 * c`
    return parenthesize(strip_parens(e))


# ---------------------------------------------------------------- keys

def column_key(c: exp.Column) -> str:
    """Canonical name of a qualified column: its table part, then the column."""
    return ".".join(p.name for p in c.parts)


def key_of(e: exp.Expression, rep=None) -> str:
    """Canonical text of an expression. `rep` maps a column key to its equivalence-class
    representative (so equal columns give equal keys). Operands of commutative operators
    are sorted."""
    if isinstance(e, exp.Column):
        k = column_key(e)
        return rep.get(k, k) if rep else k
    if isinstance(e, exp.Paren):
        return key_of(e.this, rep)
    if isinstance(e, exp.Literal):
        return ("'" + e.this + "'") if e.is_string else e.this
    if isinstance(e, COMMUTATIVE):
        items = []
        _flatten(e, type(e), items)
        return f"{e.key}({','.join(sorted(key_of(x, rep) for x in items))})"
    if isinstance(e, exp.Identifier):
        return e.this.lower()
    if isinstance(e, exp.DataType):
        return e.sql(DIALECT).lower()
    if isinstance(e, exp.Anonymous):
        return f"{e.name.lower()}({','.join(key_of(x, rep) for x in e.expressions)})"
    parts = []
    for k, v in e.args.items():
        if v is None or v is False or (isinstance(v, list) and not v):
            continue
        if isinstance(v, list):
            parts.append(f"{k}=[{','.join(key_of(x, rep) if isinstance(x, exp.Expression) else str(x) for x in v)}]")
        elif isinstance(v, exp.Expression):
            parts.append(f"{k}={key_of(v, rep)}")
        else:
            parts.append(f"{k}={str(v).lower()}")
    return f"{e.key}({';'.join(parts)})"


def _flatten(e, cls, out):
    e = strip_parens(e)
    if type(e) is cls:
        _flatten(e.this, cls, out)
        _flatten(e.expression, cls, out)
    else:
        out.append(e)


def nondeterministic(e: exp.Expression) -> str | None:
    """Name of the first non-deterministic function in `e`, or None."""
    for node in e.walk():
        if isinstance(node, NONDETERMINISTIC_CLASSES):
            return node.sql(DIALECT)
        if isinstance(node, exp.Anonymous):
            if node.name.lower() in NONDETERMINISTIC_NAMES:
                return node.name.lower()
        elif isinstance(node, exp.Func) and node.key.lower() in NONDETERMINISTIC_NAMES:
            return node.key.lower()
    return None


_SAFE_NAME = re.compile(r"^[a-z_][a-z0-9_]*$")


def ident(name: str) -> exp.Identifier:
    """Identifier, quoted only when it has to be (keeps generated SQL readable)."""
    return exp.Identifier(this=name, quoted=not _SAFE_NAME.match(name) or name in _RESERVED)


def quote_unsafe(tree: exp.Expression) -> exp.Expression:
    """Quote identifiers that need it (qualify creates unquoted aliases, e.g. AS order)."""
    for node in tree.find_all(exp.Identifier):
        if not node.quoted and (not _SAFE_NAME.match(node.this) or node.this in _RESERVED):
            node.set("quoted", True)
    return tree


_RESERVED = frozenset({"select", "from", "where", "group", "order", "by", "limit", "having", "table",
                       "join", "on", "and", "or", "not", "as", "case", "when", "then", "else",
                       "end", "in", "is", "null", "true", "false", "year", "month", "day",
                       "date", "timestamp", "interval", "distinct", "all", "union", "left",
                       "right", "inner", "outer", "full", "cross", "with", "between", "like",
                       "cast", "user", "current_date", "current_timestamp", "to", "over", "group", "sum",
                       "count", "min", "max", "avg", "window", "partition", "rows", "range",
                       "values", "semi", "anti", "natural", "using", "except", "intersect",
                       "minus", "lateral", "any", "some", "exists", "primary", "key", "create",
                       "drop", "insert", "update", "delete", "into", "interval",
                       "both", "leading", "trailing", "collate", "escape", "filter", "qualify",
                       "unknown", "fetch", "offset", "only", "time", "zone", "at", "array",
                       "map", "struct", "references", "constraint", "check", "foreign",
                       "unique", "grant", "revoke", "authorization", "current_user",
                       "session_user", "current_time", "distribute", "sort", "cluster"})
