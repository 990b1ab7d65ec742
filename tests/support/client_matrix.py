"""The client matrix's targets (Spark Thrift Server itself, or the proxy in front of it) and
the tables every client reads: the all-types table, the metadata and USE databases."""
from __future__ import annotations

from dataclasses import dataclass

from tests.support.clients import jdbc_url


@dataclass(frozen=True)
class Target:
    name: str          # "direct" | "proxy"
    host: str
    port: int
    nosasl: bool = False

    def jdbc(self, database: str = "default", params: str = "") -> str:
        return jdbc_url(self.host, self.port, database, nosasl=self.nosasl, params=params)

    @property
    def pyhive_auth(self) -> str:
        return "NOSASL" if self.nosasl else "NONE"

    @property
    def impyla_auth(self) -> str:
        return "NOSASL" if self.nosasl else "PLAIN"


ITEST_DB = "itest"


TYPES_DDL = """(
  c_tinyint TINYINT, c_smallint SMALLINT, c_int INT, c_bigint BIGINT,
  c_float FLOAT, c_double DOUBLE, c_decimal DECIMAL(38,10), c_string STRING,
  c_boolean BOOLEAN, c_date DATE, c_timestamp TIMESTAMP, c_binary BINARY,
  c_array ARRAY<INT>, c_map MAP<STRING,INT>, c_struct STRUCT<a:INT,b:STRING>
) USING parquet"""


# Extremes, empties, a nested NULL, a comma and a quote in text, and a row of NULLs.
TYPES_ROWS = [
    "(CAST(127 AS TINYINT), CAST(32767 AS SMALLINT), 2147483647, 9223372036854775807L, "
    "CAST(1.5 AS FLOAT), 2.25D, 1234567890123456789012345678.0123456789BD, "
    "'héllo, \"world\"', true, DATE'2024-02-29', TIMESTAMP'2024-02-29 23:59:59.123456', "
    "X'00FF10', array(1, NULL, 3), map('a', 1, 'b', NULL), named_struct('a', 1, 'b', 'x'))",
    "(CAST(-128 AS TINYINT), CAST(-32768 AS SMALLINT), -2147483648, -9223372036854775808L, "
    "CAST(-3.25 AS FLOAT), -1.0E300D, -0.0000000001BD, '', false, DATE'1970-01-01', "
    "TIMESTAMP'1970-01-01 00:00:00', X'', array(), map(), named_struct('a', NULL, 'b', NULL))",
    "(NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
]


TYPES_COLUMNS = ["c_tinyint", "c_smallint", "c_int", "c_bigint", "c_float", "c_double",
                 "c_decimal", "c_string", "c_boolean", "c_date", "c_timestamp", "c_binary",
                 "c_array", "c_map", "c_struct"]


def types_statements(table: str) -> list[str]:
    """DDL + DML that create `table` and fill it with TYPES_ROWS."""
    return [f"DROP TABLE IF EXISTS {table}",
            f"CREATE TABLE {table} {TYPES_DDL}",
            f"INSERT INTO {table} VALUES " + ", ".join(TYPES_ROWS)]


def types_select(table: str) -> str:
    return f"SELECT * FROM {table} ORDER BY c_int DESC NULLS LAST"


META_DB = "imeta"          # never changed by tests: metadata listings stay comparable


USE_DB = "iuse"            # for use:database / database= tests
