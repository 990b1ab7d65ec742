"""Window functions of the serving tier (pure): `f(...) OVER (PARTITION BY ... ORDER BY ...
[ROWS | RANGE frame])` in a SELECT's outputs, over its input rows or over its groups
(`rank() OVER (ORDER BY sum(x) DESC)`, `sum(sum(x)) OVER ()`), emitted with everything
Spark leaves implicit written out:
  - ORDER BY keys with Spark's NULL ordering (ASC NULLS FIRST, DESC NULLS LAST);
  - the frame of an aggregate: Spark's default is RANGE BETWEEN UNBOUNDED PRECEDING AND
    CURRENT ROW with an ORDER BY (peers included), the whole partition without one;
  - a double key (partition or order) as key + 0.0: Spark folds -0.0 into 0.0 in partition
    keys (NormalizeFloatingNumbers) and compares -0.0 equal to 0.0 when it orders;
  - Spark's result types: row_number, rank, dense_rank, ntile -> int; percent_rank,
    cume_dist -> double; lag / lead -> their input's; count -> bigint; sum of integers ->
    bigint, of decimal(p,s) -> decimal(p+10,s); avg of integers and doubles -> double (a
    sum of doubles over a count), of decimal(p,s) -> decimal(p+4,s+4), computed as Spark's
    Average computes it, a window's as an aggregate's (proxy/serving/averages.py);
    a sum that overflows Spark's type raises, and Spark answers.
Refused (NotServable, Spark answers): a window outside the SELECT's outputs or inside an
aggregate or another window, named windows, DISTINCT inside a window, IGNORE / RESPECT
NULLS, a frame on a ranking or offset function (Spark rejects most), a frame whose start
is after its end, RANGE offsets other than over one integral ORDER BY key, functions not
listed (first_value, nth_value, ...), lag / lead offsets other than a positive int literal
and defaults of another type than the input's (Spark casts them).
"""
from __future__ import annotations

from sqlglot import exp

from proxy.serving.averages import decimal_average
from proxy.serving.sqltypes import DEC, INT_MAX, NotServable, duck_type
from rewriter.sparktypes import INTEGRAL

ALLOWED = ("in a SELECT's outputs, over its rows or its groups: row_number, rank, "
           "dense_rank, percent_rank, cume_dist, ntile(n), lag / lead (offset: a positive int "
           "literal; default: of the input's type), sum, count, min, max, avg over Spark's "
           "default frames or ROWS / RANGE frames (RANGE offsets over one integral ORDER BY "
           "key); Spark's NULL ordering and result types")
RANKING = {exp.RowNumber: ("ROW_NUMBER", "int"), exp.Rank: ("RANK", "int"),
           exp.DenseRank: ("DENSE_RANK", "int"), exp.PercentRank: ("PERCENT_RANK", "double"),
           exp.CumeDist: ("CUME_DIST", "double")}
AGGREGATES = (exp.Sum, exp.Count, exp.Min, exp.Max, exp.Avg)
_UNBOUNDED = 10**20          # a position past any offset


