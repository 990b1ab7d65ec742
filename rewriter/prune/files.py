"""Index datamaps at query time: the files of a table a query provably cannot use.

`prune_files(tree, table, current_db)` looks at every reference to `table` in a parsed
SELECT (CTEs, derived tables, UNION branches, uncorrelated subqueries: each SELECT block
on its own) and, for each one, at the conjuncts of the block's WHERE and of its INNER
JOINs' ON that read only that reference's columns, plus the conjuncts of enclosing blocks
over a plain projection of it (`_pushed`). A file whose statistics prove that no
row makes those conjuncts TRUE (rewriter/prune/values.py) holds no row the reference can
use, so reading the reference as

    (SELECT * FROM <table> WHERE _metadata.file_path NOT IN (<pruned files>)) AS <alias>

(an external table: `SELECT <its fields> FROM <its source table>`)

returns the same rows. NOT IN, not IN: a file added after the indexes were built has no
statistics and is read.

Each reference is rewritten on its own (a self-join's two sides may skip different files).
A reference gets no pruning when its block is a correlated subquery, when it is on the
NULL-extended side of an outer join, or the right side of a semi / anti join (removing its
rows would change which rows are NULL-extended or kept), when the block has LATERAL VIEWs,
PIVOTs, NATURAL or USING joins (columns then resolve in ways this code does not follow), or
when the table node carries a sample, time travel or column aliases. Queries that name
`_metadata`, qualify a column with a database (`db.t.c`, which the derived table's alias
would no longer resolve) or call a function whose values depend on the rows read (`rand`,
`monotonically_increasing_id`, ...) are left alone. A column without a qualifier belongs to the
reference when the table has that column and the block reads the table once (otherwise
Spark resolves it elsewhere or fails as ambiguous, either way the same with or without
pruning). Any exception here means: forward the statement unpruned (the caller logs it).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from rewriter.normalize import DIALECT, conjuncts
from rewriter.prune.filestats import FileStats
from rewriter.prune.values import compile_predicate, possible

FILE_PATH = "_metadata.file_path"
_PLAIN_TABLE_ARGS = {"this", "db", "catalog", "alias"}
MaySkip = Callable[[str, str], bool]
_MARK = "datamap_pruned"            # meta flag on the derived tables written here


@dataclass(frozen=True)
class IndexSpec:
    """One enabled index datamap: which statistics it contributes, for EXPLAIN's counts."""
    name: str
    kind: str                       # 'minmax' | 'bloomfilter'
    columns: tuple[str, ...]        # lower-cased


@dataclass(frozen=True)
class IndexedTable:
    """A table with index datamaps, as pruning needs it. `columns`: its columns in the order
    `SELECT *` returns them, with Spark types (lower-cased names); `read_from`: the table the
    derived table reads (an external table's source table, projected to `columns`; else the
    table itself); `files`: statistics per normalised file path, only of files whose
    statistics still hold (the caller dropped the rest); `shadowed`: the session has a
    temporary view of the table's bare name, which an unqualified reference reads."""
    name: str                       # "db.t", lower-cased
    columns: Mapping[str, str]
    files: Mapping[str, FileStats]
    indexes: Sequence[IndexSpec] = ()
    read_from: str | None = None
    shadowed: bool = False


@dataclass
class Pruned:
    """The rewritten tree and, per index datamap, (files read, files known) summed over the
    references it pruned; `pruned` lists each rewritten reference's skipped files."""
    tree: exp.Expression
    pruned: list[frozenset[str]] = field(default_factory=list)
    by_index: dict[str, tuple[int, int]] = field(default_factory=dict)


def prune_files(tree: exp.Expression, table: IndexedTable, current_db: str,
                may_skip: MaySkip | None = None) -> Pruned | None:
    """A copy of `tree` whose references to `table` skip the files no row of theirs can come
    from, or None when no reference skips any file. `may_skip(table, path)`, asked only of
    files the statistics exclude, vetoes skipping one (the caller's check that the file
    is still the one that was indexed)."""
    if not table.files or _unsafe_query(tree):
        return None
    tree = tree.copy()
    result = Pruned(tree)
    for scope in traverse_scope(tree):
        if not isinstance(scope.expression, exp.Select) or _ours(scope.expression) \
                or _correlated(scope, table):
            continue
        for node, tests in _references(scope, table, current_db):
            skipped = frozenset(p for p, fs in table.files.items()
                                if not all(possible(t, fs) for t in tests)
                                and (may_skip is None or may_skip(table.name, p)))
            if not skipped:
                continue
            _count(result.by_index, table, tests)
            result.pruned.append(skipped)
            node.replace(_derived(node, table, skipped))
    return result if result.pruned else None


