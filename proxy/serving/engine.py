"""The in-process engine: DuckDB over datamap Parquet files, in a bounded pool of threads.

One in-memory DuckDB database per proxy; each worker thread has its own cursor (DuckDB
connections are not shared between threads). A query runs within `timeout` seconds or
is interrupted; any failure (an error DuckDB raises where Spark would fail or answer
otherwise, a file gone, the timeout) is reported as EngineFailure and the caller sends
the query to Spark. Values come back as Spark's HS2 encoding expects them (decimals as
Decimal with their scale, dates as date).
"""
from __future__ import annotations

import asyncio
import decimal
import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from proxy.serving.translate import Plan

log = logging.getLogger("proxy.serving")

# Spark's Decimal division: the exact quotient rounded HALF_UP to the result scale, once
# (measured on Spark 4: 10^30 / (2*10^36+1) is 0.000000 as decimal(38,6); rounding first to
# scale 38 gives 0.000001). A quotient off a rounding boundary is off it by at least
# 1/(2 * 10^76 * 10^38) (numerator and denominator have at most 76 digits once scaled);
# 200 significant digits of a quotient under 10^38 are closer than that, so rounding them
# is rounding the exact quotient (a larger one overflows and raises either way).
_CONTEXT = decimal.Context(prec=200, rounding=decimal.ROUND_HALF_UP, traps=[
    decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow])


def spark_decimal_div(a: str | None, b: str | None, p: int, s: int) -> str | None:
    """a / b as Spark computes decimal division: the exact quotient rounded HALF_UP to
    scale `s`; NULL when either side is NULL. A zero divisor or a result over `p` digits
    raises (Spark: NULL or an error by ANSI mode), so the query goes to Spark."""
    if a is None or b is None:
        return None
    x, y = decimal.Decimal(a), decimal.Decimal(b)
    if y == 0:
        raise ZeroDivisionError("division by zero")
    q = _CONTEXT.divide(x, y).quantize(decimal.Decimal(1).scaleb(-s), context=_CONTEXT)
    if len(q.as_tuple().digits) > p and q != 0:
        raise OverflowError(f"decimal({p},{s}) overflow")
    return format(q, "f")


class EngineFailure(Exception):
    """The engine did not answer; the message says why (for the statement log)."""


class LocalEngine:
    def __init__(self, threads: int = 2, memory_limit: str = "1GB", workers: int = 2):
        import duckdb
        from duckdb import sqltypes as T

        self._db = duckdb.connect(":memory:", config={
            "threads": max(1, threads), "memory_limit": memory_limit,
            "enable_external_access": True, "preserve_insertion_order": True,
            # never fetch an extension from the network on a query's path
            "autoinstall_known_extensions": False, "autoload_known_extensions": False})
        try:    # instants become local times by the offset translate.py adds, never by
            self._db.execute("SET TimeZone = 'UTC'")   # the machine's zone (with ICU)
        except duckdb.Error:
            pass        # without ICU, DuckDB's time zone is UTC already
        self._db.create_function("spark_decimal_div", spark_decimal_div,
                                 [T.VARCHAR, T.VARCHAR, T.INTEGER, T.INTEGER], T.VARCHAR,
                                 null_handling="special")
        self._local = threading.local()
        self._cursors: list[Any] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers),
                                        thread_name_prefix="serving")
        self._closed = False

    def _cursor(self):
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            with self._lock:
                cur = self._db.cursor()
                self._cursors.append(cur)
            self._local.cursor = cur
        return cur

    def _run(self, plan: Plan, box: list) -> list[tuple]:
        cur = self._cursor()
        box.append(cur)
        return cur.execute(plan.sql).fetchall()

    def run_blocking(self, plan: Plan) -> list[tuple]:
        """For tests and tools: the rows, or EngineFailure."""
        try:
            return self._run(plan, [])
        except Exception as e:  # noqa: BLE001 - every engine error sends the query to Spark
            raise EngineFailure(_why(e)) from e

    async def run(self, plan: Plan, timeout: float) -> list[tuple]:
        if self._closed:
            raise EngineFailure("the local engine is closed")
        box: list = []
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(self._pool, self._run, plan, box)
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            if box:
                try:
                    box[0].interrupt()
                except Exception:  # noqa: BLE001
                    pass
            raise EngineFailure(f"no answer within {timeout:g} s") from None
        except asyncio.CancelledError:
            if box:
                box[0].interrupt()
            raise
        except Exception as e:  # noqa: BLE001 - every engine error sends the query to Spark
            raise EngineFailure(_why(e)) from e

    def close(self) -> None:
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            for cur in self._cursors:
                try:
                    cur.interrupt()
                    cur.close()
                except Exception:  # noqa: BLE001
                    pass
            self._cursors.clear()
        try:
            self._db.close()
        except Exception:  # noqa: BLE001
            pass


def _why(e: BaseException) -> str:
    text = str(e).splitlines()[0] if str(e) else type(e).__name__
    return text[:200]
