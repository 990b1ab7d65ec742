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

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

from sqlglot import exp

import proxy.serving.moments as moments
import proxy.serving.relations as relations
import proxy.serving.unions as unions
import proxy.serving.windows as windows
from proxy.serving.basetables import TableOf, table_relation
from proxy.serving.compensation import (
    BaseOf, base_read, compensated_union, filtered_files, is_compensation,
)
from proxy.serving.expressions import Expressions, Scope
from proxy.serving.formats import truncated_keys
from proxy.serving.subtotals import Grouping, grouping, has_subtotals, subtotal_having
from proxy.serving.sqltypes import (  # noqa: F401 - decimal_div_type, duck_type: re-exported
    TYPES, UNSERVED, NotServable, decimal_div_type, duck_type, limit_sql, lit, q, spark_type,
)

__all__ = ["ALLOWED", "NotServable", "Plan", "decimal_div_type", "duck_type", "translate"]
from proxy.serving.timestamps import session_zone
from rewriter.api import SEGMENT_COLUMN

# Column and result types the tier reads and returns. Everything else -> Spark.
ALLOWED = {
    "shapes": "a SELECT (DISTINCT) over datamap reads, derived tables (* expanded) and base "
              "tables read whole (basetables.py); joins on any served condition, "
              "CTEs, IN (SELECT) / EXISTS / one-row scalar subqueries (relations.py); "
              "WHERE, GROUP BY (a double key read as Spark's: -0.0 as 0.0; no expression over "
              "it), HAVING, ORDER BY (Spark's NULL ordering), LIMIT (int range); subtotals: "
              "ROLLUP, CUBE, GROUPING SETS (WITH ROLLUP / WITH CUBE, mixed lists) with "
              "grouping() and grouping_id() (Spark's bit order), HAVING over aggregates",
    "types": ", ".join(TYPES),
    "aggregates": "sum, count, count(*), min, max, avg (averages.py); count(DISTINCT x[, y "
                  "...]), sum(DISTINCT x) and avg(DISTINCT x) (not of doubles), "
                  "min/max(DISTINCT x); FILTER (WHERE ...) of these; " + moments.ALLOWED,
    "operators": "+ - * (integral, decimal without precision loss), / (double; exact "
                 "decimal division by Spark's rules), unary - (decimals of up to 34 digits), "
                 "= <> < <= > >= <=>, IN (literals), BETWEEN (of decimals: when their common "
                 "type fits 38 digits), AND OR NOT, IS [NOT] NULL, LIKE / NOT LIKE (a literal "
                 "pattern, '\\' or ESCAPE)",
    "functions": "CAST (integral/decimal widening and narrowing, decimal to integral "
                 "truncating, to string from "
                 "integral/decimal/date/boolean/string; a date to a timestamp, a timestamp to a "
                 "date, a date or timestamp literal string to its type), CASE WHEN, "
                 "COALESCE/NVL/IFNULL, IF, NVL2, NULLIF, greatest/least (not of doubles), "
                 "concat, concat_ws, substr/substring, length, trim/ltrim/rtrim/TRIM(BOTH|"
                 "LEADING|TRAILING x FROM s), lpad/rpad, replace, upper/lower (ASCII and "
                 "caseless CJK text; other text raises and Spark answers), abs, floor/ceil, "
                 "round/bround (of integers and decimals), "
                 "year, quarter, month, day/dayofmonth, dayofweek, weekday, "
                 "dayofyear, weekofyear, last_day, trunc(week|month|quarter|year and their "
                 "aliases), EXTRACT / date_part (year, yearofweek, quarter, month, week, day, "
                 "dow, dow_iso, doy; hour, minute, second of timestamps), next_day (a literal "
                 "day name), date_add / date_sub / add_months (int, smallint, tinyint), "
                 "make_date, months_between over dates and timestamps; hour/minute/second "
                 "and date_trunc(microsecond ... year, every alias and casing) over "
                 "timestamps; date/timestamp +/- INTERVAL 'n' of one unit (day, hour, "
                 "minute, second, month, year)",
    "datetime patterns": "date_format, from_unixtime, unix_timestamp / to_unix_timestamp, "
                         "to_date, to_timestamp with the pattern letters of "
                         "proxy/serving/patterns.py (FORMAT printed, _PARSE parsed); CAST "
                         "string <-> date/timestamp of 'yyyy-MM-dd[ HH:mm:ss[.ffffff]]' text",
    "literals": "integers, decimals, strings, booleans, 'YYYY-MM-DD' against a date, "
                "'YYYY-MM-DD[ HH:MM:SS[.ffffff]]' against a timestamp",
    "windows": windows.ALLOWED,
    "unions": unions.ALLOWED,
}

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
              zone: str | None = None, base_of: BaseOf | None = None,
              table_of: TableOf | None = None) -> Plan:
    """`zone`: the session time zone the datamaps were computed in and queries run in;
    timestamps are served only in a fixed UTC offset or a checked named zone
    (proxy/serving/timestamps.py). `base_of`: a base table's new files, for a datamap
    compensated with them (proxy/serving/compensation.py); `table_of`: a base table's
    files, for one read whole (proxy/serving/basetables.py); None: not served."""
    if not isinstance(tree, (exp.Select, exp.Union)):
        raise NotServable("not a single SELECT or a union")
    for node in tree.find_all(exp.ApproxDistinct, exp.Anonymous):
        # Spark's HLL++ and DataSketches HLL have no DuckDB equivalent giving the same
        # numbers, and DuckDB cannot read Spark's sketch bytes (rewriter/distinct.py)
        if isinstance(node, exp.ApproxDistinct) or node.name.lower().startswith("hll_"):
            raise NotServable(f"{node.sql('spark').split('(')[0].lower()}: Spark's own "
                              "distinct-count sketches")
    t = _Translator(tables, files_of, zone, base_of, table_of)
    sql, cols = t.select(tree) if isinstance(tree, exp.Select) else unions.union(t, tree)
    return Plan(sql, tuple(cols), tuple(t.reads))

