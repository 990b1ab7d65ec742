"""Datetime patterns and string <-> date/timestamp conversions (proxy/serving/patterns.py,
formats.py), served against Spark.

One table written by Spark: instants near day, month and year boundaries (a leap day,
12 AM and 12 PM, fractions, the year 999, a NULL), their dates and epoch seconds, and
string columns each holding the same moments in one pattern. Every query runs in Spark
and through translate(zone=...) + the local engine from the same SQL text, in several
fixed-offset session zones; the columns of one query are many patterns at once, so the
whole module runs a few dozen Spark statements.

  rows     Spark's values (printed as Spark prints them) equal the served ones;
  error    the engine raises, so the query goes to Spark (whose answer or error the
           client gets); for text Spark's parser rejects, Spark raises too (ANSI on);
  refused  translate() says NotServable, and Spark raises its own error.
"""
from __future__ import annotations

import random
from datetime import datetime, timedelta, timezone

import pytest

from proxy.serving.engine import EngineFailure
from proxy.serving.patterns import FORMAT
from proxy.serving.translate import NotServable, translate
from proxy.thrift.rowsets import _as_string
from rewriter.normalize import parse
from tests.support.serving import engine, segmented_table  # noqa: F401 - a fixture

pytestmark = pytest.mark.spark

TABLE = "servpat.t"
MOMENTS = [     # k, wall-clock time in UTC, date, segment
    (1, "2024-02-29 00:00:00", "2024-02-29", "0"),
    (2, "2023-12-31 23:59:59.999999", "2023-12-31", "0"),
    (3, "2024-12-30 12:00:00.5", "2024-12-30", "0"),
    (4, None, None, "0"),
    (5, "0999-03-04 00:05:06.789", "0999-01-01", "1"),
    (6, "2000-01-01 13:07:08.12", "1970-01-01", "1"),
    (7, "1969-12-31 23:59:59.5", "9999-12-31", "1"),
    (8, "2099-07-04 11:59:59.000001", "2000-02-29", "1"),
    (9, "2024-06-01 01:02:03", "2024-06-01", "2"),        # never read
]
# string columns: name -> Spark pattern of its text (Python strftime to write it)
TEXTS = {
    "s_iso": ("yyyy-MM-dd HH:mm:ss", "%Y-%m-%d %H:%M:%S"),
    "s_date": ("yyyy-MM-dd", "%Y-%m-%d"),
    "s_dmy": ("dd/MM/yyyy HH:mm", "%d/%m/%Y %H:%M"),
    "s_compact": ("yyyyMMddHHmmss", "%Y%m%d%H%M%S"),
    "s_frac": ("yyyy-MM-dd HH:mm:ss.SSS", None),
    "s_loose": ("yy-M-d H:m:s", None),
}
COLUMNS = {"k": "int", "ts": "timestamp", "dt": "date", "n": "bigint",
           **{c: "string" for c in TEXTS}, "s_bad": "string"}
# text no pattern of the tests reads: one per row
BAD = {1: "2024-1-5", 2: "2024-02-30", 3: " 2024-01-05", 4: "0000-01-01", 5: "2024-01-05 24:00:00",
       6: "12024-01-05", 7: "2024-01-05T10:00:00", 8: "junk", 9: "x"}
READ = f"(SELECT {', '.join(COLUMNS)} FROM {TABLE} WHERE dm_segment_id IN ('0', '1')) AS m"
ZONES = ["UTC", "+05:30", "-08:00"]


def _wall(text: str) -> datetime:
    return datetime.fromisoformat(text)