def window(tr, e: exp.Window, scope) -> tuple[str, str]:
    """`tr`: the Expressions translator reading this SELECT; -> (DuckDB SQL, Spark type)."""
    _placed_in_outputs(e)
    if e.args.get("alias") or not isinstance(e.this, exp.Func):
        raise NotServable("a named window")
    f = e.this
    if f.find(exp.Window) is not None:
        raise NotServable("a window inside a window function")
    parts = [f"PARTITION BY {', '.join(_key(tr, p, scope) for p in e.args['partition_by'])}"] \
        if e.args.get("partition_by") else []
    order = e.args.get("order")
    orders = list(order.expressions) if order is not None else []
    if orders:
        parts.append("ORDER BY " + ", ".join(_ordered(tr, o, scope) for o in orders))
    spec = e.args.get("spec")
    if isinstance(f, AGGREGATES):
        parts.append(_frame(tr, spec, orders, scope))
        return _aggregate(tr, f, " ".join(parts), scope)
    if spec is not None:
        raise NotServable(f"a frame on {f.key.lower()}() (Spark rejects most)")
    if not orders:
        raise NotServable(f"{f.key.lower()}() without ORDER BY (Spark rejects it)")
    over = " ".join(parts)
    if type(f) in RANKING:
        name, typ = RANKING[type(f)]
        if f.args.get("expressions") or f.args.get("this"):
            raise NotServable(f"{name.lower()}() with arguments")
        return f"CAST({name}() OVER ({over}) AS {duck_type(typ)})", typ
    if isinstance(f, exp.Ntile):
        n = _positive_int(f.this, "ntile's bucket count")
        return f"CAST(NTILE({n}) OVER ({over}) AS INTEGER)", "int"
    if isinstance(f, (exp.Lag, exp.Lead)):
        return _offset(tr, f, over, scope)
    raise NotServable(f"window function {f.key.lower()}")


def _placed_in_outputs(e: exp.Window) -> None:
    """Spark evaluates a window in a SELECT's outputs; elsewhere it rejects it or the
    translation is not proven."""
    node = e
    while node.parent is not None and not isinstance(node.parent, exp.Select):
        if isinstance(node.parent, (exp.AggFunc, exp.Window)):
            raise NotServable("a window inside an aggregate or a window")
        node = node.parent
    if not (isinstance(node.parent, exp.Select) and node.arg_key == "expressions"):
        raise NotServable("a window function outside the SELECT list")


# DuckDB rejects a volatile PARTITION BY / ORDER BY key, and a key computed with a check
# that raises (error(): a division, a named zone's local time) is one
_VOLATILE = ("error(", "spark_tz_")


def _key(tr, e: exp.Expression, scope) -> str:
    sql, t = tr.expr(e, scope)
    if any(v in sql for v in _VOLATILE):
        raise NotServable("a window key computed with a check that raises (a division, a "
                          "named zone's local time): the local engine rejects it")
    return f"({sql} + 0.0)" if t == "double" else sql


def _ordered(tr, o: exp.Ordered, scope) -> str:
    if not isinstance(o, exp.Ordered):
        o = exp.Ordered(this=o)
    desc = bool(o.args.get("desc"))
    nulls_first = o.args.get("nulls_first")
    if nulls_first is None:
        nulls_first = not desc                  # Spark: NULLs are the smallest value
    return (f"{_key(tr, o.this, scope)} {'DESC' if desc else 'ASC'} "
            f"NULLS {'FIRST' if nulls_first else 'LAST'}")


def _positive_int(e, what: str) -> int:
    if not (isinstance(e, exp.Literal) and not e.is_string and e.this.isdigit()
            and 0 < int(e.this) <= INT_MAX):
        raise NotServable(f"{what} other than a positive int literal")
    return int(e.this)


def _frame(tr, spec: exp.WindowSpec | None, orders, scope) -> str:
    """The frame of an aggregate, written out (Spark's default when there is none)."""
    if spec is None:
        return ("RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW" if orders
                else "ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING")
    kind = (spec.args.get("kind") or "").upper()
    if kind not in ("ROWS", "RANGE") or spec.args.get("exclude"):
        raise NotServable(f"a window frame {spec.sql('spark')}")
    start = _bound(spec.args.get("start"), spec.args.get("start_side"))
    end = _bound(spec.args.get("end") or "CURRENT ROW", spec.args.get("end_side"))
    if start[0] == _UNBOUNDED or end[0] == -_UNBOUNDED or start[0] > end[0]:
        raise NotServable("a window frame whose start is after its end (Spark rejects it)")
    if kind == "RANGE" and any(abs(p) not in (0, _UNBOUNDED) for p, _ in (start, end)):
        if len(orders) != 1 or tr.expr(orders[0].this, scope)[1] not in INTEGRAL:
            raise NotServable("a RANGE frame with offsets other than over one integral "
                              "ORDER BY key")
    return f"{kind} BETWEEN {start[1]} AND {end[1]}"


