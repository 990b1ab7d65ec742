"""Near misses: "adding column X to datamap Y would have answered N queries (T s)".

For a current datamap Y, the forwarded shapes over Y's exact join graph that Y does not
answer are each short of some grouping expressions and aggregates (their Profile minus
Y's). Shapes short of the same additions are counted together, with every shape whose
additions are a subset. The candidate, Y's definition plus the additions, is checked like
any other (advise.answered: the real rewriter over each shape's representative
statement), and sized (a definition at NO_GAIN of its base rows is no datamap). Per
datamap the checked extension answering the most logged seconds is proposed; it keeps
Y's name (it replaces Y).
"""
from __future__ import annotations

from rewriter.advise.candidates import (NO_GAIN, Proposal, Sizes, answered, estimate_rows,
                                        minimal_dims, profiles)
from rewriter.advise.profile import Profile, definition_sql, profile
from rewriter.advise.workload import Shape
from rewriter.api import Candidate
from rewriter.normalize import parse


def extensions(shapes: list[Shape], existing: list[Candidate], schemas,
               sizes: Sizes) -> list[Proposal]:
    profs, _ = profiles(shapes, schemas, existing)
    out = []
    for cand in existing:
        d = cand.definition
        own = profile(d.qualified_sql or d.select_sql, d.database, schemas)
        if isinstance(own, str) or _filtered(d):
            continue
        missed = [(sh, p) for sh, p in profs if p.graph.key == own.graph.key]
        best = _best(d.name, d.database, own, missed, schemas, sizes)
        if best is not None:
            best.replaces = d.qualified
            out.append(best)
    return out


def _filtered(d) -> bool:
    """A definition with a WHERE keeps only some rows: grouping more finely would not give
    the rows it filters out, so it is not extended (a new datamap is proposed instead)."""
    try:
        return parse(d.qualified_sql or d.select_sql).args.get("where") is not None
    except Exception:  # noqa: BLE001 - it compiled once; be conservative
        return True


def _best(name: str, database: str, own: Profile, missed: list[tuple[Shape, Profile]],
          schemas, sizes: Sizes) -> Proposal | None:
    deltas: dict[tuple[frozenset, frozenset], None] = {}
    for _, p in missed:
        deltas[(frozenset(p.dims.keys() - own.dims.keys()),
                frozenset(p.aggs.keys() - own.aggs.keys()))] = None
    best = None
    for add_dims, add_aggs in deltas:
        covered = [(sh, p) for sh, p in missed
                   if p.dims.keys() - own.dims.keys() <= add_dims
                   and p.aggs.keys() - own.aggs.keys() <= add_aggs]
        dims, cols, aggs = dict(own.dims), dict(own.dim_columns), dict(own.aggs)
        for _, p in covered:
            dims.update({k: v for k, v in p.dims.items() if k in add_dims})
            cols.update(p.dim_columns)
            aggs.update({k: v for k, v in p.aggs.items() if k in add_aggs})
        rows, base = estimate_rows(own.graph, dims, cols, sizes)
        if rows is not None and base and rows > NO_GAIN * base:
            continue
        dims = minimal_dims(dims, cols)
        sql = definition_sql(own.graph, dims, aggs)
        ok, _err = answered(name, database, sql, [sh for sh, _ in covered], schemas, rows=rows)
        if not ok:
            continue
        fraction = rows / base if rows is not None and base else 0.1
        saving = sum(sh.base_seconds for sh in ok) * (1 - min(1.0, fraction))
        if best is None or saving > best.est_saving_s:
            added = tuple(sorted({v for k, v in dims.items() if k in add_dims}
                                 | {v for k, v in aggs.items() if k in add_aggs}))
            best = Proposal("extend", name, database, sql, ok, rows, saving, added=added)
    return best