def _row(k, ts, dt, seg):
    if ts is None:
        return (k, None, None, None, *([None] * len(TEXTS)), BAD[k], seg)   # NULLs
    w = _wall(ts)
    n = int((w.replace(tzinfo=timezone.utc) - datetime(1970, 1, 1, tzinfo=timezone.utc))
            // timedelta(seconds=1))
    if k == 7:
        n = 253402214400            # 9999-12-31 00:00:00 UTC: the last day Spark prints bare
    texts = []
    for name, (_, fmt) in TEXTS.items():
        if name == "s_frac":
            frac = f"{w.microsecond:06d}"[:3].rstrip("0") or "0"
            texts.append(f"{w.year:04d}-{w:%m-%d %H:%M:%S}.{frac}")
        elif name == "s_loose":        # two-digit years read as 20yy
            texts.append(f"{w.year % 100:02d}-{w.month}-{w.day} {w.hour}:{w.minute}:{w.second}"
                         if 2000 <= w.year <= 2099 else None)
        else:
            texts.append(w.strftime(fmt.replace("%Y", f"{w.year:04d}")))
    return (k, ts, dt, n, *texts, BAD[k], seg)


@pytest.fixture(scope="module")
def served_table():
    def frame(spark):
        spark.conf.set("spark.sql.session.timeZone", "UTC")
        schema = ", ".join(["k INT", "ts STRING", "dt STRING", "n BIGINT",
                            *(f"{c} STRING" for c in TEXTS), "s_bad STRING",
                            "dm_segment_id STRING"])
        df = spark.createDataFrame([_row(*m) for m in MOMENTS], schema)
        return df.selectExpr("k", "CAST(ts AS TIMESTAMP) AS ts", "CAST(dt AS DATE) AS dt", "n",
                             *TEXTS, "s_bad", "dm_segment_id")
    with segmented_table(frame, "servpat") as out:
        try:
            yield out
        finally:
            out[0].conf.set("spark.sql.session.timeZone", "UTC")


def _plan(sql, files, zone):
    return translate(parse(sql), {TABLE: COLUMNS},
                     lambda table, ids: [f for i in ids for f in files[i]], zone)


def _spark(spark, sql, zone):
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        sdf = spark.sql(sql)
        types = [(f.name, f.dataType.simpleString()) for f in sdf.schema.fields]
        rows = sdf.selectExpr(*[f"CAST(`{n}` AS STRING)" for n, _ in types]).collect()
        return types, [tuple(r) for r in rows]
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def _same(spark, files, engine, sql, zone):
    plan = _plan(sql, files, zone)
    types, want = _spark(spark, sql, zone)
    got = [tuple(None if v is None else _as_string(v) for v in r)
           for r in engine.run_blocking(plan)]
    assert list(plan.columns) == types
    names = [n for n, _ in types]
    for w, g in zip(sorted(want, key=repr), sorted(got, key=repr)):
        diff = {n: (a, b) for n, a, b in zip(names, w, g) if a != b}
        assert not diff, f"zone {zone}, row k={w[0]}: (Spark, served) {diff}\n{plan.sql[:2000]}"
    assert len(want) == len(got)


# every letter and count of patterns.FORMAT, literal text, quotes, unicode
FORMATS = [
    "yyyy-MM-dd HH:mm:ss", "y yy yyy yyyy", "M MM MMM MMMM", "d dd D DD DDD",
    "H HH h hh k kk K KK a", "m mm s ss", "S SS SSS SSSS SSSSS SSSSSS SSSSSSS SSSSSSSS SSSSSSSSS",
    "E EE EEE EEEE", "Q QQ QQQ QQQQ", "yyyy-MM-dd'T'HH:mm:ss.SSS", "'it''s' yyyy '' ''''",
    "yyyy年MM月dd日 EEEE", "dd/MM/yy hh:mm a", "'week' D, 'quarter' Q", "yyyyMMddHHmmss",
    "MMM d, yyyy", "'%Y' é ~!@$%^&*()_+=-`|;:,.<>/?", "yyyy%MM'%d'%%dd HH:mm:ss",
]
FORMAT_QUERY = ("SELECT m.k AS k, " + ", ".join(
    f"date_format(m.ts, {p!r}) AS f{i}" if "'" not in p else
    f'date_format(m.ts, "{p}") AS f{i}' for i, p in enumerate(FORMATS)) + " FROM {m}")
FUNCTIONS_QUERY = (
    "SELECT m.k AS k, date_format(m.dt, 'yyyy-MM-dd EEEE HH:mm a') AS a, "
    "date_format(m.s_iso, 'yyyy/MM/dd HH') AS b, date_format(m.s_frac, 'HH:mm:ss.SSSSSS') AS c, "
    "from_unixtime(m.n) AS d, from_unixtime(m.n, 'yyyy-MM-dd hh:mm:ss a') AS e, "
    "from_unixtime(unix_timestamp(m.ts), 'yyyy-MM-dd 00:00:00') AS g_day, "
    "from_unixtime(unix_timestamp(m.ts), 'yyyy-MM-01 00:00:00') AS g_month, "
    "from_unixtime(unix_timestamp(m.ts), 'yyyy-01-01 00:00:00') AS g_year, "
    "from_unixtime(unix_timestamp(m.dt), 'yyyy-MM-dd HH:mm:ss') AS g_date, "
    "unix_timestamp(m.ts) AS u_ts, unix_timestamp(m.dt) AS u_dt, "
    "unix_timestamp(m.ts, 'YYYY') AS u_ignored, to_unix_timestamp(m.ts) AS u2, "
    "CAST(m.ts AS STRING) AS ts_text, date_format(m.ts, 'yyyy-MM') AS looker, "
    "CAST(from_unixtime(unix_timestamp(date_format(m.ts, 'yyyy-MM'), 'yyyy-MM')) AS TIMESTAMP) "
    "AS metabase, from_unixtime(unix_timestamp(m.ts), 'yyyy-MM-dd HH:mm:00') AS g_minute, "
    # Superset's Hive quarter, and dates dates.in_range checked printed without a 2nd check
    "date_format(add_months(trunc(m.ts, 'MM'), -(month(m.ts) - 1) % 3), 'yyyy-MM-dd 00:00:00') "
    "AS g_quarter, date_format(add_months(trunc(m.dt, 'MM'), -(month(m.dt) - 1) % 3), "
    "'yyyy-MM-dd 00:00:00') AS g_quarter_dt, date_format(date_add(m.dt, -1), 'yyyy-MM-dd') AS "
    "c_add, date_format(m.dt - INTERVAL '1' MONTH, 'EEEE, yyyy-MM-dd a') AS c_interval, "
    "date_format(add_months(m.dt, -13), 'yyyy QQQ') AS c_months "
    "FROM {m}")
PARSE_QUERY = (
    "SELECT m.k AS k, to_date(m.s_date, 'yyyy-MM-dd') AS a, to_date(m.s_dmy, 'dd/MM/yyyy HH:mm') AS b, "
    "to_timestamp(m.s_frac, 'yyyy-MM-dd HH:mm:ss.SSS') AS c, unix_timestamp(m.s_iso) AS d, "
    "unix_timestamp(m.s_date, 'yyyy-MM-dd') AS e, to_timestamp(m.s_loose, 'yy-M-d H:m:s') AS f, "
    "to_timestamp(m.s_compact, 'yyyyMMddHHmmss') AS g, CAST(m.s_iso AS TIMESTAMP) AS h, "
    "CAST(m.s_date AS DATE) AS i, CAST(m.s_iso AS DATE) AS j, to_date(m.s_date) AS l, "
    "to_date(m.ts) AS o, to_timestamp(m.dt, 'yyyy') AS p, to_date(m.ts, 'dd') AS r, "
    "to_unix_timestamp(m.s_dmy, 'dd/MM/yyyy HH:mm') AS s, "
    "to_timestamp(m.s_iso, 'yyyy-MM-dd HH:mm:ss') AS t, CAST(m.s_frac AS TIMESTAMP) AS u, "
    "to_timestamp(m.s_frac, 'yyyy-MM-dd HH:mm:ss.SSSSSS') AS v "
    "FROM {m}")
GRAIN_QUERY = (
    "SELECT from_unixtime(unix_timestamp(m.ts), 'yyyy-MM-01 00:00:00') AS g, count(*) AS c, "
    "max(date_format(m.ts, 'yyyy-MM-dd')) AS mx FROM {m} "
    "GROUP BY from_unixtime(unix_timestamp(m.ts), 'yyyy-MM-01 00:00:00')")

# GROUP BY a Hive grain groups by the datetime truncated to its unit (translate.py
# _truncated_keys): every grain at once, then coarse ones alone (rows merge), with HAVING
# and ORDER BY reading the key, and a pattern printing its fields in another order
_HIVE = {u: f"from_unixtime(unix_timestamp(m.ts), '{p}')" for u, p in (
    ("second", "yyyy-MM-dd HH:mm:ss"), ("minute", "yyyy-MM-dd HH:mm:00"),
    ("hour", "yyyy-MM-dd HH:00:00"), ("day", "yyyy-MM-dd 00:00:00"),
    ("month", "yyyy-MM-01 00:00:00"), ("year", "yyyy-01-01 00:00:00"))}
_QUARTER = ("date_format(add_months(trunc(m.ts, 'MM'), -(month(m.ts) - 1) % 3), "
            "'yyyy-MM-dd 00:00:00')")
GRAIN_KEYS_QUERY = (
    "SELECT " + ", ".join(f"{g} AS g_{u}" for u, g in _HIVE.items()) + f", {_QUARTER} AS q, "
    "date_format(m.dt, 'dd/MM/yyyy') AS dmy, count(*) AS c FROM {m} GROUP BY "
    + ", ".join(_HIVE.values()) + f", {_QUARTER}, date_format(m.dt, 'dd/MM/yyyy') "
    "HAVING count(*) > 0 ORDER BY g_second DESC")
GRAIN_COARSE_QUERY = (
    f"SELECT {_HIVE['year']} AS y, count(*) AS c, max({_HIVE['year']}) AS mx, "
    f"min({_HIVE['second']}) AS first FROM {{m}} GROUP BY {_HIVE['year']} "
    f"HAVING {_HIVE['year']} <> '2099-01-01 00:00:00' OR {_HIVE['year']} IS NULL "
    f"ORDER BY {_HIVE['year']}")
GRAIN_QUARTER_QUERY = (
    f"SELECT {_QUARTER} AS q, date_format(m.dt, 'yyyy') AS y, count(*) AS c FROM {{m}} "
    f"GROUP BY {_QUARTER}, date_format(m.dt, 'yyyy') ORDER BY c DESC, q, y LIMIT 5")


def _random_patterns(count: int, seed: int) -> list[str]:
    """Patterns drawn from the served alphabet: every letter at a count Spark accepts,
    separators, and quoted text."""
    rnd = random.Random(seed)
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rnd.randint(1, 6)):
            choice = rnd.random()
            if choice < 0.7:
                letter = rnd.choice(sorted(FORMAT))
                parts.append(letter * rnd.choice(FORMAT[letter]))
            elif choice < 0.9:
                parts.append(rnd.choice(["-", "/", ":", " ", ".", ",", "年", "''"]))
            else:
                parts.append("'" + rnd.choice(["at", "T", "Q", "day", "é"]) + "'")
        pattern = "".join(parts)
        # a letter run split over two parts would be one run of another count
        from proxy.serving.patterns import lex
        try:
            lex(pattern)
            _plan(f'SELECT date_format(m.ts, "{pattern}") AS x FROM {READ}', {"0": ["x"], "1": ["x"]},
                  "UTC")
        except NotServable:
            continue
        out.append(pattern)
    return out


