"""The datamap advisor's planner: which datamaps would answer the most base-table time.

Input: the workload folded per shape (workload.fold), the base tables' schemas, and
`Sizes` (row counts and estimated distinct counts from sampled statistics; the proxy's
come from pipeline/stats.py). Steps:
  1. every shape forwarded for a reason a datamap may fix gets a Profile (profile.py):
     its join graph, what it groups and filters by, its aggregates;
  2. shapes are grouped by join graph; in each group the lattice nodes are the shapes'
     grouping sets and their unions (a union answers every shape below it). A node whose
     estimated rows come close to the base table's (NO_GAIN) saves nothing and is dropped,
     and so is every node above it (rows only grow upwards);
  3. HRU's greedy choice (Harinarayan, Rajaraman, Ullman 1996) with measured time as the
     benefit: a shape answered from a node of r rows instead of its current source of R
     rows is taken to cost r/R of the time it took, so a node's benefit is the sum over
     the shapes it covers of seconds x (current fraction - its fraction);
  4. a node is never believed: before it is chosen, its definition is compiled and the
     real rewriter (DatamapIndex) is asked about each covered shape's representative
     statement; only the shapes it answers count (lazy greedy: the node goes back into
     the heap with its checked benefit if another now beats it).
What-if (`replay`) asks the same rewriter with the candidate added to the current datamaps.
"""
from __future__ import annotations

import hashlib
import heapq
import itertools
import re
from dataclasses import dataclass, field
from typing import Protocol

from rewriter.advise.profile import Graph, Profile, definition_sql, profile
from rewriter.advise.workload import Shape
from rewriter.api import Candidate, DatamapDefinitionError
from rewriter.index import DatamapIndex, compile_datamap

NO_GAIN = 0.5                 # a node over this share of the base rows is not worth building
UNKNOWN_FRACTION = 0.1        # a node's share of the base rows when no statistics are known
MAX_NODES = 256               # lattice nodes per join graph (unions beyond are not formed)
MIN_SHARE = 0.01              # a suggestion saving less of the fixable time is noise


class Sizes(Protocol):
    def rows(self, table: str) -> int | None: ...

    def distinct(self, table: str, alias: str, exprs: frozenset[str]) -> int | None:
        """Estimated distinct combinations of `exprs` (SQL over `alias`.column) in table."""


class FixedSizes:
    """Sizes from given numbers (synthetic workloads, benchmarks): distinct counts of single
    expressions by their SQL or their column name, multiplied for a combination."""

    def __init__(self, rows: dict[str, int], ndv: dict[str, int], default: int = 100):
        self._rows, self._ndv, self._default = rows, ndv, default

    def rows(self, table: str) -> int | None:
        return self._rows.get(table)

    def distinct(self, table: str, alias: str, exprs: frozenset[str]) -> int | None:
        n = 1
        for e in exprs:
            n *= self._ndv.get(e, self._ndv.get(e.split(".")[-1], self._default))
        return n


@dataclass
class Proposal:
    kind: str                              # create | extend
    name: str                              # bare datamap name
    database: str
    select_sql: str
    shapes: list[Shape]                    # the shapes the rewriter answers from it
    est_rows: int | None
    est_saving_s: float
    replaces: str | None = None            # extend: the datamap "db.name" it replaces
    added: tuple[str, ...] = ()            # extend: what it adds

    @property
    def queries(self) -> int:
        return sum(s.base_count for s in self.shapes)

    @property
    def base_seconds(self) -> float:
        return sum(s.base_seconds for s in self.shapes)


@dataclass
class _Node:
    graph: Graph
    dims: frozenset[str]
    rows: int | None
    base_rows: int | None
    covered: list[tuple[Shape, Profile]] = field(default_factory=list)
    checked: bool = False
    name: str = ""
    select_sql: str = ""
    dim_sql: dict[str, str] = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        if self.rows is None or not self.base_rows:
            return UNKNOWN_FRACTION
        return min(1.0, self.rows / self.base_rows)


def profiles(shapes: list[Shape], schemas, existing: list[Candidate] = ()
             ) -> tuple[list[tuple[Shape, Profile]], dict[str, str]]:
    """Profiles of the fixable shapes the current datamaps (`existing`) do not answer now
    (the log may predate one); and why each other shape has none (by hash)."""
    out, why = [], {}
    index = DatamapIndex(list(existing), schemas) if existing else None
    for sh in shapes:
        if not sh.fixable or not sh.base_count:
            continue
        if index is not None and index.rewrite(sh.statement, sh.current_db).used:
            why[sh.shape_hash] = "answered by a current datamap"
            continue
        p = profile(sh.statement, sh.current_db, schemas)
        if isinstance(p, str):
            why[sh.shape_hash] = p
        else:
            out.append((sh, p))
    return out, why


