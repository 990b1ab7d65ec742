"""Where the catalog lives: a SQLite file (embedded default) or a PostgreSQL database that
several replicas share (`[state] catalog = "postgresql://user:pw@host:port/db"`).

The catalog's SQL is written once, in the dialect both accept (`?` parameters, ON CONFLICT
upserts, no INSERT OR REPLACE). A backend gives `Catalog._tx` a connection whose
`execute(sql, params)` / `executemany` take that SQL and return a cursor (`fetchone`,
`fetchall`, iteration, `rowcount`) whose rows read by index and by column name.

Writers serialise as SQLite's BEGIN IMMEDIATE makes them: on PostgreSQL a write
transaction first locks the catalog_version row (FOR UPDATE), so a read-modify-write such
as `_next_id` or publish_segment runs as if alone. Readers get one snapshot per transaction
(REPEATABLE READ READ ONLY), as SQLite's WAL readers do.

A connection that died while idle (PostgreSQL restarted, a proxy in between dropped it) is
replaced when the next transaction begins; one lost inside a transaction fails that
transaction with SQLSTATE 08006 and nothing of it is applied (the server rolls back what
was not committed). The URL's password never appears in a message: `name` is the URL
without it.
"""
from __future__ import annotations

import os
import re
import sqlite3
from typing import Any, Iterable, Sequence
from urllib.parse import urlsplit, urlunsplit

from proxy.datamaps.catalog.records import CatalogError

PG_SCHEMES = ("postgresql://", "postgres://")
# PostgreSQL spellings of the SQLite types the migrations use (INTEGER is 64-bit there;
# text compares and sorts byte-wise, as SQLite's BINARY collation, whatever the locale).
_PG_TYPES = [(re.compile(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b", re.I), "BIGSERIAL PRIMARY KEY"),
             (re.compile(r"\bTEXT\b", re.I), 'TEXT COLLATE "C"'),
             (re.compile(r"\bINTEGER\b", re.I), "BIGINT"),
             (re.compile(r"\bREAL\b", re.I), "DOUBLE PRECISION"),
             (re.compile(r"\bBLOB\b", re.I), "BYTEA")]
_MIGRATION_LOCK = 0x6361_7461   # pg_advisory_xact_lock key: replicas migrate one at a time


def is_postgres(location: str) -> bool:
    return location.startswith(PG_SCHEMES)


def redact_url(url: str) -> str:
    """The URL without its password (for logs and error messages)."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def open_backend(location: str, busy_timeout_ms: int = 10_000) -> "SqliteBackend | PostgresBackend":
    if is_postgres(location):
        return PostgresBackend(location)
    return SqliteBackend(location, busy_timeout_ms)


class SqliteBackend:
    kind = "sqlite"

    def __init__(self, path: str, busy_timeout_ms: int):
        self.name = path
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False,
                                    timeout=busy_timeout_ms / 1000)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA foreign_keys = ON")

    def begin(self, write: bool) -> sqlite3.Connection:
        self.conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        return self.conn

    def begin_migration(self) -> sqlite3.Connection:
        return self.begin(True)      # the write lock keeps other processes out

    def commit(self) -> None:
        self.conn.execute("COMMIT")

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")

    @staticmethod
    def ddl(stmt: str) -> str:
        return stmt

    @staticmethod
    def user_version(c: sqlite3.Connection) -> int:
        return c.execute("PRAGMA user_version").fetchone()[0]

    @staticmethod
    def set_user_version(c: sqlite3.Connection, version: int) -> None:
        c.execute(f"PRAGMA user_version = {int(version)}")

    def close(self) -> None:
        self.conn.close()


class Row(tuple):
    """A result row readable by position and by column name (as sqlite3.Row)."""

    def __new__(cls, values: Iterable[Any], index: dict[str, int]) -> "Row":
        row = super().__new__(cls, values)
        row.columns = index           # shared by the rows of one result
        return row

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return tuple.__getitem__(self, self.columns[key])
        return tuple.__getitem__(self, key)

    def keys(self) -> list[str]:
        return list(self.columns)


def _row_factory(cursor):
    index = {d.name: i for i, d in enumerate(cursor.description or ())}
    return lambda values: Row(values, index)


class _PgConnection:
    """What `_tx` yields on PostgreSQL: the catalog's `?` SQL, translated once per text."""

    def __init__(self, backend: "PostgresBackend"):
        self._backend = backend
        self._sql: dict[str, str] = {}

    def _translate(self, sql: str) -> str:
        out = self._sql.get(sql)
        if out is None:
            out = self._sql[sql] = sql.replace("%", "%%").replace("?", "%s")
        return out

    def execute(self, sql: str, params: Sequence[Any] | None = None):
        raw = self._backend.raw()
        try:
            if params is None:
                return raw.execute(sql)      # no placeholders: psycopg leaves % alone
            return raw.execute(self._translate(sql), tuple(params))
        except self._backend.psycopg.OperationalError as exc:
            raise self._backend.lost(exc) from None

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]):
        cur = self._backend.raw().cursor()
        try:
            cur.executemany(self._translate(sql), [tuple(p) for p in seq])
        except self._backend.psycopg.OperationalError as exc:
            raise self._backend.lost(exc) from None
        return cur


