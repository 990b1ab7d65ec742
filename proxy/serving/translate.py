"""A rewritten query (Spark AST over datamap tables) -> DuckDB SQL with Spark's result
types, or NotServable naming the first thing outside the allow-list. Pure: no I/O.

The allow-list (ALLOWED below, and docs/serving.md) is deliberately small: every node is
emitted by hand, with the Spark type it has, and DuckDB is only asked what it computes
exactly as Spark does. Where the two engines differ on a value (decimal division, division
by zero, integer overflow, NULL ordering) the emitted SQL either reproduces Spark's value
or raises an error, and an error sends the query to Spark, which then answers (or fails)
as it always did. Nothing outside the list is guessed: a function, type or shape not in it
makes the whole query NotServable, and Spark runs it.

Reads: every datamap read of the rewriter, `(SELECT c1, c2 FROM db.t WHERE dm_segment_id
IN ('0', '3')) AS m`, becomes `(SELECT c1, c2 FROM read_parquet([...])) AS m` over the
files of exactly those segments.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Callable, Mapping, Sequence

from sqlglot import exp

from proxy.serving.timestamps import TRUNC_UNITS, fixed_offset, timestamp_literal
from rewriter.api import SEGMENT_COLUMN
from rewriter.sparktypes import INTEGRAL, decimal_of, norm

# Column and result types the tier reads and returns. Everything else -> Spark.
TYPES = ("boolean", "tinyint", "smallint", "int", "bigint", "double", "decimal", "string",
         "date", "timestamp (in a fixed-offset session time zone)")
_DUCK = {"boolean": "BOOLEAN", "tinyint": "TINYINT", "smallint": "SMALLINT", "int": "INTEGER",
         "bigint": "BIGINT", "double": "DOUBLE", "string": "VARCHAR", "date": "DATE",
         "timestamp": "TIMESTAMP"}
# A stored column outside TYPES is left out of the read; its type is this prefix and the
# reason, and the query is NotServable only if it uses the column.
_UNSERVED = "!"
_DEC = re.compile(r"^decimal\((\d+),(\d+)\)$")
_DATE_LITERAL = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_INT_MAX = 2**31 - 1
_BIGINT_MAX = 2**63 - 1

# What the tier evaluates; docs/serving.md lists it for users. Keep the two in step.
ALLOWED = {
    "shapes": "one SELECT (DISTINCT) over one datamap read or a derived table of one; "
              "WHERE, GROUP BY (keys other than doubles; DISTINCT likewise), HAVING, ORDER BY (Spark's NULL ordering), LIMIT (int range)",
    "types": ", ".join(TYPES),
    "aggregates": "sum, count, count(*), min, max",
    "operators": "+ - * (integral, decimal without precision loss), / (double; exact "
                 "decimal division by Spark's rules), unary - (decimals of up to 34 digits), "
                 "= <> < <= > >=, IN (literals), BETWEEN (of decimals: when their common "
                 "type fits 38 digits), AND OR NOT, IS [NOT] NULL",
    "functions": "CAST (integral/decimal widening and narrowing, decimal to integral "
                 "truncating, to string from "
                 "integral/decimal/date/string; a date to a timestamp, a timestamp to a "
                 "date, a date or timestamp literal string to its type), CASE WHEN, "
                 "COALESCE, year, quarter, month, day/dayofmonth over dates and timestamps, "
                 "hour/minute/second and date_trunc(year|quarter|month|week|day|hour|minute|"
                 "second) over timestamps",
    "literals": "integers, decimals, strings, booleans, 'YYYY-MM-DD' against a date, "
                "'YYYY-MM-DD[ HH:MM:SS[.ffffff]]' against a timestamp",
}


class NotServable(Exception):
    """The query is outside the allow-list; the message says what (EXPLAIN shows it)."""


@dataclass(frozen=True)
class Plan:
    sql: str                                   # DuckDB SQL
    columns: tuple[tuple[str, str], ...]       # (Spark output name, Spark type)
    reads: tuple[tuple[str, tuple[str, ...]], ...]   # (datamap table, segment ids read)


# table "db.t" -> its stored columns {name: Spark type}, in order
TableColumns = Mapping[str, Mapping[str, str]]
# (table, segment ids) -> local file paths of those segments (raises NotServable)
FilesOf = Callable[[str, Sequence[str]], Sequence[str]]


def translate(tree: exp.Expression, tables: TableColumns, files_of: FilesOf,
              zone: str | None = None) -> Plan:
    """`zone`: the session time zone the datamaps were computed in and queries run in;
    timestamps are served only when it is a fixed UTC offset (proxy/serving/timestamps.py)."""
    if not isinstance(tree, exp.Select):
        raise NotServable("not a single SELECT")
    t = _Translator(tables, files_of, zone)
    sql, cols = t.select(tree, top=True)
    return Plan(sql, tuple(cols), tuple(t.reads))


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def duck_type(spark_type: str) -> str:
    m = _DEC.match(spark_type)
    if m:
        return f"DECIMAL({m.group(1)},{m.group(2)})"
    return _DUCK[spark_type]


def _spark_type(t: str | None) -> str:
    t = norm(t)
    if not t:
        raise NotServable("a column of unknown type")
    if _DEC.match(t):
        p, s = map(int, _DEC.match(t).groups())
        if p > 38:
            raise NotServable(f"type {t}")
        return t
    if t not in _DUCK:
        raise NotServable(f"type {t} is not served locally")
    return t


def _dec(t: str) -> tuple[int, int] | None:
    """decimal(p,s) of a decimal or integral type (Spark's widening of integers)."""
    if t in INTEGRAL or _DEC.match(t):
        return decimal_of(t)
    return None


def _is_num(t: str) -> bool:
    return t in INTEGRAL or t == "double" or bool(_DEC.match(t))


_INT_ORDER = ("tinyint", "smallint", "int", "bigint")
# Spark normalises grouping keys (NormalizeFloatingNumbers): -0.0 and 0.0 are one group
# whose key reads 0.0; DuckDB groups them too but returns the first value it met (-0.0)
_DOUBLE_KEY = "GROUP BY or DISTINCT over a double (Spark returns a -0.0 key as 0.0)"


class _Scope:
    def __init__(self):
        self.aliases: dict[str, dict[str, str]] = {}   # alias -> column -> type

    def column(self, col: exp.Column) -> tuple[str, str]:
        name = col.name.lower()
        alias = col.table.lower() if col.table else None
        if alias is None:
            hits = [a for a, cols in self.aliases.items() if name in cols]
            if len(hits) != 1:
                raise NotServable(f"column {name} does not resolve to one relation")
            alias = hits[0]
        cols = self.aliases.get(alias)
        if cols is None or name not in cols:
            raise NotServable(f"column {alias}.{name} is not in the datamap read")
        if cols[name].startswith(_UNSERVED):
            raise NotServable(cols[name][len(_UNSERVED):])
        return f"{_q(alias)}.{_q(name)}", cols[name]


class _Translator:
    def __init__(self, tables: TableColumns, files_of: FilesOf, zone: str | None = None):
        self.tables = {k.lower(): v for k, v in tables.items()}
        self.files_of = files_of
        self.reads: list[tuple[str, tuple[str, ...]]] = []
        self.offset, self.zone_problem = fixed_offset(zone)

    # ---------------------------------------------------------------- relations
    def select(self, sel: exp.Select, top: bool = False):
        for key, value in sel.args.items():
            if value in (None, [], False):
                continue
            if key not in ("expressions", "from_", "where", "group", "having", "order",
                           "limit", "distinct"):
                raise NotServable(f"{key.rstrip('_').upper()} clause")
        if sel.args.get("distinct") is not None and sel.args["distinct"].args.get("on"):
            raise NotServable("DISTINCT ON")
        from_ = sel.args.get("from_")
        if from_ is None:
            raise NotServable("no FROM")
        scope = _Scope()
        rel_sql = self.relation(from_.this, scope)
        outputs, out_cols, aggregate = [], [], False
        inner_of: dict[str, exp.Expression] = {}      # output name -> its expression
        for e in sel.expressions:
            if isinstance(e, exp.Alias):
                name, inner = e.alias, e.this
            elif isinstance(e, exp.Column) and not isinstance(e.this, exp.Star):
                name, inner = e.name, e
            else:
                raise NotServable("an output without a name (or *)")
            sql, typ = self.expr(inner, scope)
            aggregate = aggregate or bool(inner.find(exp.AggFunc))
            # every output is cast to its Spark type: DuckDB's own may be wider
            outputs.append(f"CAST({sql} AS {duck_type(typ)}) AS {_q(name)}")
            out_cols.append((name, typ))
            inner_of.setdefault(name.lower(), inner)
        if sel.args.get("distinct") and any(t == "double" for _, t in out_cols):
            raise NotServable(_DOUBLE_KEY)
        parts = ["SELECT " + ("DISTINCT " if sel.args.get("distinct") else "")
                 + ", ".join(outputs), "FROM " + rel_sql]
        if sel.args.get("where"):
            parts.append("WHERE " + self.condition(sel.args["where"].this, scope))
        group = sel.args.get("group")
        if group:
            if any(group.args.get(k) for k in ("grouping_sets", "cube", "rollup", "totals")):
                raise NotServable("GROUPING SETS / CUBE / ROLLUP")
            keys = []
            for g in group.expressions:
                if isinstance(g, exp.Literal) and not g.is_string:
                    if not (g.this.isdigit() and 1 <= int(g.this) <= len(out_cols)):
                        raise NotServable(f"GROUP BY {g.this}")
                    keys.append(g.this)       # ordinal
                    typ = out_cols[int(g.this) - 1][1]
                else:
                    sql, typ = self.expr(g, scope)
                    keys.append(sql)
                if typ == "double":
                    raise NotServable(_DOUBLE_KEY)
            parts.append("GROUP BY " + ", ".join(keys))
        if sel.args.get("having"):
            parts.append("HAVING " + self.condition(sel.args["having"].this, scope))
        order = sel.args.get("order")
        if order:
            parts.append("ORDER BY " + ", ".join(self.ordered(o, scope, out_cols, inner_of)
                                                 for o in order.expressions))
        limit = sel.args.get("limit")
        if limit is not None:
            n = limit.expression
            if not (isinstance(n, exp.Literal) and not n.is_string and n.this.isdigit()) \
                    or limit.args.get("offset"):
                raise NotServable("LIMIT other than a whole number")
            if int(n.this) > _INT_MAX:
                raise NotServable("LIMIT over the int range (Spark raises)")
            parts.append(f"LIMIT {int(n.this)}")
        return " ".join(parts), out_cols

    def ordered(self, o: exp.Ordered, scope: _Scope, out_cols,
                inner_of: Mapping[str, exp.Expression]) -> str:
        key = o.this
        names = {n.lower(): n for n, _ in out_cols}
        if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
            sql = key.this
        elif isinstance(key, exp.Column) and not key.table and key.name.lower() in names:
            sql = _q(names[key.name.lower()])       # an output's name
        else:
            # Spark resolves a bare name inside an ORDER BY expression to the output of
            # that name before the input column (`SELECT m.k AS i ... ORDER BY -i` orders
            # by -m.k): put each output's expression in its place
            key = key.copy()
            for col in list(key.find_all(exp.Column)):
                if not col.table and col.name.lower() in inner_of:
                    replacement = inner_of[col.name.lower()].copy()
                    if col is key:
                        key = replacement
                    else:
                        col.replace(replacement)
            sql = self.expr(key, scope)[0]
        desc = bool(o.args.get("desc"))
        nulls_first = o.args.get("nulls_first")
        if nulls_first is None:
            nulls_first = not desc                  # Spark: NULLs are the smallest value
        return f"{sql} {'DESC' if desc else 'ASC'} NULLS {'FIRST' if nulls_first else 'LAST'}"

    def relation(self, rel: exp.Expression, scope: _Scope) -> str:
        if not isinstance(rel, exp.Subquery) or not rel.alias:
            raise NotServable("a relation other than a datamap read")
        alias = rel.alias.lower()
        inner = rel.this
        if not isinstance(inner, exp.Select):
            raise NotServable("a derived table that is not a SELECT")
        read = self._datamap_read(inner)
        if read is not None:
            sql, cols = read
        else:                          # a derived table over a datamap read
            sql, out = self.select(inner)
            cols = {n.lower(): t for n, t in out}
            if len(cols) != len(out):
                raise NotServable("a derived table with two columns of one name")
        scope.aliases[alias] = cols
        return f"({sql}) AS {_q(alias)}"

    def _datamap_read(self, sel: exp.Select):
        from_ = sel.args.get("from_")
        table = from_.this if from_ is not None else None
        if not isinstance(table, exp.Table) or not table.db:
            return None
        full = f"{table.db}.{table.name}".lower()
        if full not in self.tables:
            raise NotServable(f"table {full} is not a datamap table")
        for key, value in sel.args.items():
            if value not in (None, [], False) and key not in ("expressions", "from_", "where"):
                raise NotServable("a datamap read with more than a segment filter")
        stored = self.tables[full]
        cols: dict[str, str] = {}
        for e in sel.expressions:
            if not isinstance(e, exp.Column) or e.table or e.name.lower() not in stored:
                raise NotServable("a datamap read of something other than its columns")
            try:
                t = _spark_type(stored[e.name.lower()])
                if t == "timestamp" and self.offset is None:
                    raise NotServable(self.zone_problem)
            except NotServable as why:    # only a query that uses it is refused
                t = _UNSERVED + str(why)
            cols[e.name.lower()] = t
        segments = _segments(sel.args.get("where"))
        self.reads.append((full, segments))
        files = list(self.files_of(full, segments))
        read = {c: t for c, t in cols.items() if not t.startswith(_UNSERVED)}
        names = ", ".join(self._read_column(c, t) for c, t in read.items()) or "NULL AS _none"
        if not files:   # no rows: a typed empty relation
            typed = ", ".join(f"CAST(NULL AS {duck_type(t)}) AS {_q(c)}"
                              for c, t in read.items()) or "NULL AS _none"
            return f"SELECT {typed} WHERE FALSE", cols
        listed = ", ".join(_lit(f) for f in files)
        return f"SELECT {names} FROM read_parquet([{listed}])", cols

    def _read_column(self, name: str, spark_type: str) -> str:
        if spark_type != "timestamp":
            return _q(name)
        # an instant (INT96 or UTC-adjusted micros in the file) -> local wall-clock time
        # in the session's fixed-offset zone (the engine's own TimeZone is UTC)
        local = f"CAST({_q(name)} AS TIMESTAMP)"
        if self.offset:
            local = f"({local} + INTERVAL ({self.offset}) SECOND)"
        return f"CAST({local} AS TIMESTAMP) AS {_q(name)}"

    # ---------------------------------------------------------------- expressions
    def condition(self, e: exp.Expression, scope: _Scope) -> str:
        sql, t = self.expr(e, scope)
        if t != "boolean":
            raise NotServable("a condition that is not boolean")
        return sql

    def expr(self, e: exp.Expression, scope: _Scope) -> tuple[str, str]:
        method = _DISPATCH.get(type(e))
        if method is None:
            raise NotServable(f"{e.key.upper()} ({_short(e)})")
        return method(self, e, scope)

    def _column(self, e: exp.Column, scope):
        if isinstance(e.this, exp.Star):
            raise NotServable("*")
        return scope.column(e)

    def _paren(self, e, scope):
        sql, t = self.expr(e.this, scope)
        return f"({sql})", t

    def _literal(self, e: exp.Literal, scope):
        if e.is_string:
            return _lit(e.this), "string"
        text = e.this
        if re.fullmatch(r"\d+", text):
            v = int(text)
            if v <= _INT_MAX:
                return text, "int"
            if v <= _BIGINT_MAX:
                return text, "bigint"
            raise NotServable(f"integer literal {text}")
        m = re.fullmatch(r"(\d*)\.(\d+)|(\d+)\.", text)
        if m:
            whole, frac = (m.group(1) or "", m.group(2) or "") if m.group(3) is None else (m.group(3), "")
            digits = (whole.lstrip("0") + frac) or "0"
            p, s = max(len(digits), len(frac), 1), len(frac)
            p = max(p, s)
            if p > 38:
                raise NotServable(f"decimal literal {text}")
            return f"CAST({_lit(text)} AS DECIMAL({p},{s}))", f"decimal({p},{s})"
        raise NotServable(f"literal {text}")

    def _boolean(self, e, scope):
        return ("TRUE" if e.this else "FALSE"), "boolean"

    def _neg(self, e, scope):
        if _int_literal(e) is not None:
            # Spark reads `-2147483648` as one literal (an int), not minus a bigint
            text = _int_literal(e)
            v = int(text)
            if v < -_BIGINT_MAX - 1:
                raise NotServable(f"integer literal {text}")
            return f"CAST({text} AS {'INTEGER' if v >= -_INT_MAX - 1 else 'BIGINT'})", \
                ("int" if v >= -_INT_MAX - 1 else "bigint")
        sql, t = self.expr(e.this, scope)
        if not (t in INTEGRAL or _DEC.match(t) or t == "double"):
            raise NotServable("minus of a non-number")
        if _DEC.match(t) and int(_DEC.match(t).group(1)) > 34:
            # Spark negates a wide decimal through Scala's BigDecimal, which rounds it to 34
            # digits (-999...9.9999999999 of decimal(38,10) comes back as -1E27)
            raise NotServable(f"unary minus of a {t}")
        return f"CAST(-({sql}) AS {duck_type(t)})", t

    def _arith(self, e: exp.Binary, scope):
        l_sql, lt = self.expr(e.this, scope)
        r_sql, rt = self.expr(e.expression, scope)
        op = {exp.Add: "+", exp.Sub: "-", exp.Mul: "*"}[type(e)]
        if not (_is_num(lt) and _is_num(rt)):
            raise NotServable(f"{op} of {lt} and {rt}")
        if lt == "double" or rt == "double":
            if lt != rt and (_DEC.match(lt) or _DEC.match(rt)):
                raise NotServable(f"{op} of a decimal and a double")
            return f"(CAST({l_sql} AS DOUBLE) {op} CAST({r_sql} AS DOUBLE))", "double"
        if lt in INTEGRAL and rt in INTEGRAL:
            t = max(lt, rt, key=_INT_ORDER.index)
            # DuckDB fails on overflow where Spark fails (ANSI) or wraps: both go to Spark
            return f"CAST(CAST({l_sql} AS {_DUCK[t]}) {op} CAST({r_sql} AS {_DUCK[t]}) AS {_DUCK[t]})", t
        (p1, s1), (p2, s2) = _dec_operand(e.this, lt), _dec_operand(e.expression, rt)
        if op == "*":
            p, s = p1 + p2 + 1, s1 + s2
        else:
            s = max(s1, s2)
            p = max(p1 - s1, p2 - s2) + s + 1
        if p > 38:
            raise NotServable(f"decimal {op} that loses precision in Spark")
        t = f"decimal({p},{s})"
        # DuckDB multiplies two decimals of up to 18 digits in 64 bits and fails on a
        # product Spark's decimal(p1+p2+1) holds: multiply at 38 digits, then narrow
        w1, w2 = (38, 38) if op == "*" else (p1, p2)
        return (f"CAST(CAST({l_sql} AS DECIMAL({w1},{s1})) {op} CAST({r_sql} AS "
                f"DECIMAL({w2},{s2})) AS DECIMAL({p},{s}))"), t

    def _div(self, e: exp.Div, scope):
        l_sql, lt = self.expr(e.this, scope)
        r_sql, rt = self.expr(e.expression, scope)
        if not (_is_num(lt) and _is_num(rt)):
            raise NotServable(f"/ of {lt} and {rt}")
        if _DEC.match(lt) or _DEC.match(rt):
            if lt == "double" or rt == "double":
                raise NotServable("/ of a decimal and a double")
            (p1, s1), (p2, s2) = _dec_operand(e.this, lt), _dec_operand(e.expression, rt)
            p, s = decimal_div_type(p1, s1, p2, s2)
            # exact, HALF_UP, by Spark's rule (serving/engine.py registers spark_decimal_div);
            # a zero divisor or an overflow raises, and Spark answers
            return (f"CAST(spark_decimal_div(CAST({l_sql} AS VARCHAR), CAST({r_sql} AS VARCHAR), "
                    f"{p}, {s}) AS DECIMAL({p},{s}))"), f"decimal({p},{s})"
        # Spark divides integers and doubles as doubles; a zero divisor is NULL or an error
        # in Spark, inf in DuckDB: raise, and Spark answers
        # (NULL on either side is NULL first, as Spark evaluates it)
        left, right = f"CAST({l_sql} AS DOUBLE)", f"CAST({r_sql} AS DOUBLE)"
        return (f"(CASE WHEN {left} IS NULL OR {right} IS NULL THEN CAST(NULL AS DOUBLE) "
                f"WHEN {right} = 0 THEN error('division by zero') "
                f"ELSE {left} / {right} END)"), "double"

    def _compare(self, e: exp.Binary, scope):
        op = {exp.EQ: "=", exp.NEQ: "<>", exp.GT: ">", exp.GTE: ">=", exp.LT: "<",
              exp.LTE: "<="}[type(e)]
        seen: list[str] = []
        l_sql, r_sql = self._comparable(e.this, e.expression, scope, seen)
        _fits_one_decimal(seen)
        return f"({l_sql} {op} {r_sql})", "boolean"

    def _comparable(self, a: exp.Expression, b: exp.Expression, scope,
                    seen: list[str]) -> tuple[str, str]:
        a_sql, at = self.expr(a, scope)
        b_sql, bt = self.expr(b, scope)
        seen += [at, bt]
        if at == "date" and bt == "string":
            b_sql = _date_literal(b)
        elif at == "string" and bt == "date":
            a_sql = _date_literal(a)
        elif at == "timestamp" and bt in ("string", "date"):
            b_sql = _timestamp_operand(b, b_sql, bt)
        elif bt == "timestamp" and at in ("string", "date"):
            a_sql = _timestamp_operand(a, a_sql, at)
        elif _is_num(at) and _is_num(bt):
            if ("double" in (at, bt)) and (_DEC.match(at) or _DEC.match(bt)):
                raise NotServable("comparison of a decimal and a double")
        elif at != bt:
            raise NotServable(f"comparison of {at} and {bt}")
        return a_sql, b_sql

    def _logic(self, e, scope):
        op = "AND" if isinstance(e, exp.And) else "OR"
        return f"({self.condition(e.this, scope)} {op} {self.condition(e.expression, scope)})", "boolean"

    def _not(self, e, scope):
        return f"(NOT {self.condition(e.this, scope)})", "boolean"

    def _is(self, e: exp.Is, scope):
        if not isinstance(e.expression, exp.Null):
            raise NotServable("IS other than IS NULL")
        sql, _ = self.expr(e.this, scope)
        return f"({sql} IS NULL)", "boolean"

    def _in(self, e: exp.In, scope):
        if e.args.get("query") or e.args.get("unnest") or e.args.get("field"):
            raise NotServable("IN (subquery)")
        items, seen = [], []
        for item in e.expressions:
            if not isinstance(item, (exp.Literal, exp.Neg, exp.Boolean)):
                raise NotServable("IN with other than literals")
            items.append(self._comparable(e.this, item, scope, seen))
        if not items:
            raise NotServable("empty IN")
        _fits_one_decimal(seen)
        return f"({items[0][0]} IN ({', '.join(i[1] for i in items)}))", "boolean"

    def _between(self, e: exp.Between, scope):
        seen: list[str] = []
        a, low = self._comparable(e.this, e.args["low"], scope, seen)
        _, high = self._comparable(e.this, e.args["high"], scope, seen)
        _fits_one_decimal(seen)
        return f"({a} BETWEEN {low} AND {high})", "boolean"

    def _cast(self, e: exp.Cast, scope):
        sql, src = self.expr(e.this, scope)
        to = e.to
        if to.is_type(exp.DataType.Type.DECIMAL):
            params = [int(p.this.this if isinstance(p, exp.DataTypeParam) else p.this)
                      for p in to.expressions]
            p, s = (params + [10, 0][len(params):])[:2] if params else (10, 0)
            dst = f"decimal({p},{s})"
        else:
            dst = norm(to.sql("spark"))
        dst = _spark_type(dst)
        if src == dst:
            return sql, dst
        if src == "string" and dst in ("date", "timestamp"):
            if not (isinstance(e.this, exp.Literal) and e.this.is_string):
                raise NotServable(f"CAST from string to {dst}")
            return (_date_literal(e.this) if dst == "date"
                    else _timestamp_operand(e.this, sql, "string")), dst
        if (src, dst) in (("date", "timestamp"), ("timestamp", "date")):
            return f"CAST({sql} AS {duck_type(dst)})", dst     # local midnight / local date
        ok = ((src in INTEGRAL or _DEC.match(src)) and (dst in INTEGRAL or _DEC.match(dst))) \
            or (src in INTEGRAL and dst == "double") \
            or (dst == "string" and (src in INTEGRAL or _DEC.match(src) or src == "date"))
        if not ok:
            raise NotServable(f"CAST from {src} to {dst}")
        if _DEC.match(src) and dst in INTEGRAL:
            # Spark truncates a decimal towards zero (2.5 -> 2); DuckDB's cast rounds (-> 3)
            sql = f"trunc({sql})"
        # narrowing that overflows fails in DuckDB (Spark: error or NULL): Spark answers
        return f"CAST({sql} AS {duck_type(dst)})", dst

    def _agg(self, e: exp.AggFunc, scope):
        if e.args.get("distinct") or isinstance(e.this, exp.Distinct):
            raise NotServable(f"{e.key.upper()}(DISTINCT ...)")
        if isinstance(e, exp.Count):
            arg = e.this
            if arg is None or isinstance(arg, exp.Star):
                return "COUNT(*)", "bigint"
            sql, _ = self.expr(arg, scope)
            return f"COUNT({sql})", "bigint"
        sql, t = self.expr(e.this, scope)
        if isinstance(e, (exp.Min, exp.Max)):
            if e.expressions:
                raise NotServable("min/max with more than one argument")
            return f"{e.key.upper()}({sql})", t
        # SUM: Spark's result type; DuckDB sums wider (HUGEINT, DECIMAL(38,s)), so the cast
        # fails exactly where Spark's sum overflows
        if t in INTEGRAL:
            return f"CAST(SUM({sql}) AS BIGINT)", "bigint"
        if t == "double":
            return f"SUM({sql})", "double"
        d = _DEC.match(t)
        if d:
            p, s = int(d.group(1)), int(d.group(2))
            rt = f"decimal({min(38, p + 10)},{s})"
            return f"CAST(SUM({sql}) AS {duck_type(rt)})", rt
        raise NotServable(f"sum of {t}")

    def _case(self, e: exp.Case, scope):
        if e.this is not None:
            raise NotServable("CASE <expr> WHEN")
        whens, types = [], []
        for w in e.args.get("ifs") or []:
            cond = self.condition(w.this, scope)
            val, t = self._value(w.args["true"], scope)
            whens.append((cond, val, t))
            types.append(t)
        default = e.args.get("default")
        tail = ""
        if default is not None:
            tail, t = self._value(default, scope)
            types.append(t)
        t = _common(types, "CASE")
        typed = " ".join(f"WHEN {c} THEN CAST({v} AS {duck_type(t)})" for c, v, _ in whens)
        if default is not None:
            tail = f" ELSE CAST({tail} AS {duck_type(t)})"
        return f"(CASE {typed}{tail} END)", t

    def _value(self, e, scope):
        if isinstance(e, exp.Null):
            return "NULL", None
        return self.expr(e, scope)

    def _coalesce(self, e: exp.Coalesce, scope):
        args = [e.this] + list(e.expressions)
        parts = [self.expr(a, scope) for a in args]
        t = _common([p[1] for p in parts], "COALESCE")
        return f"COALESCE({', '.join(f'CAST({p[0]} AS {duck_type(t)})' for p in parts)})", t

    def _date_part(self, e, scope):
        arg = e.this
        if isinstance(arg, exp.TsOrDsToDate) and not arg.args.get("format"):
            arg = arg.this                 # sqlglot's wrapper of year(<date>)
        sql, t = self.expr(arg, scope)
        part = {exp.Year: "year", exp.Quarter: "quarter", exp.Month: "month",
                exp.Day: "day", exp.DayOfMonth: "day", exp.Hour: "hour",
                exp.Minute: "minute", exp.Second: "second"}[type(e)]
        if t != "timestamp" and (t != "date" or part in ("hour", "minute", "second")):
            raise NotServable(f"{e.key.upper()} of {t}")
        return f"CAST(date_part('{part}', {sql}) AS INTEGER)", "int"

    def _trunc(self, e: exp.TimestampTrunc, scope):
        unit = e.args.get("unit")
        name = (unit.name if isinstance(unit, (exp.Var, exp.Literal)) else "").lower()
        if name not in TRUNC_UNITS or e.args.get("zone"):
            raise NotServable(f"date_trunc unit {name or '?'}")
        sql, t = self.expr(e.this, scope)
        if t == "date":
            sql = f"CAST({sql} AS TIMESTAMP)"      # Spark: the date's local midnight
        elif t != "timestamp":
            raise NotServable(f"date_trunc of {t}")
        return f"CAST(date_trunc('{TRUNC_UNITS[name]}', {sql}) AS TIMESTAMP)", "timestamp"


def _common(types, what: str) -> str:
    """The one type of CASE branches / COALESCE arguments: equal types, or integral types
    widened to the widest (Spark's and DuckDB's rule alike); anything else -> Spark."""
    known = {t for t in types if t is not None}
    if len(known) > 1 and known <= set(_INT_ORDER):
        return max(known, key=_INT_ORDER.index)
    if len(known) != 1:
        raise NotServable(f"{what} over values of types {sorted(known) or ['NULL']}")
    return known.pop()


def _fits_one_decimal(types: list[str]) -> None:
    """Values compared with a decimal meet in one decimal type. Spark's wider type is
    bounded to 38 digits and still answers; DuckDB's cast to it fails (decimal(38,10) vs
    a 29-digit literal): a comparison whose exact common type needs more than 38 digits
    goes to Spark."""
    if not any(_DEC.match(t) for t in types):
        return
    parts = [_dec(t) for t in types if _dec(t) is not None]
    if max(p - s for p, s in parts) + max(s for _, s in parts) > 38:
        raise NotServable("a comparison of decimals whose common type needs over 38 digits")


def _dec_operand(e: exp.Expression, t: str) -> tuple[int, int]:
    """Spark's decimal view of an operand: an integer literal takes its own digits
    (DecimalPrecision's literal rule; `-3` is one literal in Spark too), an integral
    column its type's."""
    text = _int_literal(e)
    if text is not None:
        return max(1, len(text.lstrip("-").lstrip("0") or "0")), 0
    d = _dec(t)
    if d is None:
        raise NotServable(f"decimal arithmetic with {t}")
    return d


def _int_literal(e: exp.Expression) -> str | None:
    """The text of an integer literal, `-` included when Spark's parser takes it in
    (`-3`, not `-(3)`); None for anything else."""
    if isinstance(e, exp.Literal) and not e.is_string and e.this.isdigit():
        return e.this
    if isinstance(e, exp.Neg) and isinstance(e.this, exp.Literal) \
            and not e.this.is_string and e.this.this.isdigit():
        return "-" + e.this.this
    return None


def decimal_div_type(p1: int, s1: int, p2: int, s2: int) -> tuple[int, int]:
    """Spark's decimal division result type (DecimalPrecision, allowPrecisionLoss=true)."""
    s = max(6, s1 + p2 + 1)
    p = p1 - s1 + s2 + s
    if p <= 38:
        return p, s
    int_digits = p - s
    return 38, max(38 - int_digits, min(s, 6))


def _timestamp_operand(e: exp.Expression, sql: str, t: str) -> str:
    """A date or a timestamp literal string compared with (or cast to) a timestamp, as
    Spark casts it: a date is its local midnight, a string is local wall-clock time."""
    if t == "date":
        return f"CAST({sql} AS TIMESTAMP)"
    literal = (timestamp_literal(e.this) if isinstance(e, exp.Literal) and e.is_string
               else None)
    if literal is None:
        raise NotServable("a timestamp compared with a string that is not a "
                          "'YYYY-MM-DD[ HH:MM:SS[.ffffff]]' literal")
    return literal


def _date_literal(e: exp.Expression) -> str:
    if not (isinstance(e, exp.Literal) and e.is_string and _DATE_LITERAL.match(e.this)):
        raise NotServable("a date compared with a string that is not a 'YYYY-MM-DD' literal")
    try:
        date.fromisoformat(e.this)
    except ValueError:
        raise NotServable(f"date literal {e.this!r}") from None
    return f"DATE {_lit(e.this)}"


def _segments(where: exp.Where | None) -> tuple[str, ...]:
    cond = where.this if where is not None else None
    if isinstance(cond, exp.In) and isinstance(cond.this, exp.Column) \
            and cond.this.name.lower() == SEGMENT_COLUMN and not cond.this.table:
        items = cond.expressions
    elif isinstance(cond, exp.EQ) and isinstance(cond.this, exp.Column) \
            and cond.this.name.lower() == SEGMENT_COLUMN:
        items = [cond.expression]
    else:
        raise NotServable("a datamap read without its segment filter")
    if not all(isinstance(i, exp.Literal) and i.is_string and i.this.isdigit() for i in items):
        raise NotServable("a segment filter that is not a list of segment ids")
    return tuple(i.this for i in items)


def _short(e: exp.Expression) -> str:
    text = e.sql("spark")
    return text if len(text) <= 60 else text[:57] + "..."


_T = _Translator
_DISPATCH: dict[type, Callable] = {
    exp.Column: _T._column, exp.Paren: _T._paren, exp.Literal: _T._literal,
    exp.Boolean: _T._boolean, exp.Neg: _T._neg,
    exp.Add: _T._arith, exp.Sub: _T._arith, exp.Mul: _T._arith, exp.Div: _T._div,
    exp.EQ: _T._compare, exp.NEQ: _T._compare, exp.GT: _T._compare, exp.GTE: _T._compare,
    exp.LT: _T._compare, exp.LTE: _T._compare,
    exp.And: _T._logic, exp.Or: _T._logic, exp.Not: _T._not, exp.Is: _T._is, exp.In: _T._in,
    exp.Between: _T._between, exp.Cast: _T._cast, exp.TryCast: _T._cast,
    exp.Sum: _T._agg, exp.Count: _T._agg, exp.Min: _T._agg, exp.Max: _T._agg,
    exp.Case: _T._case, exp.Coalesce: _T._coalesce,
    exp.Year: _T._date_part, exp.Quarter: _T._date_part, exp.Month: _T._date_part,
    exp.Day: _T._date_part, exp.DayOfMonth: _T._date_part, exp.Hour: _T._date_part,
    exp.Minute: _T._date_part, exp.Second: _T._date_part, exp.TimestampTrunc: _T._trunc,
}
