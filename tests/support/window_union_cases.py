"""Window functions and unions for tests/proxy/serving/test_shapes_spark.py (its table, its
`{m}` read, its expectations: rows compared as multisets, ordered rows in order, refused).

Edge values of that table: ties in the ORDER BY keys (s, and i = 5 and d = 3.00 twice in
partition b), NULLs in partition keys (k) and ORDER BY keys (s, i, d), -0.0 beside 0.0 and
a NaN in a double key, decimals that average to repeating fractions, int.MaxValue, a
filter that leaves no rows. A function whose answer depends on the order of peers
(row_number, ntile, lag / lead, a ROWS frame) is ordered totally here: Spark's own answer
over ties is whichever order its sort leaves.
"""
from __future__ import annotations

ROWS_, ORDERED, REFUSED = "rows", "ordered", "refused"
TOTAL = "m.d, m.s, m.k"            # a total order of the visible rows

WINDOW_CASES = [
    ("ranking over ties and NULLs: rank, dense_rank, percent_rank, cume_dist",
     "SELECT m.k AS k, m.s AS s, rank() OVER (PARTITION BY m.k ORDER BY m.s) AS r, "
     "dense_rank() OVER (ORDER BY m.s DESC) AS dr, percent_rank() OVER (PARTITION BY m.k "
     "ORDER BY m.s) AS pr, cume_dist() OVER (ORDER BY m.s) AS cd, rank() OVER (ORDER BY "
     "m.s DESC NULLS FIRST, m.i) AS r2 FROM {m}", ROWS_),
    ("row_number, ntile, lag and lead over a total order, with offsets and defaults",
     f"SELECT m.k AS k, m.d AS d, m.s AS s, row_number() OVER (PARTITION BY m.k ORDER BY "
     f"{TOTAL}) AS rn, ntile(3) OVER (ORDER BY {TOTAL}) AS n3, ntile(20) OVER (PARTITION BY "
     f"m.k ORDER BY {TOTAL}) AS n20, lag(m.i) OVER (ORDER BY {TOTAL}) AS lg, "
     f"lag(m.i, 2, 0) OVER (PARTITION BY m.k ORDER BY {TOTAL}) AS lg2, lead(m.s, 1, 'none') "
     f"OVER (ORDER BY {TOTAL}) AS ld, lead(m.d, 3) OVER (ORDER BY m.d DESC, m.s, m.k) AS ld3 "
     "FROM {m}", ROWS_),
    ("aggregates over Spark's default frames: peers included with ORDER BY, the whole "
     "partition without",
     "SELECT m.k AS k, m.s AS s, m.i AS i, sum(m.i) OVER (PARTITION BY m.k ORDER BY m.d) "
     "AS si, count(*) OVER (ORDER BY m.s) AS c, count(m.s) OVER (ORDER BY m.s DESC) AS cs, "
     "min(m.d) OVER (PARTITION BY m.s) AS mn, max(m.s) OVER () AS mx, "
     "avg(m.d) OVER (PARTITION BY m.k) AS ad, avg(m.i) OVER (ORDER BY m.s DESC) AS ai, "
     "count(m.z) OVER () AS cz, sum(m.d) OVER (ORDER BY m.i) AS sd, "
     "sum(m.z) OVER (PARTITION BY m.k) AS sz, avg(m.z) OVER () AS az FROM {m}", ROWS_),
    ("avg of a wide decimal over windows divides as the aggregate does (scale 39)",
     f"SELECT m.k AS k, m.w AS w, avg(m.w) OVER (PARTITION BY m.k) AS ap, avg(m.w) OVER () "
     f"AS aa, avg(m.w) OVER (ORDER BY {TOTAL} ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT "
     f"ROW) AS ar FROM {{m}}", ROWS_),
    ("explicit ROWS frames, an empty frame at the end",
     f"SELECT m.k AS k, m.d AS d, sum(m.i) OVER (ORDER BY {TOTAL} ROWS BETWEEN 1 PRECEDING "
     f"AND 1 FOLLOWING) AS a, count(*) OVER (ORDER BY {TOTAL} ROWS UNBOUNDED PRECEDING) "
     f"AS b, sum(m.d) OVER (PARTITION BY m.k ORDER BY {TOTAL} ROWS BETWEEN CURRENT ROW AND "
     f"UNBOUNDED FOLLOWING) AS c, sum(m.i) OVER (ORDER BY {TOTAL} ROWS BETWEEN 2 FOLLOWING "
     f"AND 3 FOLLOWING) AS e, avg(m.d) OVER (ORDER BY {TOTAL} ROWS BETWEEN 1 PRECEDING AND "
     f"1 FOLLOWING) AS f, min(m.s) OVER (ORDER BY {TOTAL} ROWS BETWEEN 3 PRECEDING AND "
     f"1 PRECEDING) AS g FROM {{m}}", ROWS_),
    ("RANGE frames with int offsets: ties, NULL keys, descending",
     "SELECT m.k AS k, m.i AS i, sum(m.d) OVER (ORDER BY m.i RANGE BETWEEN 2 PRECEDING AND "
     "1 FOLLOWING) AS a, count(*) OVER (ORDER BY m.i DESC RANGE BETWEEN 1 PRECEDING AND "
     "CURRENT ROW) AS b, count(*) OVER (PARTITION BY m.k ORDER BY m.i RANGE BETWEEN CURRENT "
     "ROW AND UNBOUNDED FOLLOWING) AS c, max(m.s) OVER (ORDER BY m.i NULLS LAST RANGE "
     "BETWEEN 3 PRECEDING AND 3 FOLLOWING) AS e FROM {m} WHERE m.i < 100 OR m.i IS NULL",
     ROWS_),
    ("windows over a GROUP BY: rank of a sum, share of the total, running count",
     "SELECT m.k AS k, sum(m.i) AS si, rank() OVER (ORDER BY sum(m.i) DESC) AS r, "
     "sum(sum(m.d)) OVER () AS t, sum(m.d) / sum(sum(m.d)) OVER () AS share, "
     "sum(count(*)) OVER (ORDER BY m.k ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) "
     "AS running, avg(sum(m.d)) OVER (ORDER BY m.k) AS ra, dense_rank() OVER (PARTITION BY "
     "count(*) > 2 ORDER BY max(m.s) DESC) AS dr FROM {m} GROUP BY m.k", ROWS_),
    ("windows over a GROUP BY, ordered by a window output, LIMIT",
     "SELECT m.s AS s, count(*) AS n, rank() OVER (ORDER BY count(*) DESC) AS r, "
     "percent_rank() OVER (ORDER BY count(*)) AS pr FROM {m} GROUP BY m.s "
     "ORDER BY r, s LIMIT 3", ORDERED),
    ("a double key: -0.0 and 0.0 one partition and peers, NaN the largest",
     "SELECT m.x AS x, m.k AS k, rank() OVER (ORDER BY m.x) AS r, count(*) OVER (PARTITION "
     "BY m.x) AS n, dense_rank() OVER (ORDER BY m.x DESC) AS dr, sum(m.i) OVER (ORDER BY "
     "m.x RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS si, min(m.x) OVER "
     "(PARTITION BY m.k) AS mn, max(m.x) OVER (PARTITION BY m.s) AS mx, lag(m.x) OVER "
     f"(ORDER BY {TOTAL}) AS lx FROM {{m}}", ROWS_),
    ("windows over no rows",
     "SELECT m.k AS k, rank() OVER (ORDER BY m.i) AS r, sum(m.d) OVER () AS t FROM {m} "
     "WHERE m.i > 2147483647", ROWS_),
    ("DISTINCT over window outputs",
     "SELECT DISTINCT m.k AS k, count(*) OVER (PARTITION BY m.k) AS n, dense_rank() OVER "
     "(ORDER BY m.k) AS r FROM {m}", ROWS_),
    ("rank() without ORDER BY (Spark rejects it)", "SELECT rank() OVER () AS r FROM {m}",
     REFUSED),
    ("a frame on rank()", "SELECT rank() OVER (ORDER BY m.i ROWS BETWEEN 1 PRECEDING AND "
     "CURRENT ROW) AS r FROM {m}", REFUSED),
    ("a RANGE offset over a decimal key", "SELECT sum(m.i) OVER (ORDER BY m.d RANGE BETWEEN "
     "1 PRECEDING AND CURRENT ROW) AS a FROM {m}", REFUSED),
    ("lag IGNORE NULLS", "SELECT lag(m.i) IGNORE NULLS OVER (ORDER BY m.d) AS a FROM {m}",
     REFUSED),
    ("first_value", "SELECT first_value(m.i) OVER (ORDER BY m.d) AS a FROM {m}", REFUSED),
    ("lag with a default of another type (Spark casts it)",
     "SELECT lag(m.d, 1, 0) OVER (ORDER BY m.i) AS a FROM {m}", REFUSED),
]