class PostgresBackend:
    kind = "postgresql"

    def __init__(self, url: str, connect_timeout_s: int = 10):
        import psycopg
        self.psycopg = psycopg
        self._url = url
        self._password = urlsplit(url).password
        self.name = redact_url(url)
        self._connect_timeout = connect_timeout_s
        self._raw = None
        self.conn = _PgConnection(self)
        self._connect()

    def _clean(self, exc: BaseException) -> str:
        text = " ".join(str(exc).split())
        return text.replace(self._password, "***") if self._password else text

    def _connect(self) -> None:
        try:
            self._raw = self.psycopg.connect(self._url, autocommit=True,
                                             connect_timeout=self._connect_timeout,
                                             row_factory=_row_factory)
        except self.psycopg.Error as exc:
            self._raw = None
            raise CatalogError(f"Cannot connect to the datamap catalog at {self.name}: "
                               f"{self._clean(exc)}", "08001") from None

    def raw(self):
        if self._raw is None:
            raise CatalogError(f"Not connected to the datamap catalog at {self.name}", "08003")
        return self._raw

    def lost(self, exc: BaseException) -> CatalogError:
        self._drop()
        return CatalogError(f"Lost the connection to the datamap catalog at {self.name} "
                            f"({self._clean(exc)}); the change was not applied", "08006")

    def _drop(self) -> None:
        raw, self._raw = self._raw, None
        if raw is not None:
            try:
                raw.close()
            except Exception:  # noqa: BLE001 - it is broken already; a new one replaces it
                pass

    def _begin(self, statements: Sequence[str]) -> _PgConnection:
        # A connection found dead here held no transaction: reconnect and begin once more.
        for attempt in (0, 1):
            if self._raw is None or self._raw.closed or self._raw.broken:
                self._drop()
                self._connect()
            try:
                for stmt in statements:
                    self._raw.execute(stmt)
                return self.conn
            except self.psycopg.OperationalError as exc:
                if attempt:
                    raise self.lost(exc) from None
                self._drop()
        raise AssertionError("unreachable")

    def begin(self, write: bool) -> _PgConnection:
        if write:
            return self._begin(("BEGIN", "SELECT value FROM meta WHERE key = "
                                         "'catalog_version' FOR UPDATE"))
        return self._begin(("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY",))

    def begin_migration(self) -> _PgConnection:
        return self._begin(("BEGIN", f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK})",
                            "CREATE TABLE IF NOT EXISTS catalog_schema (version BIGINT NOT NULL)"))

    def commit(self) -> None:
        try:
            self.raw().execute("COMMIT")
        except self.psycopg.OperationalError as exc:
            self._drop()
            raise CatalogError(f"Lost the connection to the datamap catalog at {self.name} "
                               f"while committing ({self._clean(exc)}); the change may or may "
                               "not have been applied", "08006") from None

    def rollback(self) -> None:
        if self._raw is None or self._raw.closed or self._raw.broken:
            self._drop()         # the server discards the transaction with the connection
            return
        try:
            self._raw.execute("ROLLBACK")
        except self.psycopg.OperationalError:
            self._drop()

    @staticmethod
    def ddl(stmt: str) -> str:
        for pattern, repl in _PG_TYPES:
            stmt = pattern.sub(repl, stmt)
        return stmt

    @staticmethod
    def user_version(c: _PgConnection) -> int:
        row = c.execute("SELECT version FROM catalog_schema").fetchone()
        return 0 if row is None else int(row[0])

    @staticmethod
    def set_user_version(c: _PgConnection, version: int) -> None:
        c.execute("DELETE FROM catalog_schema")
        c.execute("INSERT INTO catalog_schema VALUES (?)", (int(version),))

    def close(self) -> None:
        self._drop()
