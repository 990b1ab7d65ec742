"""Building a coarse datamap from a finer one (docs/stacked.md).

A day rollup of `lineitem` and an hour rollup with the same dimensions and re-aggregable
measures hold the same information at two grains: the day datamap's full build can read
the hour datamap's rows (thousands) instead of the base table (millions). The day
datamap's definition stays over the base table, so the rewriter keeps matching it against
base-table queries; only the SELECT its full build runs changes.

The source is found by the rewriter itself: the coarse datamap's build SELECT is a query
like any other, offered the datamaps over the same base tables that cover exactly the
base segments the build is about to record. When the rewriter proves a finer datamap
answers it (the rules every rewritten query relies on, checked on Spark by
tests/rewriter/test_spark_equivalence.py), the build reads that; otherwise it reads the
base tables as before. Incremental refreshes still read only the base tables' new files,
which is already the cheap path; a load refreshes the finest datamaps first
(Maintenance.after_load) so that a rebuild it forces on a coarser one finds them done.
"""
from __future__ import annotations

import logging
from typing import Callable, Iterable, Mapping, Sequence

from proxy.datamaps.catalog.records import DatamapRecord
from proxy.datamaps.catalog.store import Catalog
from rewriter import rewrite
from rewriter.api import Candidate

log = logging.getLogger("proxy.datamaps")


def finer_source(catalog: Catalog, candidates: Callable[[], Sequence[Candidate]],
                 schemas: Callable[[Iterable[str]], Mapping], rec: DatamapRecord,
                 live: Mapping[str, Sequence[str]]) -> tuple[str, str] | None:
    """(SELECT, "db.name" of the datamap it reads) for a full build of `rec` over base
    segments `live` (table -> ids), or None: read the base tables."""
    defn = rec.definition
    if defn is None or not defn.is_aggregate:
        return None
    offered = []
    for cand in candidates():
        other = cand.definition
        if other.qualified == rec.qualified or set(other.base_tables) != set(defn.base_tables):
            continue
        covered = catalog.covered_base_segments(other.database, other.name)
        if all(set(live.get(t, ())) == covered.get(t, set()) for t in defn.base_tables):
            offered.append(cand)
    if not offered:
        return None
    try:
        res = rewrite(defn.build_sql({}), offered, schemas(defn.base_tables), rec.db)
    except Exception:  # noqa: BLE001 - a rewriter bug costs the optimisation, not the build
        log.warning("datamap %s: finding a finer datamap to build from failed", rec.qualified,
                    exc_info=True)
        return None
    if not res.rewritten or len(res.used) != 1:
        return None
    log.info("datamap %s: full build reads datamap %s", rec.qualified, res.used[0])
    return res.sql, res.used[0]
