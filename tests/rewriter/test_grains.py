"""rewriter/grains.py, pure: which date_format patterns a stored bucket can answer, and
which columns' grains are read off a bucket at all. Whole queries: bi_grains*.yaml."""
from __future__ import annotations

import pytest
import sqlglot

from rewriter import grains
from rewriter.normalize import DIALECT


def _grain(sql: str):
    found = grains.grain_of(sqlglot.parse_one(sql, read=DIALECT))
    return found and (found[0].name, found[1])


@pytest.mark.parametrize("pattern,gran", [
    ("yyyy", "year"), ("yyyy-MM", "month"), ("MM", "month"), ("yyyy-MM-01 00:00:00", "month"),
    ("yyyy-MM-dd", "day"), ("yyyy/MM/dd HH", "hour"), ("yyyy-MM-dd HH:mm", "minute"),
    ("yyyy-MM-dd HH:mm:ss", "second"),
    # refused: names, week-based years, 12-hour clocks, fractions, quoted text
    ("EEE", None), ("MMM yyyy", None), ("Y-ww", None), ("hh a", None),
    ("yyyy-MM-dd HH:mm:ss.SSS", None), ("yyyy \\'Q\\'", None), ("", None), ("YYYY", None), ("yyy", None),
])
def test_date_format_pattern_grain(pattern, gran):
    assert _grain(f"date_format(d, '{pattern}')") == (("d", gran) if gran else None)


@pytest.mark.parametrize("sql,found", [
    ("date_trunc('quarter', CAST(d AS TIMESTAMP))", ("d", "month")),
    ("trunc(d, 'WEEK')", ("d", "week")),
    ("trunc(d, 'DD')", None),                                  # not a trunc() unit in Spark
    ("to_date(d)", ("d", "day")),
    ("to_date(d, 'yyyy-MM-dd')", None),                        # parses text
    ("year(d)", ("d", "year")), ("dayofweek(d)", ("d", "day")),
    ("date_trunc('month', CAST(d AS TIMESTAMP_NTZ))", None),   # wall clock, another type
    ("date_trunc('month', to_timestamp(d))", None),
    ("from_unixtime(unix_timestamp(d), 'yyyy-MM-dd')", ("d", "day")),
    ("year(d + INTERVAL 1 DAY)", None),
])
def test_grain_of(sql, found):
    assert _grain(sql) == found


def test_only_date_and_timestamp_columns_are_read_off_a_bucket():
    node = sqlglot.parse_one("year(d)", read="spark")
    stored = sqlglot.parse_one("b", read="spark")
    assert grains.derive_grain(node, "date", "month", stored).sql("spark") == "YEAR(b)"
    assert grains.derive_grain(node, "timestamp_ntz", "month", stored) is None
    assert grains.derive_grain(node, "string", "month", stored) is None
    assert grains.derive_grain(node, None, "month", stored) is None
    assert grains.derive_grain(node, "date", "week", stored) is None     # weeks straddle years


def test_to_date_keeps_its_pattern():
    """sqlglot writes to_date(x, 'yyyy-MM-dd') back as TO_DATE(x); on text Spark's two differ
    (the pattern parses strictly), so a rewrite must keep the pattern as written."""
    import rewriter as core
    from rewriter.api import Candidate
    schemas = {"default": {"visits": {"segment": "string", "visit_ts": "timestamp", "n": "int"}}}
    d = core.compile_datamap("v", "SELECT segment, timeseries(visit_ts, 'day') AS d, "
                             "count(*) AS c FROM visits GROUP BY segment, "
                             "timeseries(visit_ts, 'day')", schemas, "default")
    r = core.rewrite("SELECT to_date(segment, 'yyyy-MM-dd') AS x, count(*) FROM visits "
                     "GROUP BY to_date(segment, 'yyyy-MM-dd')", [Candidate(d)], schemas,
                     "default")
    assert r.used and "TO_DATE(v.segment, 'yyyy-MM-dd')" in r.sql, r.sql


@pytest.mark.parametrize("pattern", ["yyyy-MM-dd", "yyyy-MM-dd HH:mm:ss"])
def test_to_date_keeps_a_default_pattern_as_written(pattern):
    """Both of sqlglot's default patterns are dropped when it writes to_date back; each is
    kept as the user wrote it, never read as the other."""
    from rewriter.normalize import parse
    tree = parse(f"SELECT to_date(s, '{pattern}') AS d FROM t")
    assert tree.expressions[0].this.expressions[1].name == pattern


@pytest.mark.parametrize("sql,found", [
    ("date_sub(d, (dayofweek(d) + 5) % 7)", ("d", "week")),        # Monday weeks
    ("date_add(d, -((dayofweek(d) + 5) % 7))", ("d", "week")),
    ("date_add(d, -(dayofweek(d) - 1))", ("d", "day")),           # Sunday weeks: days only
    ("date_sub(d, dayofweek(d) - 2)", ("d", "day")),              # Sun..Sat, labelled Monday
    ("date_sub(d, (dayofweek(d) + 1) % 7)", ("d", "day")),        # Saturday weeks
    ("date_sub(d, pmod(dayofweek(d) - 2, 7))", ("d", "week")),   # pmod: never negative
    ("date_sub(d, pmod(dayofweek(d) - 1, 7))", ("d", "day")),
    ("date_sub(d, pmod(dayofweek(d), 0))", None),
    ("date_sub(d, dayofweek(d) % 3)", None),                      # not constant on any week
    ("date_sub(d, dayofweek(e) - 1)", None),                      # another column's weekday
    ("date_sub(d, dayofweek(d) / 2)", None),                      # fractions: refused
    ("date_add(d, 7)", None),
    ("weekofyear(d)", ("d", "week")),
    ("EXTRACT(year FROM d)", ("d", "year")), ("EXTRACT(QUARTER FROM d)", ("d", "month")),
    ("EXTRACT(week FROM d)", ("d", "week")), ("EXTRACT(DAYOFWEEK_ISO FROM d)", ("d", "day")),
    ("EXTRACT(SECOND FROM d)", None),                             # with the fraction
])
def test_week_idioms(sql, found):
    assert _grain(sql) == found


def test_a_date_column_comes_back_from_its_day_bucket_only():
    stored = sqlglot.parse_one("b", read="spark")
    assert grains.date_from_day_bucket("date", "day", stored).sql("spark") == "CAST(b AS DATE)"
    assert grains.date_from_day_bucket("date", "month", stored) is None
    assert grains.date_from_day_bucket("timestamp", "day", stored) is None


@pytest.mark.parametrize("text,after", [
    ("1995-04-30", "1995-05-01"), ("1996-02-28", "1996-02-29"), ("1999-12-31", "2000-01-01"),
    ("1995-04-30 00:00:00", None), ("1995-4-30", None), ("1995-02-30", None), ("x", None),
])
def test_next_day_only_for_plain_dates(text, after):
    assert grains.next_day(text) == after
