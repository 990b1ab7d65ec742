"""Timing one statement at the client and comparing two answers' rows, for the benches
that compare modes (bench/serving.py, bench/external.py)."""
from __future__ import annotations

import math
import re
import time
from collections import Counter


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


def tied_at_limit(ordered: list, other: list, sql: str) -> bool:
    """True when `other` differs from `ordered` (Spark's answer, in its order) only in which
    rows tying with the last one made it under the statement's LIMIT: a statement ending in
    `ORDER BY <position> ... LIMIT n`, whose rows either answer has and the other lacks
    all equal the last row in that column. Any such choice is an answer Spark may give.
    Other statements (an ORDER BY on names or expressions) are not judged: False."""
    tail = re.search(r"\border\s+by\s+(\d+)\b[^()]*?\blimit\s+(\d+)\s*;?\s*$", sql,
                     re.IGNORECASE)
    if not ordered or tail is None or len(ordered) != int(tail.group(2)) \
            or len(other) != len(ordered):
        return False
    i = int(tail.group(1)) - 1
    left = Counter(map(sort_key, ordered))
    left.subtract(map(sort_key, other))
    only = [k for k, n in left.items() if n != 0]
    last = sort_key(ordered[-1])
    return bool(only) and 0 <= i < len(last) and all(k[i] == last[i] for k in only)
