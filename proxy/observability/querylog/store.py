"""The query log's table in the catalog's database (SQLite or PostgreSQL), for
proxy/observability/querylog/log.py: batch inserts, retention deletes and the readers' queries.

It opens connections of its own (catalog_backend.open_backend), never the Catalog's: the
writer's batches must not queue behind a datamap build's catalog transaction, and on
PostgreSQL must not take the catalog-version row lock that catalog writers serialise on.
Each connection is used under its own lock, so readers are safe from any thread.
"""
from __future__ import annotations

import json
import threading
from typing import Any, Iterator

from proxy.datamaps.catalog.backend import open_backend
from proxy.datamaps.catalog.schema import migrate

COLUMNS = ("at", "user_name", "client", "session_id", "shape_hash", "shape", "statement",
           "current_db", "tables", "decision", "datamaps", "why_not", "reason_class",
           "duration_s", "rows", "outcome", "sqlstate", "saved_s", "not_served",
           "not_served_class")
_INSERT = (f"INSERT INTO query_log ({', '.join(COLUMNS)}) "
           f"VALUES ({', '.join('?' for _ in COLUMNS)})")
_SELECT = f"SELECT id, {', '.join(COLUMNS)} FROM query_log"
DELETE_BATCH = 10_000       # rows per retention DELETE: short write transactions
PAGE = 2_000                # rows per read of a streaming reader


def encode(values: Any) -> str:
    return json.dumps(list(values), separators=(",", ":"))


def decode_row(row) -> dict[str, Any]:
    out = {k: row[k] for k in ("id",) + COLUMNS}
    out["tables"] = tuple(json.loads(out["tables"]))
    out["datamaps"] = tuple(json.loads(out["datamaps"]))
    out["why_not"] = tuple((str(a), str(b)) for a, b in json.loads(out["why_not"]))
    out["user"] = out.pop("user_name")
    return out


class Connection:
    """One backend connection and its lock; reconnects after a failure."""

    def __init__(self, location: str, create: bool):
        self.location = location
        self._lock = threading.Lock()
        self._backend = open_backend(location)
        if create:
            migrate(self._backend)       # a no-op when the catalog is current

    def read(self, sql: str, params: tuple = ()) -> list:
        with self._lock:
            try:
                return self._backend.conn.execute(sql, params).fetchall()
            except Exception:
                self._reopen()
                raise

    def write(self, work) -> Any:
        """Run `work(conn)` in one write transaction."""
        with self._lock:
            backend = self._backend
            try:
                if backend.kind == "sqlite":
                    backend.conn.execute("BEGIN IMMEDIATE")
                else:                    # not begin(write): that locks the catalog version
                    backend.raw().execute("BEGIN")
                out = work(backend.conn)
                backend.commit()
                return out
            except BaseException:
                try:
                    backend.rollback()
                except Exception:  # noqa: BLE001 - the connection is replaced below
                    pass
                self._reopen()
                raise

    def _reopen(self) -> None:
        try:
            self._backend.close()
        except Exception:  # noqa: BLE001 - broken already
            pass
        try:
            self._backend = open_backend(self.location)
        except Exception:  # noqa: BLE001 - tried again at the next call
            pass

    def close(self) -> None:
        with self._lock:
            self._backend.close()


class QueryStore:
    def __init__(self, location: str, create: bool = True):
        self.writer = Connection(location, create)
        self.reader = Connection(location, False)

    def close(self) -> None:
        self.writer.close()
        self.reader.close()

    # -- writing (the writer thread) ----------------------------------------------------
    def insert(self, rows: list[tuple]) -> None:
        self.writer.write(lambda c: c.executemany(_INSERT, rows))

    def delete_before(self, at: float) -> int:
        return self._delete_batches("SELECT id FROM query_log WHERE at < ? ORDER BY id LIMIT ?",
                                    (at,))

    def keep_newest(self, max_entries: int) -> int:
        rows = self.reader.read("SELECT id FROM query_log ORDER BY id DESC LIMIT 1 OFFSET ?",
                                (max_entries,))
        if not rows:
            return 0
        return self._delete_batches(
            "SELECT id FROM query_log WHERE id <= ? ORDER BY id LIMIT ?", (rows[0][0],))

    def _delete_batches(self, select: str, params: tuple) -> int:
        total = 0
        while True:
            n = self.writer.write(lambda c: c.execute(
                f"DELETE FROM query_log WHERE id IN ({select})", params + (DELETE_BATCH,)
            ).rowcount)
            total += max(n, 0)
            if n < DELETE_BATCH:
                return total

    def base_durations(self, shape_hash: str, limit: int) -> list[float]:
        """The latest durations of a shape answered from the base tables."""
        rows = self.reader.read(
            "SELECT duration_s FROM query_log WHERE shape_hash = ? AND datamaps = '[]' "
            "AND outcome = 'FINISHED' AND decision IN ('forwarded', 'bypassed', 'rewritten') "
            "ORDER BY id DESC LIMIT ?", (shape_hash, limit))
        return [r[0] for r in rows]

    # -- reading -----------------------------------------------------------------------
    def recent(self, limit: int, user: str | None, decision: str | None,
               datamap: str | None) -> list[dict]:
        where, params = ["id < ?"], []
        if user is not None:
            where.append("user_name = ?")
            params.append(user)
        if decision is not None:
            where.append("decision = ?")
            params.append(decision)
        if datamap is not None:          # narrowed here, exact below
            where.append("datamaps LIKE ?")
            params.append(f'%{datamap}"%')
        sql = _SELECT + " WHERE " + " AND ".join(where) + " ORDER BY id DESC LIMIT ?"
        out, below = [], 1 << 62
        while len(out) < limit:
            rows = self.reader.read(sql, (below, *params, limit))
            out += [d for d in map(decode_row, rows)
                    if datamap is None or _names(datamap, d["datamaps"])]
            if len(rows) < limit:
                break
            below = rows[-1]["id"]
        return out[:limit]

    def entries(self, since: float, until: float | None) -> Iterator[dict]:
        last = -1
        while True:
            rows = self.reader.read(
                _SELECT + " WHERE id > ? AND at >= ?" + (" AND at < ?" if until is not None
                                                         else "") + " ORDER BY id LIMIT ?",
                (last, since) + ((until,) if until is not None else ()) + (PAGE,))
            for row in rows:
                yield decode_row(row)
            if len(rows) < PAGE:
                return
            last = rows[-1]["id"]

    def usage(self, since: float) -> list:
        return self.reader.read(
            "SELECT at, datamaps, saved_s FROM query_log WHERE at >= ? AND datamaps <> '[]' "
            "AND outcome IN ('FINISHED', 'CLOSED')", (since,))


def _names(wanted: str, datamaps: tuple[str, ...]) -> bool:
    """`wanted` ("db.name", or a bare name in any database) is one of `datamaps`."""
    return any(d == wanted or ("." not in wanted and d.rpartition(".")[2] == wanted)
               for d in datamaps)
