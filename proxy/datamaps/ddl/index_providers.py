"""The index datamap statement: `CREATE DATAMAP [IF NOT EXISTS] x ON TABLE t USING
'minmax' | 'bloomfilter' [WITH DEFERRED REBUILD] [DMPROPERTIES (...)]` (contract.md).

proxy/datamaps/ddl/parser.py parses the frame (names, USING, WITH DEFERRED REBUILD, DMPROPERTIES)
and hands it here. The
properties are checked here, without the table (CarbonData's keys: INDEX_COLUMNS,
BLOOM_SIZE = expected distinct values per file, BLOOM_FPP, BLOOM_COMPRESS); whether the
columns exist and have a type the index supports is the command's check
(proxy/datamaps/indexes/commands.py), which knows the schema.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from proxy.routing.sqlscan import Cursor, StatementError

INDEX_PROVIDERS = ("minmax", "bloomfilter")
DEFAULT_BLOOM_SIZE = 640_000         # CarbonData's defaults
DEFAULT_BLOOM_FPP = 0.00001
MAX_BLOOM_SIZE = 100_000_000
_ALLOWED = {"minmax": ("index_columns",),
            "bloomfilter": ("index_columns", "bloom_size", "bloom_fpp", "bloom_compress")}
_COLUMN = re.compile(r"[A-Za-z0-9_]+\Z")


@dataclass(frozen=True)
class CreateIndexDatamap:
    name: object                                  # proxy.datamaps.ddl.parser.Name
    on_table: object                              # Name (required)
    provider: str                                 # minmax | bloomfilter
    if_not_exists: bool = False
    lazy: bool = False                            # WITH DEFERRED REBUILD: built by REBUILD
    properties: tuple[tuple[str, str], ...] = ()  # keys lower-cased, sorted

    @property
    def props(self) -> dict[str, str]:
        return dict(self.properties)

    @property
    def columns(self) -> tuple[str, ...] | None:
        """INDEX_COLUMNS lower-cased, or None: every column the index supports."""
        raw = self.props.get("index_columns")
        return None if raw is None else tuple(c.strip().lower() for c in raw.split(","))


@dataclass(frozen=True)
class BloomSettings:
    size: int
    fpp: float
    compress: bool


def index_statement(cur: Cursor, name, on_table, if_not_exists: bool, provider: str,
                    lazy: bool, props: tuple[tuple[str, str], ...]) -> CreateIndexDatamap:
    """CREATE DATAMAP of an index provider, its frame parsed by proxy/datamaps/ddl/parser.py up
    to the properties: no query may follow."""
    if on_table is None:
        raise cur.error(f"an index datamap ('{provider}') needs ON TABLE <table>")
    if cur.at("as"):
        raise cur.error(f"an index datamap ('{provider}') takes no AS query")
    cur.end()
    stmt = CreateIndexDatamap(name, on_table, provider, if_not_exists, lazy, props)
    check_properties(stmt)
    return stmt


def _bad(stmt: CreateIndexDatamap, key: str, why: str) -> StatementError:
    value = stmt.props.get(key)
    shown = f"'{key}'='{value}'" if value is not None else f"'{key}'"
    return StatementError(f"Invalid property {shown} for datamap {stmt.name}: {why}", "42000")


def check_properties(stmt: CreateIndexDatamap) -> None:
    """Raise 42000 for a property the provider does not take or a value out of range."""
    allowed = _ALLOWED[stmt.provider]
    for key in stmt.props:
        if key not in allowed:
            raise _bad(stmt, key, f"not a property of '{stmt.provider}' index datamaps "
                                  f"(allowed: {', '.join(k.upper() for k in allowed)})")
    cols = stmt.columns
    if cols is not None:
        if not all(_COLUMN.match(c) for c in cols):
            raise _bad(stmt, "index_columns", "expected a comma-separated list of column names")
        if len(set(cols)) != len(cols):
            raise _bad(stmt, "index_columns", "a column is named twice")
    elif stmt.provider == "bloomfilter":
        raise StatementError(f"Datamap {stmt.name}: 'bloomfilter' needs DMPROPERTIES"
                             "('INDEX_COLUMNS'='c1,...')", "42000")
    if stmt.provider == "bloomfilter":
        bloom_settings(stmt.props, stmt)


def bloom_settings(props: dict[str, str], stmt: CreateIndexDatamap | None = None
                   ) -> BloomSettings:
    """BLOOM_SIZE / BLOOM_FPP / BLOOM_COMPRESS with CarbonData's defaults."""
    def bad(key, why):
        if stmt is None:
            raise ValueError(f"{key}: {why}")
        raise _bad(stmt, key, why)
    try:
        size = int(props.get("bloom_size", DEFAULT_BLOOM_SIZE))
    except ValueError:
        size = 0
    if not 1 <= size <= MAX_BLOOM_SIZE:
        bad("bloom_size", f"expected a whole number of distinct values per file, "
                          f"1 to {MAX_BLOOM_SIZE}")
    try:
        fpp = float(props.get("bloom_fpp", DEFAULT_BLOOM_FPP))
    except ValueError:
        fpp = -1.0
    if not 1e-9 <= fpp < 1:
        bad("bloom_fpp", "expected a false-positive rate between 0.000000001 and 1 "
                         "(e.g. '0.00001')")
    compress = props.get("bloom_compress", "true").strip().lower()
    if compress not in ("true", "false"):
        bad("bloom_compress", "expected 'true' or 'false'")
    return BloomSettings(size, fpp, compress == "true")