UNION_CASES = [
    ("rows of literals: the first branch's names, Spark's widened types, NULLs",
     "SELECT 'A' AS flag, 1 AS n, 1.5 AS d UNION ALL SELECT 'R', 2147483648, 10 "
     "UNION ALL SELECT NULL, -3, NULL", ROWS_),
    ("UNION of literal rows drops repeated rows",
     "SELECT 'A' AS flag, 1 AS n UNION SELECT 'A', 1 UNION SELECT 'B', 1", ROWS_),
    ("UNION of two SELECTs over the datamap: -0.0 and 0.0 one row read as 0.0, NaN one row",
     "SELECT m.k AS k, m.x AS x FROM {m} UNION SELECT m.s, m.x FROM {m}", ROWS_),
    ("UNION ALL keeps every row; int beside decimal widens to decimal(12,2)",
     "SELECT m.i AS v, m.k AS k FROM {m} UNION ALL SELECT m.d, m.s FROM {m}", ROWS_),
    ("int beside double widens to double, int beside bigint to bigint",
     "SELECT m.i AS v, max(m.i) AS n FROM {m} GROUP BY m.i UNION ALL "
     "SELECT m.x, count(*) FROM {m} WHERE m.x = m.x GROUP BY m.x", ROWS_),
    ("a total row under the groups, ORDER BY and LIMIT over the union",
     "SELECT m.k AS k, sum(m.i) AS n FROM {m} GROUP BY m.k UNION ALL "
     "SELECT 'total', sum(m.i) FROM {m} ORDER BY n DESC NULLS LAST, k LIMIT 4", ORDERED),
    ("ORDER BY an ordinal and an expression over the union's names",
     "SELECT m.s AS s, m.i AS i FROM {m} WHERE m.i < 100 UNION ALL SELECT 'lit', 0 "
     "ORDER BY -i, 1", ORDERED),
    ("mixed chain: (a UNION ALL b) UNION c",
     "SELECT m.k AS k FROM {m} UNION ALL SELECT m.k FROM {m} UNION SELECT 'zz'", ROWS_),
    ("a derived table over a union, grouped",
     "SELECT u.k AS k, count(*) AS n, sum(u.v) AS v FROM (SELECT m.k AS k, m.i AS v "
     "FROM {m} UNION ALL SELECT m.s, 1 FROM {m}) AS u GROUP BY u.k", ROWS_),
    ("a union of datamap reads of several segments, as the narrow-window union reads one",
     "SELECT u.k AS k, sum(u.d) AS d, count(u.x) AS nx FROM (SELECT k, s, i, d, x, z "
     "FROM servshapes.t WHERE dm_segment_id IN ('0') UNION ALL SELECT k, s, i, d, x, z "
     "FROM servshapes.t WHERE dm_segment_id = '1') AS u GROUP BY u.k", ROWS_),
    ("a string beside a number", "SELECT m.k AS a FROM {m} UNION ALL SELECT m.i FROM {m}",
     REFUSED),
    ("a decimal beside a double", "SELECT m.d AS a FROM {m} UNION ALL SELECT m.x FROM {m}",
     REFUSED),
    ("a branch over a table that is not a datamap",
     "SELECT m.k AS k FROM {m} UNION ALL SELECT k FROM servshapes.base", REFUSED),
    ("an unnamed column in the first branch",
     "SELECT upper(m.k) FROM {m} UNION ALL SELECT m.s AS s FROM {m}", REFUSED),
    ("INTERSECT", "SELECT m.k AS k FROM {m} INTERSECT SELECT m.s FROM {m}", REFUSED),
]
