"""Rule: aggregates that BI tools spell differently from the stored ones, derived exactly.

Tableau counts records as SUM(1), Metabase and dbt count and sum "where" as
SUM(CASE WHEN p THEN 1 ELSE 0 END) / count_if(p) / SUM(CASE WHEN p THEN m ELSE 0 END),
Looker's filtered measures are COUNT(CASE WHEN p THEN 1 ELSE NULL END), hand-written
dashboards use agg(x) FILTER (WHERE p) (rewritten to agg(CASE WHEN p THEN x END) by
derive_filtered in rules/rollup_aggregate.py, which then calls derive_equal). None of them
names a stored aggregate, but each is a merge of per-datamap-row partials:

A datamap row stands for one or more base rows that share every grouping value. When the
conditions of a CASE (IF, count_if, FILTER) read grouping values only, all base rows of
one datamap row take the same branch, so
    agg(CASE WHEN p THEN a ELSE b END) = merge over datamap rows of
                                         CASE WHEN p' THEN partial(a) ELSE partial(b) END
where partial(v) is agg(v) over that datamap row's base rows (rows = its stored count(*)):
    v                         sum          count                  min / max
    NULL                      NULL         0                      NULL
    numeric literal k         k * rows     rows                   k
    grouping expression g     g * rows     g IS NULL ? 0 : rows   g
    stored measure m          sum_m        count_m                min_m / max_m
    CAST(m AS wider exact t)  sum_m        count_m                CAST(min_m AS t)
merged with SUM (sum, count) or MIN / MAX; avg = merged sum / merged count, typed as
Spark's avg. One condition on a measure is exact too: `m IS [NOT] NULL` splits a datamap
row into count_m rows where m is set and rows - count_m where it is not, which is all
SUM(CASE WHEN m IS NOT NULL THEN 1 ELSE 0 END) (count(m) spelled out) needs.
Empty inputs keep Spark's answers: a merged SUM over no datamap rows is NULL (sum), a
count is COALESCEd to 0 in a global aggregate, and a partial is NULL exactly when every
base value behind it is NULL. A datamap without grouping columns is refused: it keeps
one row (count 0) even over no input, where SUM(1) must be NULL.
Refused with a reason: a condition on a non-grouping column, g * rows for a floating g
(repeated addition of a double is not a multiplication), a sum of a value cast to
double or float (a double sum rounds as it goes, in an order Spark does not fix),
DISTINCT inside FILTER.
Grouping expressions are derived through ctx.derive (derive_expression, set by match.py):
this module imports no rule above it.
"""
from __future__ import annotations

from sqlglot import exp

from rewriter import sparktypes
from rewriter.normalize import ident, key_of
from rewriter.precedence import parenthesize
from rewriter.rules.arith import average
from rewriter.rules.refusals import NeedsReaggregation, NoDerive

_INTEGRAL = ["tinyint", "smallint", "int", "bigint"]


def derive_equal(node: exp.Expression, ctx) -> exp.Expression | None:
    """The aggregate merged from per-datamap-row partials, or None when the node is not one
    of the equal forms (the caller's reason then stands). Raises NoDerive with the cause
    when it is one but cannot be derived exactly."""
    shape = _shape(node)
    if shape is None:
        return None
    kind, value = shape
    branches = _branches(value)
    if len(branches) == 1 and not _worth_it(value, ctx):
        return None
    name = node.sql("spark")
    if not ctx.view_map:
        raise NoDerive(f"{name}: datamap {ctx.name} has no grouping columns (its one row "
                       "exists even over no input)")
    if not ctx.reagg:
        raise NeedsReaggregation()
    vtype = _value_type([v for _, v in branches], ctx)
    if vtype is None:
        raise NoDerive(f"{name}: cannot determine the type of its argument")
    p = _Partials(kind if kind != "avg" else "sum", ctx, name)
    if kind == "avg":
        num = exp.Sum(this=p.case(branches))
        den = exp.Sum(this=_Partials("count", ctx, name).case(branches))
        if sparktypes.avg_type(vtype) is None:
            raise NoDerive(f"{name}: cannot average a {vtype} value")
        return average(num, den, vtype, reagg=True)
    merged = p.case(branches)
    if kind == "count":
        total = exp.Sum(this=merged)
        return exp.Coalesce(this=total, expressions=[exp.Literal.number(0)]) if ctx.global_agg else total
    if kind == "sum":
        st = sparktypes.sum_type(vtype)
        if st is None or vtype == "string":
            raise NoDerive(f"{name}: cannot sum a {vtype} value exactly")
        total = exp.Sum(this=merged)
        return total if st == "bigint" else _cast(total, st)
    agg = exp.Min if kind == "min" else exp.Max
    if isinstance(merged, exp.Cast) and sparktypes.norm(merged.to.sql("spark")) == vtype:
        return agg(this=merged)
    return _cast(agg(this=merged), vtype)


