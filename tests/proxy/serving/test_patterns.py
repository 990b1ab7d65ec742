"""proxy/serving/patterns.py and formats.py without Spark: how patterns are read, which
are refused and why, and the text DuckDB computes for values whose Spark text is known
(test_patterns_spark.py compares with Spark itself)."""
from __future__ import annotations

import duckdb
import pytest

from proxy.serving import patterns
from proxy.serving.patterns import Field, format_sql, lex, parse_sql
from proxy.serving.translate import NotServable, translate
from rewriter.normalize import DIALECT, parse

TS = "TIMESTAMP '0999-03-04 00:05:06.789'"


@pytest.fixture(scope="module")
def duck():
    con = duckdb.connect()
    yield con
    con.close()


def test_lexing_fields_quotes_and_literals():
    assert lex("yyyy-MM'T'''HH") == [Field("y", 4), "-", Field("M", 2), "T'", Field("H", 2)]
    assert lex("''") == ["'"]
    assert lex("'it''s'") == ["it's"]
    assert lex("年é") == ["年", "é"]


@pytest.mark.parametrize("pattern,why", [
    ("YYYY", "week-based year"), ("ww", "week of week-based year"), ("W", "week of month"),
    ("u", "day number of week"), ("e", "localized day of week"), ("MMMMM", "'MMMMM'"),
    ("ddd", "'ddd'"), ("EEEEE", "'EEEEE'"), ("aa", "'aa'"), ("yyyyy", "'yyyyy'"),
    ("z", "letter 'z'"), ("G", "letter 'G'"), ("L", "letter 'L'"), ("[yyyy]", "optional"),
    ("yyyy#", "reserved"), ("{", "reserved"), ("'open", "unterminated quote"),
])
def test_refused_patterns_name_the_cause(pattern, why):
    with pytest.raises(NotServable, match="datetime pattern .*" + why.replace("[", r"\[")):
        format_sql(pattern, TS)


@pytest.mark.parametrize("pattern,text", [     # Spark 4's text for 0999-03-04 00:05:06.789
    ("y yy yyy yyyy", "999 99 999 0999"), ("M MM MMM MMMM", "3 03 Mar March"),
    ("d dd D DD DDD", "4 04 63 63 063"), ("H HH h hh k K a", "0 00 12 12 24 0 AM"),
    ("m mm s ss", "5 05 6 06"), ("S SS SSS SSSS SSSSSSS", "7 78 789 7890 7890000"),
    ("E EE EEE EEEE", "Mon Mon Mon Monday"), ("Q QQ QQQ QQQQ", "1 01 Q1 1st quarter"),
    ("yyyy-MM-dd'T'HH", "0999-03-04T00"), ("'it''s' yyyy", "it's 0999"), ("''", "'"),
    ("'' ''''", "' '"), ("''''''", "''"),
    ("yyyy年MM月", "0999年03月"), ("'%Y'", "%Y"),
])
def test_format_text(duck, pattern, text):
    assert duck.execute(f"SELECT {format_sql(pattern, TS)}").fetchone()[0] == text


EDGES = [TS, "TIMESTAMP '1000-01-01 00:00:00'", "TIMESTAMP '9999-12-31 23:59:59.999999'",
         "TIMESTAMP '2024-02-29 12:00:00'", "TIMESTAMP '0001-01-01 00:00:00'",
         "CAST(NULL AS TIMESTAMP)"]


@pytest.mark.parametrize("pattern,text", [  # printed by one strftime: the Hive grains
    ("yyyy-MM-dd HH:mm:ss", "0999-03-04 00:05:06"), ("yyyy-MM-dd 00:00:00", "0999-03-04 00:00:00"),
    ("yyyy-01-01 00:00:00", "0999-01-01 00:00:00"), ("yyyy%MM'%d'%%dd", "0999%03%d%%04"),
])
def test_numeric_patterns_print_by_strftime_as_field_by_field(duck, pattern, text, monkeypatch):
    fast = [format_sql(pattern, ts) for ts in EDGES]
    monkeypatch.setattr(patterns, "_STRFTIME", {})      # printf field by field
    slow = [format_sql(pattern, ts) for ts in EDGES]
    assert all("strftime" in f for f in fast) and not any("strftime" in s for s in slow)
    got = duck.execute(f"SELECT {', '.join(fast)}").fetchone()
    assert got == duck.execute(f"SELECT {', '.join(slow)}").fetchone()
    assert got[0] == text


