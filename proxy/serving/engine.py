"""The in-process engine: DuckDB over datamap Parquet files, in a bounded pool of threads.

One in-memory DuckDB database per proxy; each worker thread has its own cursor (DuckDB
connections are not shared between threads). A query runs within `timeout` seconds or
is interrupted; any failure (an error DuckDB raises where Spark would fail or answer
otherwise, a file gone, the timeout) is reported as EngineFailure and the caller sends
the query to Spark. A served answer (`run`) comes back column by column as the client gets
it (proxy/serving/columnar.py), or, for a plan with a column that path does not take, as
rows of Python values (decimals as Decimal with their scale, dates as date), which
proxy/thrift/rowsets.py formats one by one; `run_blocking` always gives the rows.

An engine that cannot start (DuckDB not importable, a setting it refuses, its Python UDF
not registrable: DuckDB 2.x needs numpy for that) raises EngineUnavailable, whose cause
and fix are what serve logs, EXPLAIN, doctor and the console show (docs/serving.md).
`check()` runs CHECK_SQL, a query through that UDF: the engine is up once it answered.
"""
from __future__ import annotations

import asyncio
import decimal
import logging
import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from proxy.serving.columnar import FALLBACK, RETYPED, columns_of, projection
from proxy.serving.timestamps import ZONE_MACROS
from proxy.serving.translate import Plan
from proxy.thrift.columns import ColumnarRows
from rewriter.bytecache import ByteLRU

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


class EngineUnavailable(Exception):
    """The engine cannot start: `cause` (one line) and `fix` (what to do about it)."""

    def __init__(self, cause: str, fix: str, version: str | None = None):
        super().__init__(cause)
        self.cause = cause
        self.fix = fix
        self.version = version            # DuckDB's, when it was importable

    @property
    def engine(self) -> str:
        return f"DuckDB {self.version}" if self.version else "DuckDB"


# A query through everything a served answer needs: the database, a cursor, and the Python
# UDF (called on a row, so DuckDB really runs it). Its answer is CHECK_ANSWER.
CHECK_SQL = "SELECT spark_decimal_div(CAST(x AS VARCHAR), '3', 10, 6) FROM (VALUES (1)) t(x)"
CHECK_ANSWER = [("0.333333",)]
PROJECTION_BYTES = 16 << 20     # plans' columnar projections kept (their SQL twice)
SMALL = 64      # an answer of fewer rows is fetched as rows (columnar.py: the break-even)
_REQUIRED = re.compile(r"'([A-Za-z_][\w.-]*)' is required")
_DUCKDB_KIND = re.compile(r"^[A-Z][A-Za-z ]*Error: ")


def start_failure(stage: str, e: BaseException, version: str | None = None
                  ) -> EngineUnavailable:
    """What a failed start says: the cause (DuckDB's message, or the missing module) and
    the fix. `stage`: "import", "open", "register" or "check"."""
    pip = f"{sys.executable} -m pip install"
    if isinstance(e, ImportError):
        name = (e.name or "duckdb").split(".")[0]
        return EngineUnavailable(
            f"{name} is not importable ({_why(e)})",
            f"install {name} into the proxy's Python environment ({pip} {name}), or "
            "reinstall datamap-proxy, which depends on it", version)
    text = _DUCKDB_KIND.sub("", _why(e))
    needed = _REQUIRED.search(text)
    if needed:
        name = needed.group(1)
        return EngineUnavailable(text, f"install {name} into the proxy's Python environment "
                                       f"({pip} {name}), or reinstall datamap-proxy", version)
    if stage == "open":
        return EngineUnavailable(text, "check [serving] threads and memory_limit (DuckDB "
                                       "refused them)", version)
    return EngineUnavailable(f"{text} (while {_STAGES.get(stage, stage)})",
                             "see the DEBUG log line for the traceback; [serving] enabled = "
                             "false turns in-process serving off", version)


_STAGES = {"register": "registering its Python function", "check": "running its check query"}