def _bound(value, side) -> tuple[int, str]:
    """(position relative to the current row, SQL) of a frame bound."""
    side = (side or "").upper()
    if isinstance(value, str) and value.upper() == "CURRENT ROW":
        return 0, "CURRENT ROW"
    if isinstance(value, str) and value.upper() == "UNBOUNDED":
        if side not in ("PRECEDING", "FOLLOWING"):
            raise NotServable("a window frame bound UNBOUNDED without a side")
        return (-_UNBOUNDED if side == "PRECEDING" else _UNBOUNDED), f"UNBOUNDED {side}"
    if side not in ("PRECEDING", "FOLLOWING") or not (
            isinstance(value, exp.Literal) and not value.is_string and value.this.isdigit()
            and int(value.this) <= INT_MAX):
        raise NotServable("a window frame bound other than UNBOUNDED, CURRENT ROW or an "
                          "int literal")
    n = int(value.this)
    return (-n if side == "PRECEDING" else n), f"{n} {side}"


def _aggregate(tr, f: exp.AggFunc, over: str, scope) -> tuple[str, str]:
    if f.args.get("distinct") or isinstance(f.this, exp.Distinct):
        raise NotServable("DISTINCT in a window aggregate (Spark rejects it)")
    if f.args.get("expressions"):
        raise NotServable(f"{f.key.lower()} with more than one argument over a window")
    if isinstance(f, exp.Count) and (f.this is None or isinstance(f.this, exp.Star)):
        return f"COUNT(*) OVER ({over})", "bigint"
    sql, t = tr.expr(f.this, scope)
    if isinstance(f, exp.Count):
        return f"COUNT({sql}) OVER ({over})", "bigint"
    if isinstance(f, (exp.Min, exp.Max)):
        return f"{f.key.upper()}({sql}) OVER ({over})", t
    d = DEC.match(t)
    if not (t in INTEGRAL or t == "double" or d):
        raise NotServable(f"{f.key.lower()} of {t} over a window")
    if isinstance(f, exp.Sum):
        if t == "double":
            return f"SUM({sql}) OVER ({over})", "double"
        rt = "bigint" if d is None else f"decimal({min(38, int(d[1]) + 10)},{d[2]})"
        # DuckDB sums wider: the cast fails exactly where Spark's sum overflows its type
        return f"CAST(SUM({sql}) OVER ({over}) AS {duck_type(rt)})", rt
    count = f"COUNT({sql}) OVER ({over})"
    if d is None:        # Spark: the sum of the values as doubles over the count
        return (f"(CASE WHEN {count} = 0 THEN CAST(NULL AS DOUBLE) ELSE "
                f"SUM(CAST({sql} AS DOUBLE)) OVER ({over}) / {count} END)"), "double"
    # Spark's Average over a window is its Average: the same division as the aggregate's
    return decimal_average(f"SUM({sql}) OVER ({over})", count, int(d[1]), int(d[2]))


def _offset(tr, f: exp.Lag | exp.Lead, over: str, scope) -> tuple[str, str]:
    sql, t = tr.expr(f.this, scope)
    offset = 1 if f.args.get("offset") is None else _positive_int(
        f.args["offset"], f"{f.key.lower()}'s offset")
    args = [sql, str(offset)]
    default = f.args.get("default")
    if default is not None and not isinstance(default, exp.Null):
        d_sql, dt = tr.expr(default, scope)
        if dt != t:
            raise NotServable(f"{f.key.lower()} with a default of type {dt} for a {t} "
                              "(Spark casts it)")
        args.append(d_sql)
    return f"{f.key.upper()}({', '.join(args)}) OVER ({over})", t
