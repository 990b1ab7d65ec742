"""The bloom filter of a `bloomfilter` index datamap: its format, its Spark build
expressions and its membership test, kept in one module so that the two sides agree by
construction.

A filter over a column of one file is `m` bits and `k` probes. A value's probes come
from Spark's own `xxhash64(value)` (seed 42): with h1 = its low 32 bits and h2 = its
high 32 bits (both unsigned), probe i is bit (h1 + i * h2) mod m, i = 0 .. k-1 (double
hashing, Kirsch and Mitzenmacher). The bits are a bytes object, bit p being
(bits[p // 8] >> (p % 8)) & 1: 64-bit little-endian words, word w holding bits
w*64 .. w*64+63. Spark builds them (pipeline/indexes.py) as `bit_or` of
`shiftleft(1L, p % 64)` per word (a plain aggregate, so a hash aggregation), then packs
the words of each 32768-bit bucket into 4096 bytes (big-endian words, as `hex` spells a
long: `bucket_sql`), which `assemble` byte-swaps and lays end to end.

`xxhash64` here is the XXH64 of the value's bytes as Spark hashes them (XxHash64Function):
little-endian 4 bytes for tinyint, smallint, int, date (days since the epoch), float
(its IEEE bits; -0.0 as 0.0) and boolean (1/0); 8 bytes for bigint, timestamp_ntz
(microseconds since the epoch), double and decimal(p <= 18) (the unscaled value); UTF-8
bytes for string and the bytes of binary. NULL is never added nor looked up. TIMESTAMP
(with the session zone) is left out: Spark hashes its UTC instant, and the query side's
naive values are wall-clock times, which need the zone to convert.
"""
from __future__ import annotations

import array
import datetime
import decimal
import math
import re
import struct
import sys
import zlib
from dataclasses import dataclass
from typing import Any

SEED = 42
BUCKET_BITS = 32768            # bits per packed bucket: 512 words, 4096 bytes
WORDS_PER_BUCKET = BUCKET_BITS // 64
MAX_PROBES = 30

_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
_M = (1 << 64) - 1

INT_TYPES = ("tinyint", "smallint", "int", "date", "float", "boolean")
LONG_TYPES = ("bigint", "timestamp_ntz", "double")
SUPPORTED = frozenset(INT_TYPES + LONG_TYPES + ("string", "binary"))
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)\Z")
_EPOCH = datetime.date(1970, 1, 1)
_EPOCH_TS = datetime.datetime(1970, 1, 1)


def supports(spark_type: str) -> bool:
    """True for the column types a bloom filter can index (the list above)."""
    t = spark_type.strip().lower()
    m = _DECIMAL.match(t)
    return t in SUPPORTED or (m is not None and int(m.group(1)) <= 18)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M


def _round(acc: int, lane: int) -> int:
    acc = (acc + lane * _P2) & _M
    return (_rotl(acc, 31) * _P1) & _M