# Values that depend on which rows a task reads and in what order: skipping files changes
# them (seeded rand() included), so a statement calling one is sent as written.
_POSITIONAL = frozenset({"rand", "random", "randn", "uuid", "shuffle", "uniform", "randstr",
                         "rand_str", "monotonically_increasing_id", "spark_partition_id",
                         "input_file_block_start", "input_file_block_length"})


def _unsafe_query(tree: exp.Expression) -> bool:
    for node in tree.walk():
        if isinstance(node, (exp.Rand, exp.Randn, exp.Uuid)) or (
                isinstance(node, exp.Func) and (node.name if isinstance(node, exp.Anonymous)
                                                else node.key).lower() in _POSITIONAL):
            return True
    for col in tree.find_all(exp.Column):
        if _ours(col):
            continue
        if col.args.get("db") is not None or col.name.lower() == "_metadata" \
                or col.table.lower() == "_metadata":
            return True
    return False


def _correlated(scope, table: IndexedTable) -> bool:
    """A subquery reading a column of an enclosing block. sqlglot, knowing no schemas,
    takes every unqualified column for an outer one; a column of the table resolves inside
    (Spark looks in the innermost block first), so only the others count."""
    if not scope.is_subquery:
        return False
    inner = {a.lower() for a in scope.sources}
    return any(c.table.lower() not in inner if c.table else c.name.lower() not in table.columns
               for c in scope.external_columns)


def _ours(node: exp.Expression) -> bool:
    """Part of a derived table an earlier prune_files call wrote."""
    while node is not None:
        if node.meta.get(_MARK):
            return True
        node = node.parent
    return False


def _references(scope, table: IndexedTable, current_db: str):
    """(table node, compiled tests) for each reference to `table` in this block that may be
    pruned, with at least one test."""
    select = scope.expression
    joins = select.args.get("joins") or []
    if select.args.get("laterals") or any(
            j.args.get("using") or (j.method or "").upper() == "NATURAL" for j in joins):
        return []
    sources = [select.args["from_"].this] if select.args.get("from_") else []
    sources += [j.this for j in joins]
    excluded: set[int] = set()          # positions on a NULL-extended / semi-join side
    for i, j in enumerate(joins, start=1):
        side, kind = (j.side or "").upper(), (j.kind or "").upper()
        if side == "FULL":
            excluded.update(range(i + 1))
        elif side == "RIGHT":
            excluded.update(range(i))
        elif side == "LEFT" or kind in ("SEMI", "ANTI"):
            excluded.add(i)
    mine = [(i, s) for i, s in enumerate(sources) if isinstance(s, exp.Table)
            and scope.sources.get(s.alias_or_name) is s       # not a CTE of that name
            and _reads_table(s, table, current_db)]
    if not mine or any(s.args.get("pivots") for s in sources):
        return []
    aliases = [s.alias_or_name.lower() for s in sources]
    predicates = _own_predicates(select) + _pushed(scope, table, current_db)
    out = []
    for i, node in mine:
        if i in excluded or set(k for k, v in node.args.items() if v) - _PLAIN_TABLE_ARGS \
                or (node.args.get("alias") and node.args["alias"].columns) \
                or aliases.count(aliases[i]) > 1:
            continue
        name_of = _resolver(aliases[i], table.columns, unqualified_ok=len(mine) == 1)
        tests = [t for t in (_compile(p, table.columns, name_of) for p in predicates)
                 if t is not None]
        if tests:
            out.append((node, tests))
    return out


def _own_predicates(select: exp.Select) -> list[exp.Expression]:
    """The conjuncts of the block's WHERE and of its INNER JOINs' ON."""
    where = select.args.get("where")
    predicates = conjuncts(where.this if where is not None else None)
    for j in select.args.get("joins") or []:
        if not j.side and (j.kind or "").upper() in ("", "INNER") and j.args.get("on"):
            predicates += conjuncts(j.args["on"])
    return predicates