def estimate_rows(graph: Graph, dims: dict[str, str], dim_columns: dict[str, frozenset[str]],
                  sizes: Sizes) -> tuple[int | None, int | None]:
    """(estimated rows of a datamap grouping `graph` by `dims`, rows of its largest table)."""
    base = [sizes.rows(t) for t in graph.tables]
    base_rows = None if any(b is None for b in base) else max(base)
    plain = {k for k in dims if len(dim_columns[k]) == 1 and k in dim_columns[k]}
    covered = set().union(*(dim_columns[k] for k in plain)) if plain else set()
    per_table: dict[str, set[str]] = {}
    for k, sql in dims.items():
        cols = dim_columns[k]
        if k not in plain and cols <= covered:
            continue                      # derived from stored columns: adds no rows
        tabs = {c.rsplit(".", 1)[0] for c in cols}
        if len(tabs) == 1:
            per_table.setdefault(tabs.pop(), set()).add(sql)
        else:
            for c in cols:
                per_table.setdefault(c.rsplit(".", 1)[0], set()).add(
                    ".".join(c.split(".")[-2:]))
    est = 1
    for t, exprs in per_table.items():
        n = sizes.distinct(t, t.split(".", 1)[1], frozenset(exprs))
        if n is None:
            return None, base_rows
        est *= max(1, n)
    if base_rows is not None:
        est = min(est, base_rows)
    return est, base_rows


def minimal_dims(dims: dict[str, str], dim_columns: dict[str, frozenset[str]]) -> dict[str, str]:
    """Drop grouping expressions computable from stored plain columns (the rewriter derives
    `date_trunc('MONTH', d)` from a stored `d`)."""
    plain = {k for k in dims if len(dim_columns[k]) == 1 and k in dim_columns[k]}
    stored = set().union(*(dim_columns[k] for k in plain)) if plain else set()
    return {k: v for k, v in dims.items() if k in plain or not dim_columns[k] <= stored}


def datamap_name(graph: Graph, dims: dict[str, str], taken: set[str]) -> str:
    """`sales_by_region_month`-like, unique among `taken` ("db.name")."""
    words = []
    for sql in sorted(dims.values()):
        w = re.sub(r"[^a-z0-9]+", "_", sql.lower().split(".")[-1]).strip("_")
        if w and w not in words:
            words.append(w)
    base = graph.tables[0].split(".", 1)[1] + ("_by_" + "_".join(words[:3]) if words else "_total")
    if len(words) > 3:
        base += "_" + hashlib.blake2b("|".join(words).encode(), digest_size=3).hexdigest()
    base = base[:60]
    name, n = base, 2
    while f"{graph.database}.{name}" in taken:
        name, n = f"{base}_{n}", n + 1
    return name


def answered(name: str, database: str, select_sql: str, shapes, schemas,
             others: list[Candidate] = (), rows: int | None = None) -> tuple[list, str | None]:
    """The shapes the real rewriter answers from this definition (with `others` also
    offered); and the compile error when it does not compile."""
    try:
        d = compile_datamap(name, select_sql, schemas, database)
    except DatamapDefinitionError as e:
        return [], str(e)
    index = DatamapIndex(list(others) + [Candidate(d, rows=rows)], schemas)
    out = []
    for sh in shapes:
        res = index.rewrite(sh.statement, sh.current_db)
        if d.qualified in res.used:
            out.append(sh)
    return out, None


def plan(shapes: list[Shape], schemas, sizes: Sizes, max_suggestions: int = 10,
         taken: set[str] = frozenset(), existing: list[Candidate] = ()) -> list[Proposal]:
    """The HRU greedy choice of up to `max_suggestions` new datamaps (module docstring)
    for the shapes no current datamap (`existing`) answers."""
    profs, _ = profiles(shapes, schemas, existing)
    groups: dict[str, list[tuple[Shape, Profile]]] = {}
    for sh, p in profs:
        groups.setdefault(p.graph.key, []).append((sh, p))
    nodes: list[_Node] = []
    for members in groups.values():
        nodes.extend(_lattice(members, sizes))
    current: dict[int, float] = {}            # id(shape) -> fraction of base cost now
    heap = [(-_benefit(n, current), i, n) for i, n in enumerate(nodes)]
    heapq.heapify(heap)
    taken = set(taken)
    chosen: list[Proposal] = []
    tie = itertools.count(len(nodes))
    floor = max(1e-9, MIN_SHARE * sum(sh.base_seconds for sh, _ in profs))
    while heap and len(chosen) < max_suggestions:
        neg, _, node = heapq.heappop(heap)
        benefit = _benefit(node, current)
        if benefit < floor:
            continue
        if benefit < -neg - 1e-9 or not node.checked:
            if not node.checked:
                _check(node, schemas, taken)
                benefit = _benefit(node, current)
            if benefit >= floor:
                heapq.heappush(heap, (-benefit, next(tie), node))
            continue
        if f"{node.graph.database}.{node.name}" in taken:    # another node took the name
            node.name = datamap_name(node.graph, node.dim_sql, taken)
        taken.add(f"{node.graph.database}.{node.name}")
        for sh, _p in node.covered:
            current[id(sh)] = min(current.get(id(sh), 1.0), node.fraction)
        chosen.append(Proposal("create", node.name, node.graph.database, node.select_sql,
                               [sh for sh, _ in node.covered], node.rows, benefit))
    return chosen


