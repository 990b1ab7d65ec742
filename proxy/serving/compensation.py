"""Answers compensated with a base table's new files, translated for the local engine (pure:
no I/O; the files, their layout and the byte budget come from the tier through `BaseOf`).

The freshness guard compensates a datamap whose base table got new files since its last
refresh (docs/freshness.md): the rewriter reads the datamap as

    (SELECT <stored columns> FROM db.dm_table_segments WHERE dm_segment_id IN ('0', '3')
     UNION ALL
     SELECT <the definition's build SELECT> FROM
       (SELECT * FROM db.t WHERE _metadata.file_path IN ('file:/w/t/part-9.parquet')) AS t
       GROUP BY ...) AS m

and re-aggregates. Served here: the segments' files and exactly the files the guard's
filter names (never a listing of the table: a file the guard held back, of a load still
committing, is not in the filter and is not read), read as Spark reads them:
  * Parquet: each column cast to the table's declared type;
  * CSV (header and sep options at most): each field as its text with DuckDB's quoting
    off, an empty one NULL; typed when its text is one both engines read alike, else the
    run raises (a quoted or escaped field, `+5`, `NaN`, a row of another width) and Spark
    answers;
  * partition columns (Hive-style `col=value` directories) from the file's path, typed as
    the table declares (`__HIVE_DEFAULT_PARTITION__` is NULL); a value Spark would cast
    otherwise than this module proves (`+5`, `1e3`, a decimal) goes to Spark;
  * other formats (ORC, JSON, ...), Hive-format tables (read through their SerDe): Spark,
    with the reason (BaseTable.problem).
The build SELECT is translated as any other SELECT (its outputs cast to their Spark types);
each output must have the name and the type of the stored column it is unioned with.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from typing import Callable, Sequence

from sqlglot import exp

from proxy.serving.sqltypes import UNSERVED, NotServable, duck_type, lit, q, spark_type

__all__ = ["BaseOf", "BaseTable", "base_read", "column_types", "compensated_union",
           "read_files"]

FILE_PREFIX = "file:"
# the guard's file filter on a data-source table, and on a Hive scan
_FILTER_COLUMN = "_metadata.file_path"
_HIVE_FILTER = "REGEXP_REPLACE(INPUT_FILE_NAME(), '^file://(localhost)?/', 'file:/')"
# paths the guard compensates (its _PLAIN_PATH): no URI escaping to undo
_PLAIN_PATH = re.compile(r"/[A-Za-z0-9/._=+-]+")
DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"
_INTEGRAL_RANGE = {"tinyint": 2**7, "smallint": 2**15, "int": 2**31, "bigint": 2**63}
SERVED_FORMATS = ("parquet", "csv")
# a CSV table's storage properties read as Spark's defaults would be (others: Spark)
_CSV_KEYS = {"header", "sep", "delimiter", "serialization.format"}
# a CSV field read as text exactly as Spark reads it: no quote, escape or line-break
# character (those and quoted fields are parsed by rules not proven equal here)
_CSV_PLAIN = r"[^\"\\\r\n]*"
# the text of a CSV field that DuckDB's CAST and Spark's parser read alike, per type
_CSV_TEXT = {"tinyint": r"-?[0-9]{1,3}", "smallint": r"-?[0-9]{1,5}", "int": r"-?[0-9]{1,10}",
             "bigint": r"-?[0-9]{1,19}", "double": r"-?[0-9]+(\.[0-9]+)?([eE]-?[0-9]{1,3})?",
             "date": r"[0-9]{4}-[0-9]{2}-[0-9]{2}", "boolean": r"(?i)true|false"}


@dataclass(frozen=True)
class BaseTable:
    """What the tier knows of a base table's files (the freshness guard's layout)."""
    name: str                                     # "db.t"
    format: str                                   # the provider: parquet, csv, hive, ...
    columns: tuple[tuple[str, str], ...]          # (name, Spark type), partition columns too
    partitions: tuple[str, ...] = ()              # partition columns, in order
    problem: str | None = None                    # why its files are not read here
    options: tuple[tuple[str, str], ...] = ()     # storage properties (CSV: header, sep)


# (base table, the file URIs the guard's filter names) -> (the table, their local paths);
# raises NotServable (not local, gone, over [serving] max_base_bytes, format)
BaseOf = Callable[[str, Sequence[str]], tuple[BaseTable, Sequence[str]]]


def format_problem(fmt: str, hive: bool, options=()) -> str | None:
    """Why a table of this provider (and storage properties) is not read here, or None."""
    if hive or fmt in ("", "hive"):
        return "a Hive-format table (Spark reads it through its SerDe)"
    if fmt not in SERVED_FORMATS:
        return f"its files are {fmt}, which the local engine does not read as Spark does"
    opts = dict(options)
    if fmt == "csv":
        odd = sorted(k for k in opts if k.lower() not in _CSV_KEYS)
        sep = opts.get("sep", opts.get("delimiter", ","))
        if odd or len(sep) != 1 or sep in "\"\\\r\n" \
                or opts.get("header", "false").lower() not in ("true", "false"):
            return ("a CSV table with options other than header and a one-character sep "
                    f"({', '.join(odd) or 'sep ' + repr(sep)})")
    return None


def filtered_files(sel: exp.Select) -> tuple[str, ...] | None:
    """The file URIs of the guard's filter `SELECT * FROM db.t WHERE <file> IN (...)`,
    or None when `sel` is not one."""
    where = sel.args.get("where")
    if [type(e) for e in sel.expressions] != [exp.Star] or where is None:
        return None
    if any(v not in (None, [], False) for k, v in sel.args.items()
           if k not in ("expressions", "from_", "where")):
        return None
    cond = where.this
    if not isinstance(cond, exp.In) or cond.args.get("query") is not None:
        return None
    if cond.this.sql("spark") not in (_FILTER_COLUMN, _HIVE_FILTER):
        return None
    if not all(isinstance(i, exp.Literal) and i.is_string for i in cond.expressions):
        return None
    return tuple(i.this for i in cond.expressions)


def base_read(sel: exp.Select, table: str, base_of: BaseOf | None,
              zone_problem: str | None) -> tuple[str, dict[str, str]]:
    """A base table's new files (the guard's filter) -> (DuckDB SQL, {column: type}).
    `zone_problem`: why timestamps are not served in this session (None: they are)."""
    files = filtered_files(sel)
    if files is None or base_of is None:
        raise NotServable(f"table {table} is not a datamap table")
    base, paths = base_of(table, files)
    if base.problem:
        raise NotServable(f"new files of {table}: {base.problem}")
    if len(paths) != len(files) or not all(_PLAIN_PATH.fullmatch(p) for p in paths):
        raise NotServable(f"new files of {table}: a path the file filter cannot spell")
    if not paths:
        raise NotServable(f"no new files of {table} in its compensation")
    return read_files(base, paths, zone_problem)


def read_files(base: BaseTable, paths: Sequence[str], zone_problem: str | None
               ) -> tuple[str, dict[str, str]]:
    """Exactly `paths` of `base` (at least one), read as Spark reads them -> (DuckDB SQL,
    {column: type}); a column of a type not served is left out (a query that uses it is
    refused). `zone_problem`: why timestamps are not served in this session (None: they
    are)."""
    table = base.name
    cols = column_types(base, zone_problem)
    parts = [p.lower() for p in base.partitions]
    data = [c for c in cols if c not in parts]
    groups: dict[tuple, list[str]] = {}
    for path in paths:
        groups.setdefault(_partition_values(path, parts, cols, table), []).append(path)
    reader = _read_csv if base.format == "csv" else _read_files
    branches = [reader(files, data, cols, list(zip(parts, values)), dict(base.options))
                for values, files in groups.items()]
    return " UNION ALL ".join(branches), cols


def column_types(base: BaseTable, zone_problem: str | None) -> dict[str, str]:
    """{column: Spark type} of `base`; a column of a type not served is marked UNSERVED
    with why (only a query that uses it is refused)."""
    cols: dict[str, str] = {}
    for name, typ in base.columns:
        try:
            t = spark_type(typ)
            if t == "timestamp" and zone_problem:
                raise NotServable(zone_problem)
        except NotServable as why:
            t = UNSERVED + str(why)
        cols[name.lower()] = t
    return cols


def _read_files(paths: list[str], data: list[str], cols: dict[str, str],
                partitions: list[tuple[str, str]], _options=None) -> str:
    """One partition directory's Parquet files, every column typed as the table says (a
    column the query may not use, of a type not served, is left out)."""
    out = []
    for c in data:
        t = cols[c]
        if not t.startswith(UNSERVED):
            out.append(f"CAST({q(c)} AS {duck_type(t)}) AS {q(c)}")
    out += [f"{value} AS {q(c)}" for c, value in partitions
            if not cols[c].startswith(UNSERVED)]
    listed = ", ".join(lit(p) for p in paths)
    return (f"SELECT {', '.join(out) or 'NULL AS _none'} FROM "
            f"read_parquet([{listed}], union_by_name = true)")


def _read_csv(paths: list[str], data: list[str], cols: dict[str, str],
              partitions: list[tuple[str, str]], options: dict[str, str]) -> str:
    """One partition directory's CSV files: every field read as its text (DuckDB's quoting
    off: a quoted or escaped field, which Spark's parser reads by its own rules, makes the
    run raise and Spark answers), an empty field as NULL (Spark's nullValue ""), then each
    typed as the table says when its text is one both engines read alike, else raised."""
    sep = options.get("sep", options.get("delimiter", ","))
    header = options.get("header", "false").lower() == "true"
    listed = ", ".join(lit(p) for p in paths)
    names = ", ".join(f"{lit(c)}: 'VARCHAR'" for c in data)
    out = [f"{_csv_value(c, cols[c])} AS {q(c)}" for c in data
           if not cols[c].startswith(UNSERVED)]
    out += [f"{value} AS {q(c)}" for c, value in partitions
            if not cols[c].startswith(UNSERVED)]
    return (f"SELECT {', '.join(out) or 'NULL AS _none'} FROM read_csv([{listed}], "
            f"columns = {{{names}}}, header = {str(header).lower()}, delim = {lit(sep)}, "
            "quote = '', escape = '', auto_detect = false, strict_mode = true, "
            "null_padding = false, new_line = '\\n')")


def _csv_value(col: str, typ: str) -> str:
    """A CSV field's text -> the column's value, or an error (Spark answers)."""
    v = q(col)
    fail = f"error({lit(f'CSV field {col} is not read here as Spark reads it')})"
    checks = [f"NOT regexp_full_match({v}, {lit(_CSV_PLAIN)})"]
    if typ == "timestamp":
        raise NotServable(f"a timestamp column ({col}) of a CSV table (Spark parses it in "
                          "the session time zone by its own patterns)")
    m = re.fullmatch(r"decimal\((\d+),(\d+)\)", typ)
    if m:
        p, s = map(int, m.groups())
        whole = f"[0-9]{{1,{p - s}}}" if p > s else "0"
        frac = f"(\\.[0-9]{{1,{s}}})?" if s else ""
        checks.append(f"NOT regexp_full_match({v}, {lit(f'-?{whole}{frac}')})")
    elif typ in _CSV_TEXT:
        checks.append(f"NOT regexp_full_match({v}, {lit(_CSV_TEXT[typ])})")
    elif typ != "string":
        raise NotServable(f"a {typ} column ({col}) of a CSV table")
    value = f"lower({v}) = 'true'" if typ == "boolean" else f"CAST({v} AS {duck_type(typ)})"
    return f"CASE WHEN {v} IS NULL THEN NULL WHEN {' OR '.join(checks)} THEN {fail} " \
           f"ELSE {value} END"


def _partition_values(path: str, parts: list[str], cols: dict[str, str],
                      table: str) -> tuple[str, ...]:
    """The SQL literals of a file's partition values, read from its `col=value`
    directories, typed as the table declares."""
    if not parts:
        return ()
    dirs = path.split("/")[-1 - len(parts):-1]
    values = []
    for col, d in zip(parts, dirs):
        name, eq, raw = d.partition("=")
        if not eq or name.lower() != col:
            raise NotServable(f"file {path} of {table} is not in a {col}=value "
                              "directory (its partition is known to the metastore only)")
        values.append(partition_literal(raw, cols[col], col))
    if len(dirs) != len(parts):
        raise NotServable(f"file {path} of {table} is outside its partition directories")
    return tuple(values)


def partition_literal(raw: str, typ: str, col: str) -> str:
    """A partition directory's value as the typed literal Spark reads it as."""
    if typ.startswith(UNSERVED):
        return "NULL"                    # never read: a query using it is refused
    if raw == DEFAULT_PARTITION:
        return f"CAST(NULL AS {duck_type(typ)})"
    if typ == "string":
        return f"CAST({lit(raw)} AS VARCHAR)"
    if typ in _INTEGRAL_RANGE:
        bound = _INTEGRAL_RANGE[typ]
        if re.fullmatch(r"-?[0-9]{1,19}", raw) and -bound <= int(raw) < bound:
            return f"CAST({int(raw)} AS {duck_type(typ)})"
    elif typ == "date" and re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", raw):
        try:
            date.fromisoformat(raw)
            return f"DATE {lit(raw)}"
        except ValueError:
            pass
    elif typ == "boolean" and raw in ("true", "false"):
        return raw.upper()
    raise NotServable(f"partition value {col}={raw} of type {typ} (Spark's cast of it is "
                      "not proven here)")


def is_compensation(union: exp.Union, tables) -> bool:
    """The guard's compensation: a datamap's segments UNION ALL its build SELECT over a base
    table's new files (not a union of datamap reads). `tables`: the datamap tables."""
    def reads_datamap(sel) -> bool:
        table = sel.args.get("from_").this if isinstance(sel, exp.Select) \
            and sel.args.get("from_") else None
        return isinstance(table, exp.Table) and bool(table.db) \
            and f"{table.db}.{table.name}".lower() in tables
    return reads_datamap(union.this) and isinstance(union.expression, exp.Select) \
        and not reads_datamap(union.expression)


def compensated_union(union: exp.Expression, tables, datamap_read, select
                      ) -> tuple[str, dict[str, str]]:
    """The datamap's segments UNION ALL its build SELECT over the new files -> (DuckDB SQL,
    {column: type}). `tables`: the datamap tables' stored columns; `datamap_read(select)`
    and `select(select, top)`: the translator's."""
    if not isinstance(union, exp.Union) or union.args.get("distinct") \
            or not isinstance(union.this, exp.Select) \
            or not isinstance(union.expression, exp.Select) \
            or any(union.args.get(k) for k in ("order", "limit", "offset", "with_")):
        raise NotServable("a UNION other than a datamap's compensation with new base files")
    segments = union.this
    table = segments.args.get("from_").this if segments.args.get("from_") else None
    if not isinstance(table, exp.Table) or not table.db \
            or f"{table.db}.{table.name}".lower() not in tables:
        raise NotServable("a UNION other than a datamap's compensation with new base files")
    left_sql, cols = datamap_read(segments)
    right_sql, out = select(union.expression, top=False)
    if len(out) != len(cols) or [n.lower() for n, _ in out] != list(cols):
        raise NotServable("a compensation whose columns are not the datamap's")
    for (name, typ), (_, stored) in zip(out, cols.items()):
        if stored.startswith(UNSERVED):
            raise NotServable(stored[len(UNSERVED):])
        if typ != stored:
            raise NotServable(f"compensation column {name} is {typ}, the datamap's {stored}")
    return f"SELECT * FROM ({left_sql}) UNION ALL SELECT * FROM ({right_sql})", cols