# Spark normalises grouping keys (NormalizeFloatingNumbers): -0.0 and 0.0 are one group
# whose key reads 0.0; DuckDB groups them too but returns the first value it met (-0.0).
# A key output is served as key + 0.0; an expression over a double key is not
_DOUBLE_KEY = ("an expression over a double GROUP BY or DISTINCT key (Spark computes it "
               "from the key with -0.0 read as 0.0), or DISTINCT over a double with GROUP BY")


class _Scope(Scope):
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
        if cols[name].startswith(UNSERVED):
            raise NotServable(cols[name][len(UNSERVED):])
        return f"{q(alias)}.{q(name)}", cols[name]


class _Translator(Expressions):
    def __init__(self, tables: TableColumns, files_of: FilesOf, zone: str | None = None,
                 base_of: BaseOf | None = None, table_of: TableOf | None = None):
        self.tables = {k.lower(): v for k, v in tables.items()}
        self.files_of, self.base_of, self.table_of = files_of, base_of, table_of
        self.reads: list[tuple[str, tuple[str, ...]]] = []
        self.zone, self.zone_problem = session_zone(zone)
        self.groupings: list[Grouping | None] = []    # of the SELECTs being translated
        self.grains: dict[str, tuple[str, str]] = {}
        self.ctes: list[dict] = []      # CTEs in force, innermost last (relations.py)

    def expr(self, e: exp.Expression, scope) -> tuple[str, str]:
        if isinstance(e, (exp.Grouping, exp.GroupingId)):
            g = self.groupings[-1] if self.groupings else None
            if g is None:
                raise NotServable("grouping() / grouping_id() without ROLLUP, CUBE or "
                                  "GROUPING SETS (Spark rejects it)")
            return g.function(e, lambda a: self.expr(a, scope)[0])
        if relations.is_subquery(e):
            return relations.subquery(self, e, scope)
        return super().expr(e, scope)

    # ---------------------------------------------------------------- relations
    def select(self, sel: exp.Select, top: bool = True):
        """`top`: the outermost SELECT, whose timestamps are sent as local wall-clock
        times; a derived table's stay instants (proxy/serving/timestamps.py)."""
        for key, value in sel.args.items():
            if value in (None, [], False):
                continue
            if key not in ("expressions", "from_", "where", "group", "having", "order",
                           "limit", "distinct", "joins", "with_"):
                raise NotServable(f"{key.rstrip('_').upper()} clause")
        if sel.args.get("distinct") is not None and sel.args["distinct"].args.get("on"):
            raise NotServable("DISTINCT ON")
        from_ = sel.args.get("from_")
        if from_ is None:
            raise NotServable("no FROM")
        pushed = relations.with_ctes(self, sel)     # CTEs, joins, *: relations.py
        try:
            sel = relations.expand_star(self, sel)
            scope = _Scope()
            rel_sql = self.relation(from_.this, scope)
            joined = relations.joins(self, sel, scope)
            return self._grouped(sel, scope, f"{rel_sql} {joined}".rstrip(), top)
        finally:
            if pushed:
                self.ctes.pop()

    def _grouped(self, sel: exp.Select, scope: _Scope, rel_sql: str, top: bool):
        group = sel.args.get("group")
        key_types: dict[str, str] = {}

        def key_sql(g: exp.Expression) -> str:
            sql, key_types[sql] = self.expr(g, scope)
            return sql
        subtotals = None
        if group and has_subtotals(group):
            subtotals = grouping(group, key_sql)
            self.groupings.append(subtotals)
        else:       # Spark rejects grouping() without ROLLUP / CUBE / GROUPING SETS
            self.groupings.append(None)
        try:
            return self._select(sel, scope, rel_sql, group, subtotals, key_types, top)
        finally:
            self.groupings.pop()

    def _select(self, sel: exp.Select, scope: _Scope, rel_sql: str, group,
                subtotals: Grouping | None, key_types: Mapping[str, str], top: bool):
        outputs, out_cols, aggregate = self._outputs(sel, scope)
        inner_of: dict[str, exp.Expression] = {}      # output name -> its expression
        for (_, _, name, inner) in outputs:
            inner_of.setdefault(name.lower(), inner)
        instants = [sql for sql, _, _, _ in outputs]  # each output's SQL before local()
        if sel.args.get("distinct") and any(t == "double" for _, t in out_cols) \
                and (aggregate or group):
            raise NotServable(_DOUBLE_KEY)
        # where two instants print alike (a fall-back's repeated hour), the outermost
        # SELECT groups, orders and de-duplicates by instant, never by its printed value
        by_instant = top and not (self.zone is None or self.zone.injective) \
            and any(t == "timestamp" for _, t in out_cols)
        distinct_keys = None
        if sel.args.get("distinct") and by_instant:
            if group or aggregate:
                raise NotServable("SELECT DISTINCT of a timestamp with GROUP BY or aggregates "
                                  "in a time zone with daylight saving time")
            distinct_keys = instants          # DISTINCT is GROUP BY every output
        # double keys (GROUP BY, or the outputs of a plain SELECT DISTINCT): Spark folds -0.0
        # into 0.0 (and every NaN into one); DuckDB groups them alike but returns the key it
        # met first, so a key output adds 0.0 (-0.0 + 0.0 is 0.0)
        double_keys = ({s for s, t, _, _ in outputs if t == "double"}
                       if sel.args.get("distinct") else set())
        where_sql = (self.condition(sel.args["where"].this, scope)
                     if sel.args.get("where") else None)
        keys = []
        if subtotals is not None:
            double_keys |= {k for k in subtotals.leaves if key_types[k] == "double"}
        elif group:
            keys = self._group_keys(group, scope, outputs, by_instant, double_keys)
        keys, regroup = truncated_keys(self.grains, keys)     # the Hive grains
        selected = []
        for sql, typ, name, inner in outputs:
            sql = regroup(sql)
            if sql in double_keys:
                sql = f"({sql} + 0.0)"
            elif any(k in sql for k in double_keys) and not isinstance(
                    inner, (exp.AggFunc, exp.Grouping, exp.GroupingId)):
                raise NotServable(_DOUBLE_KEY)
            if typ == "timestamp" and top:
                sql = self.zone.local(sql)       # sent as the local wall-clock time
            # every output is cast to its Spark type: DuckDB's own may be wider
            selected.append(f"CAST({sql} AS {duck_type(typ)}) AS {q(name)}")
        parts = ["SELECT " + ("DISTINCT " if sel.args.get("distinct") and distinct_keys is None
                              else "") + ", ".join(selected), "FROM " + rel_sql]
        if where_sql is not None:
            parts.append("WHERE " + where_sql)
        if distinct_keys is not None:
            parts.append("GROUP BY " + ", ".join(distinct_keys))
        if subtotals is not None:
            parts.append("GROUP BY " + subtotals.group_by())
        elif group:
            parts.append("GROUP BY " + ", ".join(keys))
        if subtotals is not None and sel.args.get("having"):
            subtotal_having(sel.args["having"])
        having = [regroup(self.condition(sel.args["having"].this, scope))] \
            if sel.args.get("having") else []
        if subtotals is not None and subtotals.having():
            having.append(subtotals.having())
        if having:
            parts.append("HAVING " + (having[0] if len(having) == 1
                                      else " AND ".join(f"({h})" for h in having)))
        order = sel.args.get("order")
        if order:
            parts.append("ORDER BY " + ", ".join(
                regroup(self.ordered(o, scope, out_cols, inner_of,
                                     instants if by_instant else None))
                for o in order.expressions))
        limit = sel.args.get("limit")
        if limit is not None:
            parts.append(limit_sql(limit))
        return " ".join(parts), out_cols

    def _group_keys(self, group: exp.Group, scope: _Scope, outputs, by_instant: bool,
                    double_keys: set[str]) -> list[str]:
        """The SQL of each GROUP BY key (an ordinal stays one, but a timestamp's is its
        instant where the zone prints two instants alike); adds the double keys."""
        keys = []
        for g in group.expressions:
            if isinstance(g, exp.Literal) and not g.is_string:
                if not (g.this.isdigit() and 1 <= int(g.this) <= len(outputs)):
                    raise NotServable(f"GROUP BY {g.this}")
                sql, typ = outputs[int(g.this) - 1][:2]
                keys.append(sql if by_instant and typ == "timestamp"
                            else g.this)       # ordinal
            else:
                sql, typ = self.expr(g, scope)
                keys.append(sql)
            if typ == "double":
                double_keys.add(sql)
        return keys

    def _outputs(self, sel: exp.Select, scope: _Scope):
        """Each output's (sql, Spark type, name, expression) — a timestamp's sql is its
        instant —, the (name, type) columns, and whether any output aggregates."""
        outputs, out_cols, aggregate = [], [], False
        for e in sel.expressions:         # `*` is expanded already (relations.expand_star)
            if isinstance(e, exp.Alias):
                name, inner = e.alias, e.this
            elif isinstance(e, exp.Column) and not isinstance(e.this, exp.Star):
                name, inner = e.name, e
            else:
                raise NotServable("an output without a name (or *)")
            sql, typ = self.expr(inner, scope)
            aggregate = aggregate or bool(inner.find(exp.AggFunc))
            outputs.append((sql, typ, name, inner))
            out_cols.append((name, typ))
        return outputs, out_cols, aggregate

    def ordered(self, o: exp.Ordered, scope: _Scope, out_cols,
                inner_of: Mapping[str, exp.Expression], instants: list[str] | None) -> str:
        """`instants`: each output's SQL, when a timestamp output is ordered by instant."""
        key = o.this
        names = {n.lower(): n for n, _ in out_cols}
        index = [n.lower() for n, _ in out_cols]
        if isinstance(key, exp.Literal) and not key.is_string and key.this.isdigit():
            sql = key.this
            i = int(sql) - 1
            if instants is not None and 0 <= i < len(out_cols) and out_cols[i][1] == "timestamp":
                sql = instants[i]
        elif isinstance(key, exp.Column) and not key.table and key.name.lower() in names:
            sql = q(names[key.name.lower()])       # an output's name
            i = index.index(key.name.lower())
            if instants is not None and out_cols[i][1] == "timestamp":
                sql = instants[i]
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
        cte = relations.cte_reference(self, rel, scope) if isinstance(rel, exp.Table) else None
        if cte is not None:
            return cte
        if isinstance(rel, exp.Table):     # a base table read whole (basetables.py)
            return table_relation(self, rel, scope)
        if not isinstance(rel, exp.Subquery) or not rel.alias:
            raise NotServable("a relation other than a datamap read")
        alias = rel.alias.lower()
        inner = rel.this
        if isinstance(inner, exp.Union) and is_compensation(inner, self.tables):
            sql, cols = compensated_union(inner, self.tables, self._datamap_read, self.select)
            scope.aliases[alias] = cols
            return f"({sql}) AS {q(alias)}"
        if isinstance(inner, exp.Union):       # unions.py
            read = unions.relation(self, inner)
        elif not isinstance(inner, exp.Select):
            raise NotServable("a derived table that is not a SELECT")
        else:
            read = self._datamap_read(inner)
        if read is not None:
            sql, cols = read
        else:                          # a derived table over a datamap read
            sql, out = self.select(inner, top=False)
            cols = {n.lower(): t for n, t in out}
            if len(cols) != len(out):
                raise NotServable("a derived table with two columns of one name")
        scope.aliases[alias] = cols
        return f"({sql}) AS {q(alias)}"

    def _datamap_read(self, sel: exp.Select):
        from_ = sel.args.get("from_")
        table = from_.this if from_ is not None else None
        if not isinstance(table, exp.Table) or not table.db:
            return None
        full = f"{table.db}.{table.name}".lower()
        if full not in self.tables and filtered_files(sel) is None and self.table_of:
            return None      # a SELECT over a base table read whole
        if full not in self.tables:     # the new files of a compensation, or refused
            return base_read(sel, full, self.base_of, self.zone_problem if self.zone is None
                             else None)
        for key, value in sel.args.items():
            if value not in (None, [], False) and key not in ("expressions", "from_", "where"):
                raise NotServable("a datamap read with more than a segment filter")
        stored = self.tables[full]
        cols: dict[str, str] = {}
        for e in sel.expressions:
            if not isinstance(e, exp.Column) or e.table or e.name.lower() not in stored:
                raise NotServable("a datamap read of something other than its columns")
            try:
                t = spark_type(stored[e.name.lower()])
                if t == "timestamp" and self.zone is None:
                    raise NotServable(self.zone_problem)
            except NotServable as why:    # only a query that uses it is refused
                t = UNSERVED + str(why)
            cols[e.name.lower()] = t
        segments = _segments(sel.args.get("where"))
        self.reads.append((full, segments))
        files = list(self.files_of(full, segments))
        read = {c: t for c, t in cols.items() if not t.startswith(UNSERVED)}
        names = ", ".join(self._read_column(c, t) for c, t in read.items()) or "NULL AS _none"
        if not files:   # no rows: a typed empty relation
            typed = ", ".join(f"CAST(NULL AS {duck_type(t)}) AS {q(c)}"
                              for c, t in read.items()) or "NULL AS _none"
            return f"SELECT {typed} WHERE FALSE", cols
        listed = ", ".join(lit(f) for f in files)
        return f"SELECT {names} FROM read_parquet([{listed}])", cols

    def _read_column(self, name: str, spark_type: str) -> str:
        if spark_type != "timestamp":
            return q(name)
        # an instant (INT96 or UTC-adjusted micros in the file) as its UTC wall-clock time
        # (the engine's own TimeZone is UTC): served SQL computes on instants
        return f"CAST({q(name)} AS TIMESTAMP) AS {q(name)}"

    # ---------------------------------------------------------------- expressions


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
