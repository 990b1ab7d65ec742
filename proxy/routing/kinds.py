"""What classification answers: the `Kind` of a statement and the `Statement` it is read
as. A leaf, so that the sqlglot side (proxy/routing/classify_parse.py) builds answers without
importing proxy/routing/classify.py, which imports it lazily."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Kind(Enum):
    QUERY = "query"                # SELECT / WITH / FROM / ( ...: what the rewriter reads
    SET = "set"                    # SET [k = v], SET TIME ZONE ...
    SET_REWRITE = "set_rewrite"    # SET <one of SESSION_KEYS> [= value]: the proxy's own
    USE = "use"
    WRITE = "write"                # rows of `tables` change: INSERT, LOAD DATA, TRUNCATE
    MAYBE_WRITE = "maybe_write"    # may write, tables unknown (unparseable or too long)
    FILES = "files"                # data files of `tables` may change: partition DDL, MSCK
    ALTER_TABLE = "alter_table"    # any other ALTER TABLE (columns, properties, rename:
                                   # `tables` is (old, new))
    DROP_TABLE = "drop_table"
    DROP_VIEW = "drop_view"        # a view: never a base table's rows (a temporary view may
                                   # shadow one), but a datamap's live table is one
    CREATE_TABLE = "create_table"  # CREATE [OR REPLACE] TABLE, REPLACE TABLE (overwrite)
    DATAMAP = "datamap"            # datamap DDL or EXPLAIN: proxy/datamaps/ddl/parser.py parses it
    OTHER = "other"


@dataclass(frozen=True)
class Statement:
    kind: Kind
    tables: tuple[str, ...] = ()   # "db.table", lower-cased, qualified with current_db
    overwrite: bool = False        # replaces contents: a listing diff cannot see the change
    key: str | None = None         # SET: the key as written (time zone: TIME_ZONE_SETTING)
    value: str | None = None       # SET k = v: v as written; SET_REWRITE: "true" / "false",
                                   # max_staleness: seconds ("300")
    database: str | None = None    # USE
    error: str | None = None       # SET_REWRITE with a bad value: the message (42000)
