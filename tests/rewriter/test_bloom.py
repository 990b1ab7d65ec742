"""rewriter/prune/bloom.py without Spark: XXH64 vectors (the reference algorithm's and values
Spark 4's xxhash64() returned), sizing, and the membership test over filters built with
the same probe arithmetic the Spark expression uses. tests/pipeline/test_indexes.py checks
the same functions against Spark itself."""
import datetime
import decimal
import math
import random

import pytest

from rewriter.prune import bloom

M64 = (1 << 64) - 1


@pytest.mark.parametrize("data, seed, expected", [
    (b"", 0, 0xEF46DB3751D8E999),
    (b"abc", 0, 0x44BC2CF5AD770999),
    (b"Nobody inspects the spammish repetition", 0, 0xFBCEA83C8A378BF1),   # >= 32 bytes
])
def test_xxh64_reference_vectors(data, seed, expected):
    assert bloom.xxh64(data, seed) & M64 == expected


@pytest.mark.parametrize("value, spark_type, spark_says", [
    (1, "int", -6698625589789238999),
    (1, "tinyint", -6698625589789238999),
    (True, "boolean", -6698625589789238999),
    (1, "bigint", -7001672635703045582),
    ("a", "string", -8582455328737087284),
    (0.0, "float", 3614696996920510707),
    (-0.0, "double", -5252525462095825812),
    (datetime.date(2020, 1, 2), "date", 3788440403249251806),
    (decimal.Decimal("1.25"), "decimal(10,2)", 2287599437899865974),
])
def test_spark_hash_equals_what_spark_returned(value, spark_type, spark_says):
    assert bloom.spark_hash(value, spark_type) == spark_says


@pytest.mark.parametrize("value, spark_type", [
    (1.5, "int"), (1 << 40, "int"), ("1", "int"), (True, "int"), (1, "string"),
    (datetime.datetime(2020, 1, 1), "date"), (decimal.Decimal("1.255"), "decimal(10,2)"),
    (1, "array<int>"),
])
def test_values_without_an_exact_counterpart_are_not_hashable(value, spark_type):
    with pytest.raises(bloom.NotHashable):
        bloom.value_bytes(value, spark_type)


def test_integral_numbers_of_another_python_type_hash_as_the_column_type():
    assert bloom.spark_hash(7.0, "int") == bloom.spark_hash(7, "int")
    assert bloom.spark_hash(decimal.Decimal(7), "bigint") == bloom.spark_hash(7, "bigint")


@pytest.mark.parametrize("spark_type, ok", [
    ("int", True), ("string", True), ("date", True), ("decimal(18,2)", True),
    ("decimal(19,2)", False), ("timestamp", False), ("array<int>", False), ("map<int,int>", False),
])
def test_supported_types(spark_type, ok):
    assert bloom.supports(spark_type) is ok


def test_sizing_follows_the_textbook_formulas():
    m, k = bloom.size_for(640_000, 0.00001)
    assert m % 8 == 0 and abs(m - 640_000 * math.log(1e5) / math.log(2) ** 2) < 8
    assert k == 17
    assert bloom.size_for(1, 0.5) == (64, 30)        # tiny filters stay sane
    assert bloom.size_for(1000, 0.01)[1] == 7


def _build(values, spark_type, m, k) -> bloom.Bloom:
    bits = bytearray(m // 8)
    for v in values:
        for p in bloom.probes(bloom.spark_hash(v, spark_type), m, k):
            bits[p >> 3] |= 1 << (p & 7)
    return bloom.Bloom(spark_type, m, k, bytes(bits))


def test_no_false_negatives_and_about_the_configured_false_positive_rate():
    rng = random.Random(7)
    present = rng.sample(range(10**9), 5000)
    m, k = bloom.size_for(5000, 0.01)
    f = _build(present, "bigint", m, k)
    assert all(f.might_contain(v) for v in present)
    absent = [v for v in rng.sample(range(10**9, 2 * 10**9), 20000)]
    rate = sum(f.might_contain(v) for v in absent) / len(absent)
    assert rate < 0.03
    assert 0.4 < f.fill() < 0.6


def test_unknown_and_null_values_never_prune():
    f = _build(["x"], "string", 64, 3)
    assert f.might_contain(None) and f.might_contain(5)     # 5 is no string: cannot decide


def test_assemble_places_big_endian_words_of_buckets():
    m = bloom.BUCKET_BITS * 2 + 64
    word0 = (1).to_bytes(8, "big")                  # bit 0
    word_last = (1 << 63).to_bytes(8, "big")        # bit 63 of bucket 2's first word
    bits = bloom.assemble(m, {0: word0 + bytes(4088), 2: word_last + bytes(4088)})
    assert len(bits) == m // 8 and bits[0] == 1 and bits[8192 + 7] == 0x80
    assert sum(bits) == 1 + 0x80


def test_position_sql_names_the_same_arithmetic():
    sql = bloom.probe_sql(bloom.hash_sql("`c`"), "i", 1024)
    assert "xxhash64(`c`)" in sql and "% 1024" in sql and "IS NULL, NULL" in sql
    assert "% 64" in bloom.word_sql("p") and "sequence(0, 511)" in bloom.bucket_sql("w", "g")


@pytest.mark.parametrize("compress", [True, False])
def test_pack_round_trips(compress):
    bits = bytes(range(256)) * 4
    assert bloom.unpack(bloom.pack(bits, compress)) == bits
