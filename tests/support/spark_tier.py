"""Helpers of the Spark meaning tier: materialise datamap tables the way their layout says,
and compare the original query with its rewrite on real Spark.

Comparison rules: same column names and Spark types (df.schema, nullability ignored); rows
equal as multisets, floats within 1e-9 relative; when the query has ORDER BY the sequence of
ORDER BY keys (those that are output columns) must be equal too; with LIMIT, rows tied with
the last row's ORDER BY key may legitimately differ.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Iterable

import sqlglot
from sqlglot import exp

from rewriter.build import source_keys
from rewriter.api import SEGMENT_COLUMN, Candidate, DatamapDefinition
from rewriter.timeseries import translate_sql

REL_TOL = 1e-9
SLICES = 3
HIDDEN_SEGMENT = "9"     # written but not visible: a rewrite that reads it double-counts


# --- materialisation ---------------------------------------------------------------------------

@dataclass
class Materialiser:
    """Creates datamap tables; reuses one when the same definition and layout is asked for
    again (cases share datamaps), which keeps the tier within its time budget.

    full       a parquet table, CREATE TABLE <table> AS build_sql(definition, {}) plus the
               segment column ('0'): one row per group, stored as the pipeline stores it.
    segmented  a view over 4 segments: the datamap built over 3 disjoint hash slices of its
               first base table (partial aggregates, several rows per group) and an
               invisible 4th segment holding a full copy that a correct rewrite never reads.
               A view (not a table) because it is 4 builds per datamap and the machine is
               shared; the stored columns are the same SELECTs the pipeline would write.
               persist_segments=True writes it as a table instead: the 4 builds run once,
               which pays off when many cases read few datamaps (the BI corpora).
    """
    spark: Any
    schemas: dict
    persist_segments: bool = False

    def __post_init__(self):
        self._state: dict[str, tuple] = {}       # table -> (kind, key)
        self._slices: set[str] = set()

    def _drop(self, table: str) -> None:
        kind = self._state.pop(table, ("table",))[0]
        self.spark.sql(f"DROP {'VIEW' if kind == 'view' else 'TABLE'} IF EXISTS {table}")

    def full(self, d: DatamapDefinition) -> Candidate:
        key = ("table", d.build_sql({}))
        if self._state.get(d.table) != key:
            self._drop(d.table)
            self.spark.sql(f"CREATE TABLE {d.table} USING parquet AS "
                           f"SELECT b.*, '0' AS {SEGMENT_COLUMN} FROM ({d.build_sql({})}) b")
            self._state[d.table] = key
        return Candidate(definition=d, one_row_per_group=True)

    @staticmethod
    def sliceable(d: DatamapDefinition) -> str | None:
        """The base table whose rows can be split into disjoint slices such that the
        datamap's rows over the slices partition its rows over the whole table: the first
        table when every join is inner or left (it is the preserved side); of a table read
        twice, only its first reference (its source key, rewriter/build.py). None when no
        such table exists."""
        if any(k.lower() not in ("inner", "left", "join", "") for k in d.join_kinds):
            return None
        return source_keys(d.base_tables)[0]

    def _slice(self, fact: str, k: int) -> str:
        fact = fact.split("@")[0]
        db, t = fact.split(".")
        view = f"{db}.dm_slice__{t}_{k}"
        if view not in self._slices:
            cols = ", ".join(f"`{c}`" for c in self.schemas[db][t])
            self.spark.sql(
                f"CREATE OR REPLACE VIEW {view} AS SELECT {cols} FROM "
                f"(SELECT *, pmod(hash(*), {SLICES}) AS dm_slice__k FROM {fact}) WHERE dm_slice__k = {k}")
            self._slices.add(view)
        return view

    def segmented(self, d: DatamapDefinition) -> Candidate:
        fact = self.sliceable(d)
        assert fact is not None
        parts = [f"SELECT b.*, '{k}' AS {SEGMENT_COLUMN} FROM "
                 f"({d.build_sql({fact: self._slice(fact, k)})}) b" for k in range(SLICES)]
        parts.append(f"SELECT b.*, '{HIDDEN_SEGMENT}' AS {SEGMENT_COLUMN} FROM ({d.build_sql({})}) b")
        kind = "table" if self.persist_segments else "view"
        key = (kind, tuple(parts))
        if self._state.get(d.table) != key:
            self._drop(d.table)
            using = " USING parquet" if self.persist_segments else ""
            self.spark.sql(f"CREATE {kind.upper()} {d.table}{using} AS {' UNION ALL '.join(parts)}")
            self._state[d.table] = key
        return Candidate(definition=d, one_row_per_group=False,
                         segments=tuple(str(k) for k in range(SLICES)))

    def drop_all(self) -> None:
        for t in list(self._state):
            self._drop(t)
        for v in self._slices:
            self.spark.sql(f"DROP VIEW IF EXISTS {v}")
        self._slices.clear()


# --- comparison ----------------------------------------------------------------------------

def _sort_key(v: Any):
    if v is None:
        return (0, "")
    if isinstance(v, float):
        if math.isnan(v):
            return (1, "nan")
        return (2, float(f"{v:.6g}"))
    if isinstance(v, (int, Decimal)):
        return (2, v)
    if isinstance(v, (list, tuple, dict)):
        return (3, repr(v))
    return (4, v)       # str, date, datetime, bool: comparable within one column


def _row_key(row: tuple):
    return tuple(_sort_key(v) for v in row)


def values_equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))
    return a == b


def rows_equal(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b))


def multiset_diff(left: list[tuple], right: list[tuple]) -> tuple[list, list]:
    """Rows only in left, rows only in right (multiset semantics, float tolerance)."""
    ls, rs = sorted(left, key=_row_key), sorted(right, key=_row_key)
    if len(ls) == len(rs) and all(rows_equal(a, b) for a, b in zip(ls, rs)):
        return [], []
    unmatched = list(rs)
    only_left = []
    for a in ls:
        for i, b in enumerate(unmatched):
            if rows_equal(a, b):
                del unmatched[i]
                break
        else:
            only_left.append(a)
    return only_left, unmatched


def _order_key_positions(tree: exp.Expression, names: list[str]) -> list[int] | None:
    """Output positions of the top-level ORDER BY keys; None if any key is not an output."""
    order = tree.args.get("order")
    if order is None:
        return []
    lowered = [n.lower() for n in names]
    out = []
    for o in order.expressions:
        e = o.this
        if isinstance(e, exp.Literal) and not e.is_string:
            out.append(int(e.this) - 1)
            continue
        if isinstance(e, exp.Column) and not e.table and e.name.lower() in lowered:
            out.append(lowered.index(e.name.lower()))
            continue
        # an expression that is also a projected output (same text)
        sel = tree.selects if isinstance(tree, exp.Select) else []
        texts = [s.unalias().sql(dialect="spark").lower() for s in sel]
        t = e.sql(dialect="spark").lower()
        if t in texts:
            out.append(texts.index(t))
            continue
        return None
    return out


@dataclass
class Outcome:
    original_sql: str
    rewritten_sql: str
    problems: list[str]

    def report(self) -> str:
        return ("\n".join(self.problems) + f"\n  original:  {self.original_sql}"
                f"\n  rewritten: {self.rewritten_sql}")


def fmt_rows(rows: Iterable[tuple], limit: int = 8) -> str:
    rows = list(rows)
    more = f" ... (+{len(rows) - limit})" if len(rows) > limit else ""
    return "; ".join(repr(r) for r in rows[:limit]) + more


def df_schema(df) -> list[tuple[str, str]]:
    return [(f.name, f.dataType.simpleString()) for f in df.schema.fields]


def diff_rows(tree: exp.Expression, names: list[str], orows: list[tuple],
               rrows: list[tuple]) -> list[str]:
    problems = []
    limited = tree.args.get("limit") is not None
    keys = _order_key_positions(tree, names)
    if len(orows) != len(rrows):
        problems.append(f"row count differs: original {len(orows)} vs rewritten {len(rrows)}")
    if keys:
        okeys = [tuple(r[i] for i in keys) for r in orows]
        rkeys = [tuple(r[i] for i in keys) for r in rrows]
        bad = [i for i, (a, b) in enumerate(zip(okeys, rkeys)) if not rows_equal(a, b)]
        if bad:
            problems.append(f"ORDER BY key sequence differs from row {bad[0]}")
        if limited and orows:
            last = okeys[-1]
            orows = [r for r, k in zip(orows, okeys) if not rows_equal(k, last)]
            rrows = [r for r, k in zip(rrows, rkeys) if not rows_equal(k, last)]
    elif limited and tree.args.get("order") is None:
        orows, rrows = [], []      # LIMIT without ORDER BY: any n rows are right
    only_o, only_r = multiset_diff(orows, rrows)
    if only_o or only_r:
        problems.append(f"rows differ: {len(only_o)} only in original [{fmt_rows(only_o)}], "
                        f"{len(only_r)} only in rewritten [{fmt_rows(only_r)}]")
    return problems


def compare_many(spark, original: str, rewrites: dict[str, str], schemas: dict,
                 current_db: str) -> dict[str, Outcome]:
    """Run the original and every rewrite; label -> Outcome (empty problems: equivalent).

    Statements whose schema equals the original's and which have no top-level ORDER BY run
    as ONE Spark job (tagged UNION ALL) -- each job costs far more than its rows here."""
    spark.sql(f"USE {current_db}")
    orig_sql = translate_sql(original, schemas, current_db)
    tree = sqlglot.parse_one(orig_sql, read="spark")
    odf = spark.sql(orig_sql)
    oschema = df_schema(odf)
    names = [n for n, _ in oschema]
    out: dict[str, Outcome] = {}
    union: list[str] = []
    separate: list[str] = []
    for label, sql in rewrites.items():
        problems = []
        rschema = df_schema(spark.sql(sql))
        if rschema != oschema:
            problems.append(f"schema differs: original {oschema} vs rewritten {rschema}")
        out[label] = Outcome(orig_sql, sql, problems)
        (separate if problems or tree.args.get("order") is not None else union).append(label)
    rows: dict[str, list[tuple]] = {}
    if union:
        parts = [f"SELECT 0 AS dm__side, * FROM ({orig_sql}) dm__q"]
        parts += [f"SELECT {i + 1}, * FROM ({rewrites[lb]}) dm__q{i}" for i, lb in enumerate(union)]
        buckets: dict[int, list[tuple]] = {i: [] for i in range(len(union) + 1)}
        for r in spark.sql(" UNION ALL ".join(parts)).collect():
            buckets[r[0]].append(tuple(r)[1:])
        rows[""] = buckets[0]
        for i, lb in enumerate(union):
            rows[lb] = buckets[i + 1]
    if "" not in rows:
        rows[""] = [tuple(r) for r in odf.collect()]
    for lb in separate:
        rows[lb] = [tuple(r) for r in spark.sql(rewrites[lb]).collect()]
    for lb in rewrites:
        out[lb].problems += diff_rows(tree, names, rows[""], rows[lb])
    return out


def compare(spark, original: str, rewritten: str, schemas: dict, current_db: str) -> Outcome:
    """Run both statements and list every difference (empty list: equivalent)."""
    return compare_many(spark, original, {"rewritten": rewritten}, schemas, current_db)["rewritten"]


# --- many statements in one job ------------------------------------------------------------

_FLOATS = ("double", "float")


def _json_rows(texts: list[str], types: list[str]) -> list[tuple]:
    """Rows written by to_json(struct(*)) back to values: numbers exact (Decimal), then
    float where the column is a float, so the tolerance rule applies as in compare_many."""
    out = []
    for t in texts:
        values = [v for _, v in json.loads(t, parse_float=Decimal, object_pairs_hook=list)]
        out.append(tuple(float(v) if ty in _FLOATS and v is not None else v
                         for v, ty in zip(values, types)))
    return out


def compare_batch(spark, items: dict[str, tuple[str, dict[str, str]]], schemas: dict,
                  current_db: str) -> dict[str, dict[str, Outcome]]:
    """compare_many for many cases at once: key -> (original, {label: rewritten}) gives
    key -> {label: Outcome}. Each Spark job costs seconds on a loaded box whatever its
    size, so the statements of every case whose schemas agree and which has no top-level
    ORDER BY run as ONE job, each row as JSON (one column type for all); the others go
    through compare_many. Same rules: names and types, multiset of rows, LIMIT."""
    spark.sql(f"USE {current_db}")
    out: dict[str, dict[str, Outcome]] = {}
    parts: list[str] = []
    pending: dict[str, tuple] = {}
    for key, (original, rewrites) in items.items():
        orig_sql = translate_sql(original, schemas, current_db)
        tree = sqlglot.parse_one(orig_sql, read="spark")
        oschema = df_schema(spark.sql(orig_sql))
        if tree.args.get("order") is not None or any(
                df_schema(spark.sql(sql)) != oschema for sql in rewrites.values()):
            out[key] = compare_many(spark, original, rewrites, schemas, current_db)
            continue
        pending[key] = (tree, oschema, orig_sql)
        for side, sql in [("", orig_sql)] + list(rewrites.items()):
            parts.append(f"SELECT '{key}' AS dm__k, '{side}' AS dm__side, "
                         f"to_json(struct(*), map('ignoreNullFields', 'false')) AS dm__j "
                         f"FROM ({sql}) dm__q{len(parts)}")
    texts: dict[tuple[str, str], list[str]] = {}
    if parts:
        for r in spark.sql(" UNION ALL ".join(parts)).collect():
            texts.setdefault((r[0], r[1]), []).append(r[2])
    for key, (tree, oschema, orig_sql) in pending.items():
        names, types = [n for n, _ in oschema], [t for _, t in oschema]
        orows = _json_rows(texts.get((key, ""), []), types)
        out[key] = {}
        for label, sql in items[key][1].items():
            rrows = _json_rows(texts.get((key, label), []), types)
            out[key][label] = Outcome(orig_sql, sql, diff_rows(tree, names, orows, rrows))
    return out