_BLOCKING = ("joins", "group", "having", "limit", "offset", "distinct", "qualify", "laterals",
             "windows", "pivots")


def _pushed(scope, table: IndexedTable, current_db: str) -> list[exp.Expression]:
    """Conjuncts of enclosing blocks over this derived table's columns, spelled over the
    block's one source (`SELECT * FROM (SELECT a, b AS c FROM t) x WHERE x.c = 5` gives
    `t.b = 5` to t's block). Only through a plain projection of one source (no join,
    aggregate, window, DISTINCT, LIMIT: each of its rows is one row of the source), and
    only from a parent that does not NULL-extend it: then a source row failing the
    conjunct yields no row the parent keeps. BI tools' wrappers and the datamap rewrite's
    `(SELECT cols FROM storage WHERE dm_segment_id IN (...)) alias` are such blocks."""
    select, parent = scope.expression, scope.parent
    if not scope.is_derived_table or parent is None or not isinstance(select, exp.Select) \
            or not isinstance(parent.expression, exp.Select) \
            or any(select.args.get(k) for k in _BLOCKING) or not select.args.get("from_") \
            or select.find(exp.AggFunc, exp.Window) is not None:
        return []
    source = select.args["from_"].this
    if not isinstance(source, (exp.Table, exp.Subquery)) or source.args.get("pivots"):
        return []
    inner_alias = source.alias_or_name
    mapping = _outputs(select, _columns_of_source(scope, source, table, current_db))
    derived = select.parent
    if not isinstance(derived, exp.Subquery) or derived.args.get("pivots") or (
            derived.args.get("alias") and derived.args["alias"].columns):
        return []                       # `AS x(a, b)` renames the outputs
    psel = parent.expression
    psources = [psel.args["from_"].this] if psel.args.get("from_") else []
    psources += [j.this for j in psel.args.get("joins") or []]
    if not any(s is derived for s in psources) or psel.args.get("laterals") or any(
            j.args.get("using") or (j.method or "").upper() == "NATURAL"
            for j in psel.args.get("joins") or []):
        return []
    position = next(i for i, s in enumerate(psources) if s is derived)
    for i, j in enumerate(psel.args.get("joins") or [], start=1):
        side, kind = (j.side or "").upper(), (j.kind or "").upper()
        if side == "FULL" or (side == "RIGHT" and position < i) or (
                (side == "LEFT" or kind in ("SEMI", "ANTI")) and position == i):
            return []
    alias = derived.alias_or_name.lower()
    if [s.alias_or_name.lower() for s in psources].count(alias) > 1:
        return []
    out = []
    for p in _own_predicates(psel) + _pushed(parent, table, current_db):
        cols = list(p.find_all(exp.Column))
        if not cols or p.find(exp.Select, exp.Subquery) is not None or any(
                c.name.lower() not in mapping or c.table.lower() not in ("", alias)
                or (not c.table and len(psources) > 1) for c in cols):
            continue
        p = p.copy()
        for c in p.find_all(exp.Column):
            c.replace(exp.column(mapping[c.name.lower()], table=inner_alias))
        out.append(p)
    return out


def _columns_of_source(scope, source, table: IndexedTable, current_db: str) -> list[str]:
    if isinstance(source, exp.Table):
        return list(table.columns) if _reads_table(source, table, current_db) else []
    inner = scope.sources.get(source.alias_or_name)
    expression = getattr(inner, "expression", None)
    return [n.lower() for n in expression.named_selects] \
        if isinstance(expression, exp.Select) else []


def _outputs(select: exp.Select, source_columns: list[str]) -> dict[str, str]:
    """The block's output names that are a column of its source, and that column."""
    out: dict[str, str] = {}
    for item in select.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(item, exp.Star) or (isinstance(item, exp.Column)
                                          and isinstance(item.this, exp.Star)):
            out.update({c: c for c in source_columns})
        elif isinstance(inner, exp.Column) and inner.name.lower() in source_columns:
            out[item.alias_or_name.lower()] = inner.name.lower()
    return out


def _full_name(node: exp.Table, current_db: str) -> str | None:
    catalog = node.catalog.lower()
    if catalog and catalog != "spark_catalog":
        return None
    return f"{(node.db or current_db).lower()}.{node.name.lower()}"