def test_format_of_null_is_null_and_a_signed_year_raises(duck):
    assert duck.execute(f"SELECT {format_sql('yyyy', 'CAST(NULL AS TIMESTAMP)')}").fetchone() == (None,)
    assert duck.execute(f"SELECT {format_sql(chr(39) + 'x' + chr(39), 'CAST(NULL AS TIMESTAMP)')}").fetchone() == (None,)
    with pytest.raises(duckdb.Error, match="outside 1..9999"):
        duck.execute(f"SELECT {format_sql('yyyy', chr(39) + '10000-01-01' + chr(39) + '::TIMESTAMP')}")


@pytest.mark.parametrize("pattern,text,value", [
    ("yyyy-MM-dd", "2024-02-29", "2024-02-29 00:00:00"),
    ("yyyy-M-d", "2024-1-05", "2024-01-05 00:00:00"),
    ("yy-MM-dd HH:mm:ss.SSS", "99-01-05 10:30:00.12", "2099-01-05 10:30:00.12"),
    ("dd/MM/yyyy HH:mm", "29/02/2024 23:59", "2024-02-29 23:59:00"),
    ("yyyyMMddHHmmss", "20240105103000", "2024-01-05 10:30:00"),
    ("yyyy", "2024", "2024-01-01 00:00:00"),
])
def test_parse(duck, pattern, text, value):
    got = duck.execute(f"SELECT CAST({parse_sql(pattern, repr(text))} AS VARCHAR)").fetchone()[0]
    assert got == value


@pytest.mark.parametrize("pattern,text", [
    ("yyyy-MM-dd", "2024-1-5"), ("yyyy-MM-dd", "2024-02-30"), ("yyyy-MM-dd", " 2024-01-05"),
    ("yyyy-MM-dd", "2024-01-05 "), ("yyyy-MM-dd HH:mm:ss", "2024-01-05 24:00:00"),
    ("yyyy-MM-dd HH:mm:ss", "2024-01-05 10:60:00"), ("yyyy-MM-dd", "12024-01-05"),
    ("yyyy-MM-dd", "2024-13-01"),
])
def test_parse_of_text_the_pattern_does_not_read_raises(duck, pattern, text):
    with pytest.raises(duckdb.Error):
        duck.execute(f"SELECT {parse_sql(pattern, repr(text))}").fetchone()


@pytest.mark.parametrize("pattern,why", [
    ("MM/dd", "only with a year"), ("yyyy dd", "only with the one before"), ("yyyyMd", "adjacent"),
    ("yyyy-MMM", "'MMM'"), ("yyyy hh a", "'h'"), ("yyyy-MM-dd yyyy", "twice"),
    ("yyyy-MM-dd HH:mm:ss.SSSSSSS", "'SSSSSSS'"), ("yyyy-MM-dd HH:mm:ss.SS", "'SS'"),
    ("yyyy-MM-dd HH:mm:ssSSS", "adjacent"),
])
def test_parse_refusals(pattern, why):
    with pytest.raises(NotServable, match=why):
        parse_sql(pattern, "'x'")


COLUMNS = {"ts": "timestamp", "dt": "date", "s": "string", "n": "bigint", "x": "double"}
READ = "(SELECT ts, dt, s, n, x FROM db.t WHERE dm_segment_id IN ('0')) AS m"


def _translate(expr: str, zone: str = "UTC"):
    return translate(parse(f"SELECT {expr} AS v FROM {READ}"), {"db.t": COLUMNS},
                     lambda t, i: ["f.parquet"], zone)


