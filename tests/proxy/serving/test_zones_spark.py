"""Named session time zones and the date functions, served against Spark.

First, the time-zone rules themselves: for every zone the tier serves by name
(proxy/serving/timestamps.py NAMED_ZONES), DuckDB's ICU rules give the JVM's offsets at
each of the JVM's transitions and on every day of the served years, and the transitions
are over two days apart (what the local-to-instant macros rely on).

Then one table of instants around DST transitions (gaps and overlaps of several zones,
half-hour and 45-minute offsets, a skipped day, a midnight gap), dates at month ends, leap
days, year boundaries and the extremes 0001-01-01 / 9999-12-31, written as Parquet by
Spark. For each zone, each query runs in Spark (session time zone set) and through
translate(zone=...) + the local engine from the same SQL text; values are compared as
Spark prints them in that zone (CAST to STRING) against what the proxy prints
(proxy.results), doubles as numbers."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from zoneinfo import ZoneInfo

import pytest

from proxy.serving.engine import EngineFailure
from proxy.serving.timestamps import NAMED_ZONES, SERVED_FROM, SERVED_TO
from proxy.serving.translate import NotServable, translate
from proxy.thrift.rowsets import _as_string
from rewriter.normalize import parse
from tests.support.serving import engine, segmented_table  # noqa: F401 - a fixture

pytestmark = pytest.mark.spark

TABLE = "servzones.t"
COLUMNS = {"k": "int", "ts": "timestamp", "d": "date", "n": "int"}
ZONES = ["America/New_York", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe",
         "Pacific/Apia", "Pacific/Chatham", "America/Santiago", "America/St_Johns", "-08:00"]
# instants (UTC) around each transition of these zones in these years
_STEPS = [timedelta(0), timedelta(seconds=-1), timedelta(minutes=29), timedelta(minutes=-30),
          timedelta(minutes=59, seconds=59, microseconds=500000), timedelta(hours=-1, minutes=-1),
          timedelta(hours=2, minutes=15)]
DATES = ["2024-02-29", "2023-12-31", "2024-01-01", "2024-01-31", "2024-03-31", "2024-11-03",
         "2024-03-10", "0001-01-01", "9999-12-31", "2011-12-30", "1900-01-01", None,
         "2021-01-03", "2020-12-31", "2024-09-08", "2024-04-30", "2023-02-28", "2099-12-31"]
NS = [0, 1, -1, 31, -30, 366, None, 12, -13, 400, 2, -2, 7, -7, 59, 1000, -1000, 0]


def _transitions() -> list[datetime]:
    out = []
    for zone in ZONES[:-1]:
        z = ZoneInfo(zone)
        for year in (2011, 2024):
            t = datetime(year, 1, 1, tzinfo=timezone.utc)
            prev = t.astimezone(z).utcoffset()
            while t.year == year:       # hourly scan: every transition's hour
                t += timedelta(minutes=15)
                off = t.astimezone(z).utcoffset()
                if off != prev:
                    lo = t - timedelta(minutes=15)
                    while t - lo > timedelta(seconds=1):
                        mid = lo + (t - lo) / 2
                        if mid.astimezone(z).utcoffset() == prev:
                            lo = mid
                        else:
                            t = mid
                    out.append(t.replace(microsecond=0, tzinfo=None))
                    prev = off
    return sorted(set(out))


def _rows():
    rows, k = [], 0
    instants = [t + s for t in _transitions() for s in _STEPS]
    instants += [datetime(2024, 2, 29, 23, 59, 59, 999999), datetime(2023, 12, 31, 23, 30),
                 datetime(2024, 12, 31, 12), datetime(2000, 1, 1), datetime(1901, 6, 1, 12)]
    for i, t in enumerate(instants + [None]):
        k += 1
        d = DATES[i % len(DATES)]
        n = NS[i % len(NS)]
        if d in ("0001-01-01", "9999-12-31"):
            n = 0
        rows.append((k, None if t is None else str(t), d, n, str(k % 2)))
    rows.append((k + 1, "1850-06-01 00:00:00", "2024-01-01", 1, "2"))     # outside served years
    rows.append((k + 2, "2100-01-01 00:00:00", "2024-01-01", 1, "2"))
    return rows


READ = f"(SELECT k, ts, d, n FROM {TABLE} WHERE dm_segment_id IN ('0', '1')) AS m"
IN_YEARS = "m.d BETWEEN '1901-01-01' AND '2098-12-31'"
LITERALS = ["2024-03-10 02:30:00", "2024-11-03 01:30:00", "2024-11-03 01:00:00",
            "2024-03-31 02:30:00", "2024-10-27 02:30:00", "2024-10-06 02:15:00",
            "2024-04-07 01:45:00", "2024-09-08 00:00:00", "2024-09-08", "2011-12-30 12:00:00",
            "2024-09-29 02:50:00", "2024-04-07 02:50:00", "2011-12-31"]
ZONED = [   # zone-dependent: run in every zone
    "SELECT m.k AS k, m.ts AS t, CAST(m.ts AS DATE) AS dd, hour(m.ts) AS h, minute(m.ts) AS mi, "
    "second(m.ts) AS s, year(m.ts) AS y, month(m.ts) AS mo, day(m.ts) AS dy, quarter(m.ts) AS q, "
    "dayofweek(m.ts) AS dw, weekday(m.ts) AS wd, dayofyear(m.ts) AS doy, weekofyear(m.ts) AS wy, "
    "EXTRACT(SECOND FROM m.ts) AS es, date_part('DOW_ISO', m.ts) AS di, "
    "EXTRACT(YEAROFWEEK FROM m.ts) AS yw, date_part('doy', m.ts) AS dp, "
    "EXTRACT(hour FROM m.ts) AS eh, last_day(m.ts) AS ld, trunc(m.ts, 'MM') AS tm FROM {m}",
    "SELECT m.k AS k, date_trunc('MICROSECOND', m.ts) AS a, date_trunc('millisecond', m.ts) AS b, "
    "date_trunc('SECOND', m.ts) AS c, date_trunc('MINUTE', m.ts) AS d, "
    "date_trunc('HOUR', m.ts) AS e, date_trunc('DAY', m.ts) AS f, date_trunc('dd', m.ts) AS g, "
    "date_trunc('WEEK', m.ts) AS h, date_trunc('MON', m.ts) AS i, date_trunc('mm', m.ts) AS j, "
    "date_trunc('QUARTER', m.ts) AS l, date_trunc('YEAR', m.ts) AS n, date_trunc('yy', m.ts) AS o, "
    "date_trunc('Month', m.d) AS p, date_trunc('day', m.d) AS r FROM {m} WHERE " + IN_YEARS,
    "SELECT date_trunc('HOUR', m.ts) AS h, count(*) AS c, max(m.ts) AS mx, min(m.ts) AS mn "
    "FROM {m} GROUP BY date_trunc('HOUR', m.ts) ORDER BY h",
    "SELECT date_trunc('DAY', m.ts) AS dd, CAST(m.ts AS DATE) AS d2, count(*) AS c FROM {m} "
    "GROUP BY 1, 2 ORDER BY 1 DESC, 2",
    "SELECT DISTINCT date_trunc('MINUTE', m.ts) AS mi FROM {m} ORDER BY mi",
    "SELECT x.h AS h, count(*) AS c FROM (SELECT date_trunc('HOUR', m.ts) AS h FROM {m}) AS x "
    "GROUP BY x.h",
    "SELECT m.k AS k, " + ", ".join(f"m.ts >= '{t}' AS l{i}" for i, t in enumerate(LITERALS))
    + ", m.ts > CAST(m.d AS TIMESTAMP) AS gt, m.d <= m.ts AS le, CAST(m.d AS TIMESTAMP) AS mid, "
    "m.ts = CAST('2024-11-03 01:30:00' AS TIMESTAMP) AS eq FROM {m} WHERE " + IN_YEARS,
    "SELECT m.k AS k, months_between(m.ts, CAST(m.d AS TIMESTAMP)) AS a, "
    "months_between(m.d, m.ts, false) AS b, months_between(m.ts, m.d, true) AS c, "
    "m.ts + INTERVAL '1' DAY AS p1, m.ts - INTERVAL '2' HOUR AS p2, m.ts + INTERVAL '1' MONTH AS p3, "
    "m.ts - INTERVAL '1' YEAR AS p4, m.d + INTERVAL '3' HOUR AS p5, m.ts + INTERVAL '90' MINUTE AS p6, "
    "m.ts - INTERVAL '49' HOUR AS p7, m.ts + INTERVAL '2' DAYS AS p8 "
    "FROM {m} WHERE " + IN_YEARS,
    # windows and unions over instants: ordered, partitioned and de-duplicated by instant,
    # printed in local time; a literal row's local time read as java.time reads it
    "SELECT m.k AS k, m.ts AS t, lag(m.ts, 1) OVER (ORDER BY m.ts, m.k) AS prev, "
    "rank() OVER (PARTITION BY m.n ORDER BY m.ts DESC) AS r, "
    "max(m.ts) OVER (PARTITION BY m.d) AS mx, count(*) OVER (ORDER BY m.ts) "
    "AS c FROM {m} WHERE " + IN_YEARS + " UNION ALL SELECT -1, "
    "CAST('2024-11-03 01:30:00' AS TIMESTAMP), NULL, 0, NULL, 0 ORDER BY t, k",
    # datetime patterns (proxy/serving/formats.py): printed in local time, parsed to instants
    "SELECT m.k AS k, date_format(m.ts, 'yyyy-MM-dd HH:mm:ss.SSSSSS a E') AS f, "
    "CAST(m.ts AS STRING) AS s, date_format(m.d, 'yyyy-MM-dd HH:mm') AS fd, "
    "unix_timestamp(m.ts) AS u, unix_timestamp(m.d) AS ud, to_date(m.ts) AS td, "
    "from_unixtime(unix_timestamp(m.ts) + m.n * 1800, 'yyyy-MM-dd HH:mm:ss') AS fu, "
    "to_timestamp(CAST(m.d AS STRING), 'yyyy-MM-dd') AS tt, "
    "CAST(CAST(m.ts AS STRING) AS TIMESTAMP) AS rt, "
    "date_format(CAST(m.d AS STRING), 'yyyy-MM-dd HH:mm') AS fs, "
    "to_date(CAST(m.d AS STRING), 'yyyy-MM-dd') AS ds, "
    + ", ".join(f"to_timestamp('{t}', 'yyyy-MM-dd HH:mm:ss') AS p{i}, "
                f"unix_timestamp('{t}', 'yyyy-MM-dd HH:mm:ss') AS u{i}, "
                f"to_date('{t}', 'yyyy-MM-dd HH:mm:ss') AS d{i}"
                for i, t in enumerate(LITERALS) if len(t) > 10)
    + " FROM {m} WHERE " + IN_YEARS,
]
DATED = [   # dates only: one zone
    "SELECT m.k AS k, m.d AS d, date_add(m.d, m.n) AS a, date_sub(m.d, m.n) AS s, "
    "add_months(m.d, m.n) AS am, last_day(m.d) AS ld, trunc(m.d, 'YEAR') AS ty, "
    "trunc(m.d, 'quarter') AS tq, trunc(m.d, 'WEEK') AS tw, trunc(m.d, 'mon') AS tm, "
    "trunc(m.d, 'YY') AS tyy, dayofweek(m.d) AS dw, weekday(m.d) AS wd, dayofyear(m.d) AS dy, "
    "weekofyear(m.d) AS wy, make_date(year(m.d), month(m.d), 1) AS md, "
    "EXTRACT(DAY FROM m.d) AS ed, date_part('YEAROFWEEK', m.d) AS yw, "
    "EXTRACT(DOW FROM m.d) AS ew, day(m.d) AS dd FROM {m}",
    "SELECT m.k AS k, next_day(m.d, 'Mon') AS a, next_day(m.d, 'su') AS b, "
    "next_day(m.d, 'FRIDAY') AS c, m.d + INTERVAL '3' DAY AS p1, m.d - INTERVAL '1' MONTH AS p2, "
    "m.d + INTERVAL '1' YEAR AS p3, make_date(year(m.d), 2, 28) AS md, m.ts + INTERVAL '25' HOUR AS p4 "
    "FROM {m} WHERE m.d BETWEEN '0002-01-01' AND '9999-11-30'",
]
CASES = [(q, z) for q in ZONED for z in ZONES] + [(q, "UTC") for q in DATED]


@pytest.fixture(scope="module")
def served_table():
    def frame(spark):
        spark.conf.set("spark.sql.session.timeZone", "UTC")    # ROWS are UTC times
        df = spark.createDataFrame(_rows(), "k INT, ts STRING, d STRING, n INT, "
                                   "dm_segment_id STRING")
        return df.selectExpr("k", "CAST(ts AS TIMESTAMP) AS ts", "CAST(d AS DATE) AS d", "n",
                             "dm_segment_id")
    from pyspark.sql import SparkSession
    spark = SparkSession.getActiveSession()
    before = spark.conf.get("spark.sql.session.timeZone") if spark else None
    with segmented_table(frame, "servzones") as out:
        try:
            yield out
        finally:
            out[0].conf.set("spark.sql.session.timeZone", before or "UTC")


def _plan(sql, files, zone):
    return translate(parse(sql), {TABLE: COLUMNS},
                     lambda table, ids: [f for i in ids for f in files[i]], zone)


def _spark_rows(spark, sql, zone):
    spark.conf.set("spark.sql.session.timeZone", zone)
    try:
        sdf = spark.sql(sql)
        types = [(f.name, f.dataType.simpleString()) for f in sdf.schema.fields]
        text = sdf.selectExpr(*[f"`{n}`" if t == "double" else f"CAST(`{n}` AS STRING)"
                                for n, t in types])
        return types, [tuple(r) for r in text.collect()]
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


def _text(v):
    return None if v is None or isinstance(v, float) else _as_string(v)


@pytest.mark.parametrize("template, zone", CASES)
def test_dates_and_zones_like_spark(template, zone, served_table, engine):
    spark, files = served_table
    sql = template.format(m=READ)
    plan = _plan(sql, files, zone)
    types, want = _spark_rows(spark, sql, zone)
    got = [tuple(v if isinstance(v, float) else _text(v) for v in r)
           for r in engine.run_blocking(plan)]
    assert list(plan.columns) == types
    assert len(got) == len(want)
    if "ORDER BY" not in sql:
        got, want = sorted(got, key=repr), sorted(want, key=repr)
    diffs = [(g, w) for g, w in zip(got, want) if g != w]
    assert not diffs, f"zone {zone}: {len(diffs)} rows differ, first {diffs[:2]}\n{plan.sql}"


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Kolkata"])
def test_instants_outside_the_served_years_raise_and_spark_answers(zone, served_table, engine):
    _, files = served_table
    read = READ.replace("('0', '1')", "('2')")
    plan = _plan(f"SELECT m.ts AS t FROM {read}", files, zone)
    with pytest.raises(EngineFailure, match="outside 1900-2099"):
        engine.run_blocking(plan)
    plan = _plan(f"SELECT count(*) AS c, max(m.ts) > '2000-01-01' AS b FROM {read}", files, zone)
    assert engine.run_blocking(plan) == [(2, True)]     # instants compared: no conversion
    plan = _plan(f"SELECT date_add(m.d, 3000000) AS a FROM {read}", files, "UTC")
    with pytest.raises(EngineFailure, match="outside years 1-9999"):
        engine.run_blocking(plan)


def test_icu_rules_equal_the_jvms_in_every_served_zone(served_table, engine):
    """At every JVM transition in the served years (the second before and the transition
    itself) and at noon UTC of every day, ICU's offset is the JVM's; transitions are over
    two days apart."""
    spark, _ = served_table
    jvm = spark._jvm
    lo = datetime.fromisoformat(SERVED_FROM)
    hi = datetime.fromisoformat(SERVED_TO)
    epoch = datetime(1970, 1, 1)
    days = [lo + timedelta(days=i, hours=12) for i in range((hi - lo).days)]
    cur = engine._db.cursor()
    problems = []
    for zone in sorted(NAMED_ZONES):
        rules = jvm.java.time.ZoneId.of(zone).getRules()
        instant = jvm.java.time.Instant.parse(SERVED_FROM + "T00:00:00Z")
        points, want = [], []
        last = None
        while True:
            t = rules.nextTransition(instant)
            if t is None or t.toEpochSecond() >= (hi - epoch).total_seconds():
                break
            s = t.toEpochSecond()
            if last is not None and s - last <= 2 * 86400:
                problems.append(f"{zone}: transitions {last} and {s} under two days apart")
            last = s
            points += [epoch + timedelta(seconds=s - 1), epoch + timedelta(seconds=s)]
            want += [t.getOffsetBefore().getTotalSeconds(), t.getOffsetAfter().getTotalSeconds()]
            instant = t.getInstant()
        got = [r[0] for r in cur.execute(
            "SELECT CAST(epoch(spark_tz_off(?, x)) AS BIGINT) FROM unnest(?) t(x)",
            [zone, points]).fetchall()] if points else []
        problems += [f"{zone} at {p}: JVM {w}, ICU {g}" for p, w, g in zip(points, want, got)
                     if w != g][:3]
        # every day: ICU's offset changes only across a JVM transition, to the JVM's offset
        offsets = [r[0] for r in cur.execute(
            "SELECT CAST(epoch(spark_tz_off(?, x)) AS BIGINT) FROM unnest(?) t(x) "
            "ORDER BY x", [zone, days]).fetchall()]
        jvm_at = {}
        for p, w in zip(points[1::2], want[1::2]):
            # the day interval (days[i], days[i + 1]] the transition is in
            jvm_at[(p - lo - timedelta(hours=12, seconds=1)) // timedelta(days=1)] = w
        first = rules.getOffset(jvm.java.time.Instant.parse(days[0].isoformat() + "Z"))
        if offsets and offsets[0] != first.getTotalSeconds():
            problems.append(f"{zone} on {days[0]}: JVM {first.getTotalSeconds()}, ICU {offsets[0]}")
        for i in range(1, len(offsets)):
            if offsets[i] != offsets[i - 1] or (i - 1) in jvm_at:
                if jvm_at.get(i - 1) != offsets[i]:
                    problems.append(f"{zone} between {days[i - 1]} and {days[i]}: ICU "
                                    f"{offsets[i - 1]} -> {offsets[i]}, JVM {jvm_at.get(i - 1)}")
                    break
    assert not problems, problems[:10]


def test_a_zone_not_checked_is_not_served():
    with pytest.raises(NotServable, match="neither a fixed UTC offset nor a named zone"):
        _plan(f"SELECT max(m.ts) AS t FROM {READ}", {"0": ["x"], "1": ["x"]},
              "America/Sao_Paulo")
