"""Timing one statement at the client and comparing two answers' rows, for the benches
that compare modes (bench/serving.py, bench/external.py)."""
from __future__ import annotations

import math
import time


def timed(cur, sql: str) -> tuple[float, list]:
    t0 = time.perf_counter()
    cur.execute(sql)
    rows = cur.fetchall()
    return (time.perf_counter() - t0) * 1000, rows


def sort_key(row) -> tuple:
    return tuple((1, f"{v:.6g}") if isinstance(v, float) else (0, str(v)) for v in row)


def same_rows(a: list, b: list, ordered: bool) -> str | None:
    """None when equal; else what differs first."""
    if len(a) != len(b):
        return f"{len(a)} rows vs {len(b)}"
    if not ordered:
        a, b = sorted(a, key=sort_key), sorted(b, key=sort_key)
    for i, (ra, rb) in enumerate(zip(a, b)):
        if len(ra) != len(rb):
            return f"row {i}: {len(ra)} columns vs {len(rb)}"
        for x, y in zip(ra, rb):
            if isinstance(x, float) and isinstance(y, float):
                if not (x == y or math.isclose(x, y, rel_tol=1e-9)
                        or (math.isnan(x) and math.isnan(y))):
                    return f"row {i}: {ra!r} vs {rb!r}"
            elif type(x) is not type(y) or x != y:
                return f"row {i}: {ra!r} vs {rb!r}"
    return None