RANDOM = _random_patterns(60, seed=20261127)
RANDOM_QUERY = "SELECT m.k AS k, " + ", ".join(
    f'date_format(m.ts, "{p}") AS r{i}' for i, p in enumerate(RANDOM)) + " FROM {m}"


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize("query", [FORMAT_QUERY, FUNCTIONS_QUERY, PARSE_QUERY, GRAIN_QUERY,
                                   GRAIN_KEYS_QUERY, GRAIN_COARSE_QUERY, GRAIN_QUARTER_QUERY,
                                   RANDOM_QUERY],
                         ids=["format", "functions", "parse", "grain", "grain_keys",
                              "grain_coarse", "grain_quarter", "random"])
def test_served_like_spark(query, zone, served_table, engine):
    spark, files = served_table
    _same(spark, files, engine, query.format(m=READ), zone)


def test_random_patterns_cover_the_alphabet():
    assert len(RANDOM) >= 40
    assert set("".join(RANDOM)) >= set(FORMAT)


# text a pattern does not read: the engine raises (the query goes to Spark); Spark's
# parser raises too (ANSI on)
PARSE_ERRORS = [
    ("to_date(m.s_bad, 'yyyy-MM-dd')", k) for k in (1, 2, 3, 5, 6, 7, 8)
] + [("unix_timestamp(m.s_bad, 'yyyy-MM-dd HH:mm:ss')", k) for k in (5, 7)] \
  + [("to_timestamp(m.s_bad, 'yyyy-MM-dd HH:mm:ss')", 5)]