def _shape(node: exp.Expression):
    if isinstance(node, exp.CountIf):
        return "count", exp.Case(ifs=[exp.If(this=node.this, true=exp.Literal.number(1))])
    kinds = {exp.Sum: "sum", exp.Count: "count", exp.Min: "min", exp.Max: "max", exp.Avg: "avg"}
    kind = kinds.get(type(node))
    arg = node.this
    if kind is None or arg is None or isinstance(arg, (exp.Distinct, exp.Star)) \
            or node.args.get("ignore_nulls") is not None:
        return None
    return kind, arg


def _branches(value: exp.Expression) -> list[tuple[exp.Expression | None, exp.Expression]]:
    """(condition, value) pairs in order; the last has no condition (ELSE, NULL if absent)."""
    if isinstance(value, exp.Case) and value.this is None:
        out = [(w.this, w.args["true"]) for w in value.args.get("ifs") or []]
        return out + [(None, value.args.get("default") or exp.Null())]
    if isinstance(value, exp.If):
        return [(value.this, value.args["true"]), (None, value.args.get("false") or exp.Null())]
    return [(None, value)]


def _worth_it(value: exp.Expression, ctx) -> bool:
    """A lone value this rule handles that the stored-aggregate lookup does not: a literal,
    a lossless cast of a measure, or a grouping expression."""
    if _literal(value) is not None or isinstance(value, exp.Cast):
        return True
    try:
        ctx.derive(value, ctx, groups_only=True)
        return True
    except NoDerive:
        return False


def _literal(v: exp.Expression) -> exp.Expression | None:
    inner = v.this if isinstance(v, exp.Neg) else v
    if isinstance(inner, exp.Literal) and not inner.is_string:
        return v
    return None


def _check_product(t: str | None, name: str) -> None:
    """v * count is exact when Spark keeps v's scale: decimal(p,s) * bigint is
    decimal(p+21, s), and past 38 digits Spark cuts the scale down to 6."""
    d = sparktypes.decimal_of(t)
    if d is not None and t not in _INTEGRAL and d[0] + 21 > 38 and d[1] > 6:
        raise NoDerive(f"{name}: a {t} value times a count loses scale in Spark's decimal "
                       "arithmetic")


def _is_zero(e) -> bool:
    return isinstance(e, exp.Literal) and e.this in ("0", "0.0")


def _cast(e: exp.Expression, t: str) -> exp.Expression:
    return exp.Cast(this=e, to=exp.DataType.build(t, dialect="spark"))


def _value_type(values, ctx) -> str | None:
    """Spark's common type of CASE branches (findWiderTypeForTwo: integrals widen, a
    floating branch makes double, decimals keep the widest integer part and scale)."""
    types = []
    for v in values:
        if isinstance(v, exp.Null):
            continue
        lit = _literal(v)
        t = sparktypes.literal_type(lit.this if isinstance(lit, exp.Neg) else lit) if lit is not None \
            else sparktypes.infer(v, ctx.column_type)
        t = sparktypes.norm(t)
        if t is None:
            return None
        types.append(t)
    if not types:
        return None
    if len(set(types)) == 1:
        return types[0]
    if any(not sparktypes.is_numeric(t) for t in types):
        return None
    if any(t in sparktypes.FRACTIONAL for t in types):
        return "double"
    if all(t in _INTEGRAL for t in types):
        return max(types, key=_INTEGRAL.index)
    decs = [sparktypes.decimal_of(t) for t in types]
    scale = max(s for _, s in decs)
    whole = max(p - s for p, s in decs)
    return sparktypes.dec(whole + scale, scale)