def _lattice(members: list[tuple[Shape, Profile]], sizes: Sizes) -> list[_Node]:
    graph = members[0][1].graph
    dims: dict[str, str] = {}
    cols: dict[str, frozenset[str]] = {}
    for _, p in members:
        dims.update(p.dims)
        cols.update(p.dim_columns)
    memo: dict[frozenset[str], _Node | None] = {}

    def node(keys: frozenset[str]) -> _Node | None:
        if keys not in memo:
            rows, base = estimate_rows(graph, {k: dims[k] for k in keys}, cols, sizes)
            n = _Node(graph, keys, rows, base)
            memo[keys] = None if n.fraction > NO_GAIN else n
        return memo[keys]

    level = {frozenset(p.dims) for _, p in members}
    alive = {k: n for k in level if (n := node(k)) is not None}
    frontier = list(alive)
    while frontier and len(alive) < MAX_NODES:
        new = []
        for a, b in itertools.combinations(list(alive), 2):
            u = a | b
            if u in memo or len(alive) + len(new) >= MAX_NODES:
                continue
            n = node(u)
            if n is not None:
                new.append(u)
        for u in new:
            alive[u] = memo[u]
        frontier = new
    for n in alive.values():
        n.covered = [(sh, p) for sh, p in members if frozenset(p.dims) <= n.dims]
    return list(alive.values())


def _benefit(node: _Node, current: dict[int, float]) -> float:
    f = node.fraction
    return sum(sh.base_seconds * max(0.0, current.get(id(sh), 1.0) - f)
               for sh, _ in node.covered)


def _check(node: _Node, schemas, taken: set[str]) -> None:
    """Write the node's definition and keep only the shapes the rewriter answers from it."""
    node.checked = True
    dims: dict[str, str] = {}
    cols: dict[str, frozenset[str]] = {}
    aggs: dict[str, str] = {}
    for _, p in node.covered:
        dims.update({k: p.dims[k] for k in p.dims if k in node.dims})
        cols.update(p.dim_columns)
        aggs.update(p.aggs)
    dims = node.dim_sql = minimal_dims(dims, cols)
    node.name = datamap_name(node.graph, dims, taken)
    node.select_sql = definition_sql(node.graph, dims, aggs)
    ok, _err = answered(node.name, node.graph.database, node.select_sql,
                        [sh for sh, _ in node.covered], schemas, rows=node.rows)
    keep = {id(sh) for sh in ok}
    node.covered = [(sh, p) for sh, p in node.covered if id(sh) in keep]


@dataclass
class Replay:
    examined: int = 0                      # statements replayed
    hits: int = 0                          # of them the candidate answers
    gained: int = 0                        # of those, forwarded to the base tables today
    gained_seconds: float = 0.0            # the logged time of the gained ones
    examples: list[tuple[Shape, int]] = field(default_factory=list)   # (shape, hits)


def replay(shapes: list[Shape], existing: list[Candidate], candidate: Candidate,
           schemas) -> Replay:
    """Ask the rewriter about every logged shape with `candidate` offered next to the
    current datamaps (nothing is built)."""
    index = DatamapIndex(list(existing) + [candidate], schemas)
    name = candidate.definition.qualified
    out = Replay()
    for sh in shapes:
        out.examined += sh.count
        res = index.rewrite(sh.statement, sh.current_db)
        if name not in res.used:
            continue
        out.hits += sh.count
        out.gained += sh.base_count
        out.gained_seconds += sh.base_seconds
        out.examples.append((sh, sh.count))
    out.examples.sort(key=lambda x: (-x[1], x[0].shape_hash))
    return out