@pytest.mark.parametrize("expr,typ", [
    ("date_format(m.ts, 'yyyy-MM-dd')", "string"), ("date_format(m.dt, 'yyyy')", "string"),
    ("date_format(m.s, 'yyyy')", "string"), ("from_unixtime(m.n)", "string"),
    ("from_unixtime(unix_timestamp(m.ts), 'yyyy-MM-01 00:00:00')", "string"),
    ("unix_timestamp(m.ts)", "bigint"), ("unix_timestamp(m.s, 'yyyy-MM-dd')", "bigint"),
    ("to_date(m.s, 'yyyy-MM-dd')", "date"), ("to_date(m.s, 'dd.MM.yyyy')", "date"),
    ("to_timestamp(m.s, 'yyyy-MM-dd HH:mm')", "timestamp"), ("CAST(m.s AS DATE)", "date"),
    ("CAST(m.s AS TIMESTAMP)", "timestamp"), ("CAST(m.ts AS STRING)", "string"),
    ("to_date(m.ts)", "date"),
])
def test_served_functions_and_their_spark_types(expr, typ):
    assert _translate(expr).columns == (("v", typ),)


@pytest.mark.parametrize("expr,why", [
    ("date_format(m.ts, 'YYYY')", "week-based year"),
    ("date_format(m.ts, m.s)", "not a string literal"),
    ("from_unixtime(m.x)", "from_unixtime of double"),
    ("unix_timestamp()", "current time"),
    ("to_date(m.s, 'MM/dd')", "only with a year"),
    ("date_format(m.n, 'yyyy')", "date_format of bigint"),
])
def test_refused_functions(expr, why):
    with pytest.raises(NotServable, match=why):
        _translate(expr)


QUARTER = "date_format(add_months(trunc(m.ts, 'MM'), -(month(m.ts) - 1) % 3), 'yyyy-MM-dd 00:00:00')"


@pytest.mark.parametrize("zone", ["UTC", "+05:30"])
def test_the_hive_quarter_grain_writes_its_month_arithmetic_out_twice(zone):
    """Superset's Hive quarter: the add_months guard (dates.in_range) names its date twice,
    the remainder by 3 names its dividend once, and the date printed needs no year check
    (in_range raised outside 1..9999): the month is computed twice, not 18 times."""
    sql = _translate(QUARTER, zone).sql
    assert sql.count("month(") == 2
    assert "remainder by zero" not in sql and "a year outside 1..9999" not in sql


@pytest.mark.parametrize("expr", [
    "date_format(date_add(m.dt, 1), 'yyyy-MM-dd')", "date_format(next_day(m.dt, 'Mon'), 'yyyy')",
    "date_format(m.dt - INTERVAL '1' MONTH, 'yyyy-MM')", "date_format(add_months(m.dt, 2), 'yyyy')",
    "date_format(add_months(m.dt, 2), 'EEEE, yyyy')",
])
def test_a_date_in_range_checked_prints_without_a_second_check(expr):
    assert "a year outside 1..9999" not in _translate(expr).sql


@pytest.mark.parametrize("expr", [
    "date_format(m.dt, 'yyyy')", "date_format(m.ts, 'yyyy-MM-dd')",
    "date_format(m.ts + INTERVAL '1' HOUR, 'yyyy')", "date_format(date_trunc('MONTH', m.ts), 'yyyy')",
])
def test_other_dates_and_timestamps_are_checked(expr):
    assert "a year outside 1..9999" in _translate(expr).sql


def test_format_of_a_checked_null_is_null(duck):
    null = "CAST(NULL AS TIMESTAMP)"
    for pattern in ("yyyy-MM-dd", "'x' a EEEE"):
        got = duck.execute(f"SELECT {format_sql(pattern, null, in_years=True)}").fetchone()
        assert got == (None,)


def test_zones_not_checked_against_the_jvm_are_not_served():
    with pytest.raises(NotServable, match="neither a fixed UTC offset nor a named zone"):
        _translate("date_format(m.dt, 'yyyy')", "America/Sao_Paulo")


def test_the_parser_keeps_the_pattern_as_written():
    """sqlglot's Spark would read 'YYYY' as strftime's %Y and give 'yyyy' back."""
    tree = parse(f"SELECT date_format(m.ts, 'YYYY y') AS v FROM {READ}")
    assert "'YYYY y'" in tree.sql(dialect=DIALECT)