def xxh64(data: bytes, seed: int = SEED) -> int:
    """XXH64 of `data`, as Spark's XXH64 computes it: a signed 64-bit int, like
    Spark's xxhash64()."""
    n = len(data)
    i = 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M, (seed + _P2) & _M, seed & _M, (seed - _P1) & _M]
        while i + 32 <= n:
            for j in range(4):
                v[j] = _round(v[j], int.from_bytes(data[i + 8 * j:i + 8 * j + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M
        for lane in v:
            h ^= _round(0, lane)
            h = (h * _P1 + _P4) & _M
    else:
        h = (seed + _P5) & _M
    h = (h + n) & _M
    while i + 8 <= n:
        h ^= _round(0, int.from_bytes(data[i:i + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _M
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i:i + 4], "little") * _P1) & _M
        h = (_rotl(h, 23) * _P2 + _P3) & _M
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M
        h = (_rotl(h, 11) * _P1) & _M
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M
    h ^= h >> 29
    h = (h * _P3) & _M
    h ^= h >> 32
    return h - (1 << 64) if h >> 63 else h


class NotHashable(ValueError):
    """The value has no exact counterpart in the column's type (e.g. 1.5 for an int
    column): no row can hold it as that type, so the caller must not prune on it."""


def value_bytes(value: Any, spark_type: str) -> bytes:
    """The bytes Spark hashes for `value` as a value of `spark_type`; NotHashable when
    the value is not exactly one of that type's values."""
    t = spark_type.strip().lower()
    if t in ("string", "binary"):
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        if isinstance(value, str):
            return value.encode("utf-8")
        raise NotHashable(f"{value!r} is not a {t}")
    if t == "date":
        if isinstance(value, datetime.datetime) or not isinstance(value, datetime.date):
            raise NotHashable(f"{value!r} is not a date")
        return struct.pack("<i", (value - _EPOCH).days)
    if t == "timestamp_ntz":
        if not isinstance(value, datetime.datetime) or value.tzinfo is not None:
            raise NotHashable(f"{value!r} is not a naive timestamp")
        delta = value - _EPOCH_TS
        return struct.pack("<q", (delta.days * 86400 + delta.seconds) * 1_000_000
                           + delta.microseconds)
    if t == "boolean":
        if not isinstance(value, bool):
            raise NotHashable(f"{value!r} is not a boolean")
        return struct.pack("<i", int(value))
    if t in ("float", "double"):
        if isinstance(value, bool) or not isinstance(value, (int, float, decimal.Decimal)):
            raise NotHashable(f"{value!r} is not a number")
        f = float(value)
        if t == "float":
            packed = struct.pack("<f", f)
            if struct.unpack("<f", packed)[0] != f and not math.isnan(f):
                raise NotHashable(f"{value!r} is not exactly a float")
            if f == 0.0:
                packed = struct.pack("<f", 0.0)
            return packed
        if f == 0.0:
            f = 0.0          # -0.0 hashes as 0.0
        return struct.pack("<d", f)
    m = _DECIMAL.match(t)
    if m is not None:
        precision, scale = int(m.group(1)), int(m.group(2))
        if isinstance(value, bool) or not isinstance(value, (int, decimal.Decimal)):
            raise NotHashable(f"{value!r} is not a decimal")
        unscaled = decimal.Decimal(value).scaleb(scale)
        if unscaled != unscaled.to_integral_value() or precision > 18:
            raise NotHashable(f"{value!r} does not fit {t}")
        return struct.pack("<q", int(unscaled))
    bounds = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}
    if t in bounds:
        if isinstance(value, bool):
            raise NotHashable(f"{value!r} is not an integer")
        if isinstance(value, (float, decimal.Decimal)) and value == int(value):
            value = int(value)
        if not isinstance(value, int):
            raise NotHashable(f"{value!r} is not an integer")
        half = 1 << (bounds[t] - 1)
        if not -half <= value < half:
            raise NotHashable(f"{value!r} is out of range for {t}")
        return struct.pack("<q" if t == "bigint" else "<i", value)
    raise NotHashable(f"type {spark_type} is not supported by bloom filters")


def spark_hash(value: Any, spark_type: str) -> int:
    """What Spark's `xxhash64(CAST(value AS spark_type))` returns."""
    return xxh64(value_bytes(value, spark_type))


def probes(h: int, m: int, k: int) -> list[int]:
    u = h & _M
    h1, h2 = u & 0xFFFFFFFF, u >> 32
    return [(h1 + i * h2) % m for i in range(k)]


# -- sizing ------------------------------------------------------------------------------
def size_for(expected: int, fpp: float) -> tuple[int, int]:
    """(m bits, k probes) for `expected` distinct values per file at false-positive rate
    `fpp`: m = -n ln p / ln2^2 (a multiple of 8), k = m/n ln 2."""
    n = max(1, expected)
    m = max(64, math.ceil(-n * math.log(fpp) / (math.log(2) ** 2)))
    m = (m + 7) // 8 * 8
    k = max(1, min(MAX_PROBES, round(m / n * math.log(2))))
    return m, k


# -- the Spark side ----------------------------------------------------------------------
def hash_sql(column_sql: str) -> str:
    """The value's hash, NULL for NULL (Spark's xxhash64 of NULL is the seed)."""
    return f"IF({column_sql} IS NULL, NULL, xxhash64({column_sql}))"


def probe_sql(hash_sql_: str, i_sql: str, m: int) -> str:
    """Probe `i_sql` (0 .. k-1) of a hash: the same arithmetic as `probes` (the terms stay
    below 2^63: h1, h2 < 2^32 and i <= MAX_PROBES)."""
    h = f"({hash_sql_})"
    return (f"((({h} & 4294967295) + CAST({i_sql} AS BIGINT) * shiftrightunsigned({h}, 32))"
            f" % {m})")


def word_sql(position_sql_: str) -> str:
    """The bit of a probe position within its 64-bit word; `bit_or` of these per word
    (position div 64) is the word."""
    return f"shiftleft(1L, CAST(({position_sql_}) % 64 AS INT))"


def bucket_sql(words_sql: str, bucket_sql_: str) -> str:
    """4096 bytes from `words_sql`, an array of struct(w, bits) of one bucket: word
    bucket*512 + i at bytes 8i .. 8i+7, big-endian (Spark's hex of a long), 0 if absent."""
    first = f"CAST({bucket_sql_} AS BIGINT) * {WORDS_PER_BUCKET}"
    return (f"unhex(transform(array(map_from_entries({words_sql})), mp -> "
            f"array_join(transform(sequence(0, {WORDS_PER_BUCKET - 1}), i -> "
            f"lpad(hex(coalesce(mp[{first} + i], 0L)), 16, '0')), ''))[0])")


def assemble(m: int, buckets: dict[int, bytes]) -> bytes:
    """The filter's bits from bucket_sql's packed buckets (bucket b covers bytes b*4096
    onwards; each 8-byte word turned little-endian)."""
    size = m // 8
    out = bytearray(size)
    step = BUCKET_BITS // 8
    for b, packed in buckets.items():
        words = array.array("Q")
        words.frombytes(bytes(packed))
        if sys.byteorder == "little":
            words.byteswap()          # big-endian words -> this machine's order
        chunk = words.tobytes() if sys.byteorder == "little" else _swap_each(words)
        start = b * step
        chunk = chunk[:max(0, min(step, size - start))]
        out[start:start + len(chunk)] = chunk
    return bytes(out)


def _swap_each(words: "array.array") -> bytes:
    return b"".join(w.to_bytes(8, "little") for w in words)


@dataclass(frozen=True)
class Bloom:
    """One column's filter over one file (filestats.Membership)."""
    spark_type: str
    m: int
    k: int
    bits: bytes

    def might_contain(self, value: Any) -> bool:
        if value is None:
            return True          # NULLs are not in the filter: never decide on them
        try:
            h = spark_hash(value, self.spark_type)
        except NotHashable:
            return True
        bits = self.bits
        return all((bits[p >> 3] >> (p & 7)) & 1 for p in probes(h, self.m, self.k))

    def fill(self) -> float:
        """Share of bits set (about 1/2 when sized as configured)."""
        return sum(bin(b).count("1") for b in self.bits) / self.m


def pack(bits: bytes, compress: bool) -> bytes:
    """Stored form: zlib when BLOOM_COMPRESS (helps filters that are far from full)."""
    return b"Z" + zlib.compress(bits, 6) if compress else b"R" + bits


def unpack(blob: bytes) -> bytes:
    return zlib.decompress(blob[1:]) if blob[:1] == b"Z" else bytes(blob[1:])