@pytest.mark.parametrize("expr,k", PARSE_ERRORS)
def test_text_a_pattern_does_not_read_raises_in_both(expr, k, served_table, engine):
    spark, files = served_table
    sql = f"SELECT {expr} AS x FROM {READ} WHERE m.k = {k}"
    with pytest.raises(EngineFailure):
        engine.run_blocking(_plan(sql, files, "UTC"))
    with pytest.raises(Exception, match="CANNOT_PARSE_TIMESTAMP|DATETIME"):
        _spark(spark, sql, "UTC")


# the engine raises where Spark may answer: Spark's value, not a served one
ENGINE_ERRORS = [
    "CAST(m.s_bad AS DATE)", "CAST(m.s_bad AS TIMESTAMP)", "date_format(m.s_bad, 'yyyy')",
    "to_date(m.s_bad, 'yyyy-MM-dd')",       # the year 0 too
]


@pytest.mark.parametrize("expr", ENGINE_ERRORS)
@pytest.mark.parametrize("k", [1, 3, 4, 7, 8])
def test_casts_of_other_shapes_go_to_spark(expr, k, served_table, engine):
    _, files = served_table
    sql = f"SELECT {expr} AS x FROM {READ} WHERE m.k = {k}"
    with pytest.raises(EngineFailure):
        engine.run_blocking(_plan(sql, files, "UTC"))


def test_years_spark_prints_with_a_sign_go_to_spark(served_table, engine):
    """253402300800 is 10000-01-01: Spark prints '+10000-01-01 00:00:00'."""
    spark, files = served_table
    sql = f"SELECT from_unixtime(m.n + 86400) AS x FROM {READ} WHERE m.k = 7"
    with pytest.raises(EngineFailure):
        engine.run_blocking(_plan(sql, files, "UTC"))
    assert _spark(spark, sql, "UTC")[1] == [("+10000-01-01 00:00:00",)]


# patterns Spark 4 rejects: NotServable here, an error there
REJECTED = ["YYYY", "Y-ww", "u", "MMMMM", "ddd", "EEEEE", "aa", "e", "HHH", "DDDD",
            "yyyy#", "{yyyy}", "n", "'unterminated"]


@pytest.mark.parametrize("pattern", REJECTED)
def test_patterns_spark_rejects_are_refused(pattern, served_table):
    spark, files = served_table
    sql = f'SELECT date_format(m.ts, "{pattern}") AS x FROM {READ}'
    with pytest.raises(NotServable, match="datetime pattern"):
        _plan(sql, files, "UTC")
    with pytest.raises(Exception):
        _spark(spark, sql, "UTC")
