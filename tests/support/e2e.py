"""Helpers for the end-to-end suite: one `python -m proxy serve` (embedded Spark) per
module, PyHive connections with datamap rewriting on and off, row comparison."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Iterable

from tests.support.clients import ClientError, pyhive_connect, pyhive_execute
from tests.support.proxy_proc import ServeProc  # noqa: F401  (re-exported)
from tests.support.sqldoc import block_statements, sql_blocks

__all__ = ["ServeProc", "Conn", "Pair", "ClientError", "LogSince", "sort_rows", "doc_blocks"]


def sort_rows(rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in rows), key=repr)


class Conn:
    """One PyHive connection (one proxy session)."""

    def __init__(self, port: int, *, rewrite: bool = True):
        self.conn = pyhive_connect("127.0.0.1", port)
        self.cur = self.conn.cursor()
        if not rewrite:
            self.run("SET datamap.rewrite.enabled=false")

    def run(self, sql: str):
        return pyhive_execute(self.cur, sql)

    def rows(self, sql: str) -> list[tuple[Any, ...]]:
        return sort_rows(self.run(sql).rows)

    def error(self, sql: str) -> ClientError:
        try:
            self.run(sql)
        except ClientError as e:
            # an error never comes without its reason ("... failed: " and nothing after it)
            assert e.message.strip() and not e.message.rstrip().endswith(":"), (sql, e)
            return e
        raise AssertionError(f"expected an error from: {sql}")

    def explain_until(self, sql: str, text: str, timeout: float = 10.0) -> str:
        """EXPLAIN `sql` until its plan holds `text` (an indexed table's shape for pruning
        loads on a worker thread) or `timeout` passes; the last plan."""
        deadline = time.monotonic() + timeout
        while True:
            plan = self.run(sql if sql.upper().startswith("EXPLAIN") else
                            "EXPLAIN " + sql).rows[0][0]
            if text in plan or time.monotonic() > deadline:
                return plan
            time.sleep(0.2)

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001
            pass


class Pair:
    """`dm` rewrites through datamaps; `base` has `SET datamap.rewrite.enabled=false`, so it
    answers from the base tables (Spark's own answer).

    `base` is a NEW session at every access: Spark Thrift Server sessions cache a table's
    file listing per session, so a session that read a table before another session's
    INSERT keeps answering from the old files (plain Spark behaviour, not the proxy's)."""

    def __init__(self, port: int):
        self.port = port
        self.dm = Conn(port)
        self._base: Conn | None = None

    @property
    def base(self) -> Conn:
        if self._base is not None:
            self._base.close()
        self._base = Conn(self.port, rewrite=False)
        return self._base

    def explain(self, sql: str) -> str:
        return self.dm.run("EXPLAIN " + sql).rows[0][0]

    def same(self, sql: str) -> list[tuple[Any, ...]]:
        got, want = self.dm.rows(sql), self.base.rows(sql)
        assert got == want, (f"datamap answer differs from base tables for {sql}:\n"
                             f"datamap: {got}\nbase:    {want}")
        return got

    def hit(self, sql: str, datamap: str) -> list[tuple[Any, ...]]:
        plan = self.explain(sql)
        assert f"Hit mv DataMap: {datamap}" in plan.splitlines(), plan[:2000]
        return self.same(sql)

    def miss(self, sql: str, *skipped: str) -> str:
        plan = self.explain(sql)
        lines = plan.splitlines()
        assert "No datamap hit" in lines, plan[:2000]
        for name in skipped:
            assert any(l.startswith(f"Skipped {name}: ") for l in lines), plan[:2000]
        self.same(sql)
        return plan

    def datamaps(self) -> dict[str, tuple]:
        return {r[0]: r for r in self.dm.run("SHOW DATAMAP").rows}

    def segments(self, table: str) -> list[tuple]:
        return self.dm.run(f"SHOW SEGMENTS FOR TABLE {table}").rows

    def close(self) -> None:
        self.dm.close()
        if self._base is not None:
            self._base.close()


class LogSince:
    """A server's log from the moment this is made on: what a module on the shared server
    checks its own lines in (the modules before it logged theirs above)."""

    def __init__(self, srv: ServeProc):
        self.path = srv.log_path
        self.start = self.path.stat().st_size

    def text(self) -> str:
        with open(self.path, "rb") as f:
            f.seek(self.start)
            return f.read().decode(errors="replace")


def state_table_dir(state: Path, table: str) -> Path:
    return state / "warehouse" / table


def doc_blocks(doc: Path) -> list[list[tuple[str, str]]]:
    """A document's sql blocks as (statement, the comment after it) pairs."""
    return [block_statements(block) for block in sql_blocks(doc)]


SHARED_PARSE_LIMIT = 1500
