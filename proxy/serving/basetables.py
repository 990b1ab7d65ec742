"""Base tables read whole in a served answer (pure: no I/O; the table's files come from the
tier through `TableOf`).

The rewriter reads a base table whole in two shapes:
  * a datamap joined with a table outside its definition (a dimension: `... FROM (datamap
    read) AS m JOIN db.region AS r ON m.k = r.k`), and a compensation's build SELECT,
    which joins the new files of one table with the other tables whole;
  * the narrow-window union: the datamap's rows UNION ALL its build SELECT over the base
    rows outside its window (`SELECT ... FROM db.t AS t WHERE NOT COALESCE(<window>, FALSE)
    GROUP BY ...`, rewriter/narrow.py).
Spark reads every data file of the table as its catalog lists it. Served here: exactly the
files `TableOf` returns, which the tier takes from the freshness guard's listing of the
table at decision time (proxy/serving/newfiles.py: never while a write into it is going on,
only the partitions the metastore lists, within `[serving] max_base_bytes`), read as the
compensation reads new files (proxy/serving/compensation.py read_files: Parquet typed as
declared, CSV only with the options proven there, partition values from the path). A table
of another format, a Hive-format table, an external-format table's view, a table outside
the local file system: Spark, with the reason.
"""
from __future__ import annotations

from typing import Callable, Sequence

from sqlglot import exp

from proxy.serving.compensation import BaseTable, column_types, read_files
from proxy.serving.sqltypes import UNSERVED, NotServable, duck_type, q

__all__ = ["TableOf", "table_relation"]

# "db.t" (or a bare "t" of the session's current database) -> (the table, the local paths of
# its data files now); raises NotServable (layout not known, a write going on, not local,
# over [serving] max_base_bytes)
TableOf = Callable[[str], tuple[BaseTable, Sequence[str]]]


def table_relation(t, rel: exp.Table, scope) -> str:
    """A base table in FROM / JOIN -> `(<read of its files>) AS alias`, its columns in
    `scope` under the alias Spark resolves them by (the alias, else the table's name)."""
    if t.table_of is None:
        raise NotServable("a relation other than a datamap read")
    if rel.catalog:
        raise NotServable(f"table {rel.sql('spark')} named with its catalog")
    # a bare name is the session's current database's (TableOf resolves it): a statement
    # naming one of the session's temporary views is never rewritten (handler.py)
    full = f"{rel.db}.{rel.name}".lower() if rel.db else rel.name.lower()
    if full in t.tables:
        raise NotServable("a datamap read without its segment filter")
    alias_node = rel.args.get("alias")
    if isinstance(alias_node, exp.TableAlias) and alias_node.columns:
        raise NotServable("a relation alias with a column list")
    if rel.args.get("joins") or rel.args.get("laterals") or rel.args.get("pivots") \
            or rel.args.get("version") or rel.args.get("sample"):
        raise NotServable(f"table {full} with a sample, pivot or time travel")
    sql, cols = table_read(t, full)
    alias = (rel.alias or rel.name).lower()
    scope.aliases[alias] = cols
    return f"({sql}) AS {q(alias)}"


def table_read(t, full: str) -> tuple[str, dict[str, str]]:
    """Every data file of base table `full` now -> (DuckDB SQL, {column: Spark type})."""
    base, paths = t.table_of(full)
    if base.problem:
        raise NotServable(f"table {base.name}: {base.problem}")
    if paths:
        return read_files(base, paths, t.zone_problem if t.zone is None else None)
    # no files: a typed empty relation (Spark reads no rows)
    cols = column_types(base, t.zone_problem if t.zone is None else None)
    typed = ", ".join(f"CAST(NULL AS {duck_type(c)}) AS {q(n)}" for n, c in cols.items()
                      if not c.startswith(UNSERVED)) or "NULL AS _none"
    return f"SELECT {typed} WHERE FALSE", cols