def _reads_table(node: exp.Table, table: IndexedTable, current_db: str) -> bool:
    if table.shadowed and not node.db:
        return False                    # Spark reads the temporary view of that name
    return _full_name(node, current_db) == table.name


def _resolver(alias: str, columns: Mapping[str, str], unqualified_ok: bool):
    def name_of(col: exp.Column) -> str | None:
        name = col.name.lower()
        if name not in columns:
            return None
        qualifier = col.table.lower()
        if qualifier:
            return name if qualifier == alias else None
        return name if unqualified_ok else None
    return name_of


def _compile(predicate: exp.Expression, columns: Mapping[str, str], name_of):
    """A conjunct that reads only this reference's columns (and no subquery), compiled."""
    if predicate.find(exp.Select, exp.Subquery) is not None:
        return None
    cols = list(predicate.find_all(exp.Column))
    if not cols or any(name_of(c) is None for c in cols):
        return None
    return compile_predicate(predicate, columns, name_of)


def _count(by_index: dict[str, tuple[int, int]], table: IndexedTable, tests) -> None:
    """Per index datamap: the files this reference would read by that index's statistics
    alone, of the files known (EXPLAIN's `Pruned by index datamap x: 3 of 40 files`)."""
    used = {c for t in tests for c in _columns_of(t)}
    for spec in table.indexes:
        minmax = spec.kind == "minmax"
        cols = frozenset(spec.columns)
        if not used & cols:
            continue                    # it cannot have pruned anything
        read = sum(1 for fs in table.files.values()
                   if all(possible(t, fs, minmax, not minmax, cols) for t in tests))
        if read < len(table.files):
            before = by_index.get(spec.name, (0, 0))
            by_index[spec.name] = (before[0] + read, before[1] + len(table.files))


def _columns_of(test) -> set[str]:
    if test[0] in ("and", "or"):
        return {c for t in test[1] for c in _columns_of(t)}
    return {test[1]}


def _derived(node: exp.Table, table: IndexedTable, skipped: frozenset[str]) -> exp.Subquery:
    source = exp.to_table(table.read_from or table.name, dialect=DIALECT)
    for part in ("catalog", "db", "this"):
        ident = source.args.get(part)
        if ident is not None:
            ident.set("quoted", True)
    # `*` of the table itself: its columns as it spells them (`columns` are lower-cased,
    # and `SELECT *` of the reference must keep answering `Id`, not `id`)
    projection = [exp.column(c, quoted=True) for c in table.columns] if table.read_from \
        else [exp.Star()]
    inner = exp.select(*projection).from_(source).where(
        exp.Not(this=exp.In(this=exp.column("file_path", table="_metadata"),
                            expressions=[exp.Literal.string(p) for p in sorted(skipped)])))
    alias = node.args.get("alias")
    alias = alias.copy() if alias is not None else exp.TableAlias(
        this=exp.to_identifier(node.name, quoted=True))
    derived = exp.Subquery(this=inner, alias=alias)
    derived.meta[_MARK] = True
    return derived


def prune_sql(sql_tree: exp.Expression, tables: Sequence[IndexedTable], current_db: str,
              may_skip: MaySkip | None = None) -> tuple[str, dict[str, tuple[int, int]]] | None:
    """Every table in turn; the SQL to send and the per-index counts, or None (unchanged)."""
    counts: dict[str, tuple[int, int]] = {}
    tree, changed = sql_tree, False
    for table in tables:
        done = prune_files(tree, table, current_db, may_skip)
        if done is None:
            continue
        tree, changed = done.tree, True
        for name, (read, known) in done.by_index.items():
            counts[f"{table.name.split('.')[0]}.{name}"] = (read, known)
    return (tree.sql(dialect=DIALECT), counts) if changed else None


def referenced_tables(tree: exp.Expression, current_db: str) -> list[str]:
    """"db.t" of every table the statement reads (CTE names excluded), in order, once."""
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    out: list[str] = []
    for node in tree.find_all(exp.Table):
        if not node.name or (not node.db and node.name.lower() in ctes):
            continue
        name = _full_name(node, current_db)
        if name is not None and name not in out:
            out.append(name)
    return out