class LocalEngine:
    """Raises EngineUnavailable when it cannot start (start_failure)."""

    def __init__(self, threads: int = 2, memory_limit: str = "1GB", workers: int = 2,
                 small: int = SMALL):
        try:
            import duckdb
            from duckdb import sqltypes as T
        except ImportError as e:
            raise start_failure("import", e) from e
        version = getattr(duckdb, "__version__", None)
        try:
            self._db = duckdb.connect(":memory:", config={
                "threads": max(1, threads), "memory_limit": memory_limit,
                "enable_external_access": True, "preserve_insertion_order": True,
                # never fetch an extension from the network on a query's path
                "autoinstall_known_extensions": False, "autoload_known_extensions": False})
        except Exception as e:  # noqa: BLE001 - reported with its cause and fix
            raise start_failure("open", e, version) from e
        try:    # served SQL computes on instants as UTC times (proxy/serving/timestamps.py),
            # never in the machine's zone: GLOBAL, as each worker's cursor is a connection of
            # its own, which a plain SET (this connection's session) would leave in TZ's zone
            self._db.execute("SET GLOBAL TimeZone = 'UTC'")
            for macro in ZONE_MACROS:       # named zones' conversions, over ICU's rules
                self._db.execute(macro)
        except duckdb.Error as e:   # without ICU (never in the wheel: statically linked)
            self._db.close()
            raise start_failure("register", e, version) from e
        try:
            self._db.create_function("spark_decimal_div", spark_decimal_div,
                                     [T.VARCHAR, T.VARCHAR, T.INTEGER, T.INTEGER], T.VARCHAR,
                                     null_handling="special")
        except Exception as e:  # noqa: BLE001 - e.g. DuckDB 2.x without numpy
            self._db.close()
            raise start_failure("register", e, version) from e
        self.version = version
        self._local = threading.local()
        self._cursors: list[Any] = []
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers),
                                        thread_name_prefix="serving")
        self._closed = False
        self._small = small     # fewer rows: fetched as rows (SMALL; tests: 0, never)
        # plan SQL and types -> (its columnar projection, "": none; its last answer's rows)
        self._projections: ByteLRU[str, tuple[str, int]] = ByteLRU(
            PROJECTION_BYTES, lambda k, v: 2 * (len(k) + len(v[0])))

    def _cursor(self):
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            with self._lock:
                cur = self._db.cursor()
                self._cursors.append(cur)
            self._local.cursor = cur
        return cur

    def _rows(self, plan: Plan, box: list) -> list[tuple]:
        cur = self._cursor()
        box.append(cur)
        return cur.execute(plan.sql).fetchall()

    def _run(self, plan: Plan, box: list) -> ColumnarRows | list[tuple]:
        """The plan's answer as the client gets it: column by column; or rows when a column
        is outside the columnar path, a value is (FALLBACK), or the plan's last answer was
        under SMALL rows (planning the projection costs more than they take to convert)."""
        cur = self._cursor()
        box.append(cur)
        types = [t for _, t in plan.columns]
        key = "\n".join([plan.sql, *types])    # a projection is written for both
        wrapped, last = self._projection(cur, key, plan.sql, types)
        if wrapped and last >= self._small:
            try:
                data = columns_of(cur.execute(wrapped).fetchnumpy(), types)
            except Exception as e:  # noqa: BLE001 - other errors are the plan's own
                if FALLBACK not in str(e):
                    raise
                if RETYPED in str(e):
                    self._projections.pop(key)      # the types are read again next time
            else:
                if len(data) < self._small:
                    self._projections.put(key, (wrapped, len(data)))
                return data
        rows = cur.execute(plan.sql).fetchall()
        if wrapped and last < self._small <= len(rows):
            self._projections.put(key, (wrapped, len(rows)))
        return rows

    def _projection(self, cur, key: str, sql: str, types: list[str]) -> tuple[str, int]:
        """(the columnar projection (columnar.py) of `sql` with Spark `types`, "" when there
        is none; the rows of its last answer, SMALL when unknown). The projection is
        written from the types DuckDB binds `sql` to: once, kept within PROJECTION_BYTES."""
        known = self._projections.get(key)
        if known is not None:
            return known
        try:
            duck_types = cur.sql(sql).types
        except Exception:  # noqa: BLE001 - the plan's own error: the rows path reports it
            return "", SMALL
        wrapped = projection(sql, types, duck_types) or ""
        self._projections.put(key, (wrapped, SMALL))
        return wrapped, SMALL

    def check(self) -> None:
        """Answer CHECK_SQL on a worker's cursor, or raise EngineUnavailable."""
        def run() -> list[tuple]:
            return self._cursor().execute(CHECK_SQL).fetchall()
        try:
            got = self._pool.submit(run).result(timeout=60)
        except Exception as e:  # noqa: BLE001 - reported with its cause and fix
            raise start_failure("check", e, self.version) from e
        if got != CHECK_ANSWER:
            raise EngineUnavailable(f"the check query answered {got!r}, not {CHECK_ANSWER!r}",
                                    "reinstall datamap-proxy (a DuckDB it was not tested "
                                    "with?)", self.version)

    def run_blocking(self, plan: Plan) -> list[tuple]:
        """For tests and tools: the rows as Python values, or EngineFailure."""
        try:
            return self._rows(plan, [])
        except Exception as e:  # noqa: BLE001 - every engine error sends the query to Spark
            raise EngineFailure(_why(e)) from e

    def answer_blocking(self, plan: Plan) -> ColumnarRows | list[tuple]:
        """For tests and tools: what `run` answers, or EngineFailure."""
        try:
            return self._run(plan, [])
        except Exception as e:  # noqa: BLE001 - every engine error sends the query to Spark
            raise EngineFailure(_why(e)) from e

    async def run(self, plan: Plan, timeout: float) -> ColumnarRows | list[tuple]:
        """The served answer (`_run`) within `timeout` seconds, or EngineFailure."""
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