def _lossless(src: str | None, dst: str | None, for_sum: bool) -> bool:
    """CAST from src to dst keeps every value and the order (so min/max/count commute with
    it); for a sum the target must also add exactly (no double or float)."""
    src, dst = sparktypes.norm(src), sparktypes.norm(dst)
    if src is None or dst is None:
        return False
    if dst in sparktypes.FRACTIONAL:
        return not for_sum and src in _INTEGRAL
    a, b = sparktypes.decimal_of(src), sparktypes.decimal_of(dst)
    if a is None or b is None or src in sparktypes.FRACTIONAL:
        return False
    if dst in _INTEGRAL and src not in _INTEGRAL:
        return False
    return b[1] >= a[1] and b[0] - b[1] >= a[0] - a[1]


class _Partials:
    """Per-datamap-row partial aggregates of one kind (sum | count | min | max)."""

    def __init__(self, kind: str, ctx, name: str):
        self.kind, self.ctx, self.name = kind, ctx, name

    def col(self, name: str) -> exp.Column:
        return exp.Column(this=ident(name), table=ident(self.ctx.view_alias))

    def stored(self, kind: str, e: exp.Expression) -> exp.Column | None:
        c = self.ctx.agg_map.get((kind, "" if e is None else key_of(e, self.ctx.rep)))
        return None if c is None else self.col(c)

    def rows(self) -> exp.Expression:
        c = self.stored("count_star", None)
        if c is None:
            raise NoDerive(f"{self.name} needs count(*) stored in datamap {self.ctx.name}")
        return c

    def case(self, branches) -> exp.Expression:
        """The partial of the CASE, with the parentheses the operators built here need
        (g * rows of a grouping expression g = `a - 1`)."""
        return parenthesize(self._case(branches))

    def _case(self, branches) -> exp.Expression:
        split = self._null_test(branches)
        if split is not None:
            return split
        if len(branches) == 1:
            return self.partial(branches[0][1])
        ifs = []
        for cond, v in branches[:-1]:
            try:
                c = self.ctx.derive(cond, self.ctx, groups_only=True)
            except NoDerive as e:
                raise NoDerive(f"{self.name}: its condition {cond.sql('spark')} reads a column that "
                               f"is not a grouping column of datamap {self.ctx.name} ({e})")
            ifs.append(exp.If(this=c, true=self.partial(v)))
        return exp.Case(ifs=ifs, default=self.partial(branches[-1][1]))

    def _null_test(self, branches):
        """CASE WHEN m IS [NOT] NULL THEN a ELSE b END over a measure m: the branches take
        count_m rows (m set) and rows - count_m rows (m NULL) of each datamap row."""
        if len(branches) != 2:
            return None
        cond = branches[0][0]
        negated = isinstance(cond, exp.Not)
        test = cond.this if negated else cond
        if not (isinstance(test, exp.Is) and isinstance(test.expression, exp.Null)):
            return None
        m = test.this
        try:
            self.ctx.derive(m, self.ctx, groups_only=True)
            return None                   # a grouping value: the general CASE handles it
        except NoDerive:
            pass
        if self.kind not in ("sum", "count"):
            raise NoDerive(f"{self.name}: min/max under {cond.sql('spark')} is not derived")
        set_rows = self.stored("count", m)
        if set_rows is None:
            raise NoDerive(f"{self.name}: its condition {cond.sql('spark')} needs count of "
                           f"{m.sql('spark')} stored in datamap {self.ctx.name}")
        unset_rows = exp.Sub(this=self.rows(), expression=set_rows.copy())
        (_, a), (_, b) = branches
        if not negated:
            a, b = b, a                   # a: the value where m is set, b: where m is NULL
        mk = key_of(m, self.ctx.rep)
        if isinstance(b, exp.Column) and key_of(b, self.ctx.rep) == mk:
            b = exp.Null()                # m where m is NULL
        A = self._half(a, set_rows, mk)
        B = self._half(b, unset_rows, mk)
        if self.kind == "count":
            if A is None or B is None:
                return A or B or exp.Literal.number(0)
            return exp.Add(this=A, expression=B)
        # A half with no rows adds nothing; the sum is NULL only when no half has a value.
        if A is None and B is None:
            return exp.Null()
        if B is None or A is None:
            v, rows = (a, set_rows) if B is None else (b, unset_rows)
            if isinstance(v, exp.Column):
                return A                  # sum_m: NULL exactly when no row has m
            return self._mul(_literal(v), exp.Nullif(this=rows.copy(), expression=exp.Literal.number(0)))
        if isinstance(a, exp.Column):
            A = exp.Coalesce(this=A, expressions=[exp.Literal.number(0)])   # count_m = 0
        if _is_zero(B):
            return A
        if _is_zero(A):
            return B
        return exp.Add(this=A, expression=B)

    def _half(self, v, rows, mk):
        """sum/count of v over `rows` base rows of one datamap row (None: no value)."""
        if isinstance(v, exp.Null):
            return None
        if isinstance(v, exp.Column) and key_of(v, self.ctx.rep) == mk:
            return self._measure(v)       # m's own aggregates already skip its NULLs
        lit = _literal(v)
        if lit is None:
            raise NoDerive(f"{self.name}: {v.sql('spark')} under a NULL test of another "
                           "column is not derived")
        if self.kind == "count":
            return rows
        self._check_literal(lit)
        if _is_zero(lit):
            return lit.copy()             # k * rows with k = 0 (the other half has the rows)
        return self._mul(lit, rows)

    def _check_literal(self, lit):
        t = sparktypes.norm(sparktypes.literal_type(lit.this if isinstance(lit, exp.Neg) else lit))
        if t in sparktypes.FRACTIONAL:
            raise NoDerive(f"{self.name}: a sum of the double literal {lit.sql('spark')} "
                           "rounds as it adds")
        _check_product(t, self.name)

    @staticmethod
    def _mul(lit, rows):
        if isinstance(lit, exp.Literal) and lit.this == "1":
            return rows
        return exp.Mul(this=lit.copy(), expression=rows)     # parenthesised by case()

    def partial(self, v: exp.Expression) -> exp.Expression:
        """agg(v) over one datamap row's base rows."""
        kind = self.kind
        if isinstance(v, exp.Null):
            return exp.Literal.number(0) if kind == "count" else exp.Null()
        lit = _literal(v)
        if lit is not None:
            if kind == "count":
                return self.rows()
            if kind in ("min", "max"):
                return lit.copy()
            self._check_literal(lit)
            if isinstance(lit, exp.Literal) and lit.this in ("0", "0.0"):
                return lit.copy()
            return self._mul(lit, self.rows())
        try:
            g = self.ctx.derive(v, self.ctx, groups_only=True)
        except NoDerive:
            return self._measure(v)
        return self._grouping(v, g)

    def _grouping(self, v, g) -> exp.Expression:
        kind = self.kind
        if kind in ("min", "max"):
            return g
        if kind == "count":
            return exp.Case(ifs=[exp.If(this=exp.Is(this=g, expression=exp.Null()),
                                        true=exp.Literal.number(0))], default=self.rows())
        t = sparktypes.norm(sparktypes.infer(v, self.ctx.column_type))
        if t is None or not sparktypes.is_numeric(t) or t in sparktypes.FRACTIONAL:
            raise NoDerive(f"{self.name}: sum of the {t or 'untyped'} grouping value "
                           f"{v.sql('spark')} is not derived (g * count is exact for integers "
                           "and decimals only)")
        _check_product(t, self.name)
        return exp.Mul(this=g, expression=self.rows())

    def _measure(self, v) -> exp.Expression:
        kind = self.kind
        inner, target = v, None
        if isinstance(v, exp.Cast):
            inner, target = v.this, sparktypes.norm(v.to.sql("spark"))
            src = sparktypes.infer(inner, self.ctx.column_type)
            if not _lossless(src, target, for_sum=kind == "sum"):
                raise NoDerive(f"{self.name}: {v.sql('spark')} is not provably equal to an "
                               f"aggregate of {inner.sql('spark')} (a cast from {src} to "
                               f"{target} {'adds in double' if target in sparktypes.FRACTIONAL else 'loses values'})")
        col = self.stored(kind, inner)
        if col is None:
            raise NoDerive(f"{self.name}: {kind}({inner.sql('spark')}) is not stored in datamap "
                           f"{self.ctx.name}")
        if target is not None and kind in ("min", "max"):
            return _cast(col, target)
        return col

