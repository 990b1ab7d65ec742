"""Run SQL through each real HiveServer2 client and return comparable results.

Every helper returns `Result(columns, types, rows)`:
  columns  list of column names as the client reports them
  types    list of type names as the client reports them (PyHive / raw Thrift: TTypeId
           names such as "INT_TYPE"; impyla: its names such as "INT"); None for beeline,
           whose text output carries no types
  rows     list of tuples of the client's own Python values (beeline: strings, NULL as
           the text "NULL")
Comparing the same client direct vs through the proxy is then `==`.

Errors: `ClientError(sqlstate, message)` from PyHive/impyla/raw calls; beeline reports
errors per run (`BeelineRun.errors`).
"""
from __future__ import annotations

import asyncio
import csv
import re
import subprocess
import threading
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.sts import spark_env, spark_home


def beeline() -> Path:
    """The installed pyspark's beeline (looked up at first use: pyspark may not be there)."""
    return spark_home() / "bin" / "beeline"


BEELINE_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@dataclass
class Result:
    columns: list[str]
    types: list[str] | None
    rows: list[tuple[Any, ...]]


class ClientError(Exception):
    """A statement-level error reported by the server, normalised across clients."""

    def __init__(self, sqlstate: str | None, message: str):
        super().__init__(f"[{sqlstate}] {message}")
        self.sqlstate = sqlstate
        self.message = message


# --------------------------------------------------------------------------- beeline

def jdbc_url(host: str, port: int, database: str = "default", *, nosasl: bool = False,
             params: str = "") -> str:
    """jdbc:hive2://host:port/db[;auth=noSasl][;params]"""
    url = f"jdbc:hive2://{host}:{port}/{database}"
    if nosasl:
        url += ";auth=noSasl"
    if params:
        url += ";" + params.lstrip(";")
    return url


@dataclass
class BeelineRun:
    results: list[Result]            # one per statement, in order (empty Result: no output)
    errors: list[tuple[str | None, str]]   # (SQLSTATE, first message line) in order
    returncode: int
    stdout: str = field(repr=False)
    stderr: str = field(repr=False)


_ERROR_RE = re.compile(r"^Error: (.*)$", re.MULTILINE)
_STATE_RE = re.compile(r"\(state=([0-9A-Za-z]*),code=-?\d+\)\s*$", re.MULTILINE)


def _strip_progress(line: str) -> str:
    # Beeline's in-place progress writes "\r<status>  \r<status>" before a header; STS sends
    # no progress so the status prints as "null". Keep only what follows the last "\r".
    if "\r" in line:
        line = line[line.rindex("\r") + 1:]
        if line.startswith("null"):
            line = line[4:]
    return line


def _parse_block(lines: list[str]) -> Result:
    lines = [_strip_progress(l) for l in lines]
    lines = [l for l in lines if l != ""]
    if not lines:
        return Result([], None, [])
    # Beeline 2.3 disables csv quoting by default and uses NUL as the quote character.
    parsed = list(csv.reader(lines, delimiter=",", quotechar="\x00"))
    return Result(parsed[0], None, [tuple(r) for r in parsed[1:]])


def run_beeline(url: str, statements: list[str], *, user: str = "me", password: str = "x",
                workdir: Path | None = None, timeout: float = 180.0,
                silent: bool = True, env: dict[str, str] | None = None) -> BeelineRun:
    """Run `statements` (SQL without the trailing ';', or beeline commands such as
    `!tables`, `!columns t`) in ONE beeline process (one JVM start-up) with `--force` so that
    a failing statement does not stop the script. Results are split per statement with
    marker queries (`SELECT '<marker>' AS blmark`) between them. `silent=False` lets beeline
    print what it prints interactively too, such as operation logs. `env` is added to
    beeline's environment (its JAVA_TOOL_OPTIONS after the ones set here)."""
    token = uuid.uuid4().hex[:12]
    script: list[str] = []
    for i, stmt in enumerate(statements):
        stmt = stmt.strip()
        script.append(stmt if stmt.startswith("!") else stmt.rstrip(";") + ";")
        script.append(f"SELECT 'BLMARK_{token}_{i}' AS blmark;")
    workdir = Path(workdir) if workdir else Path("/tmp")
    workdir.mkdir(parents=True, exist_ok=True)
    script_path = workdir / f"beeline-{token}.sql"
    script_path.write_text("\n".join(script) + "\n")
    cmd = [str(beeline()), "-u", url, "-n", user, "-p", password, "--outputformat=csv2",
           f"--silent={str(silent).lower()}", "--showHeader=true", "--force=true", "-f", str(script_path)]
    extra = dict(env or {})
    env = spark_env()
    # beeline is a short-lived client (two JVMs: spark-class's launcher, then BeeLine):
    # C1-only JIT and the serial GC cut its start-up by about a third.
    jvm = " ".join(o for o in (env.get("JAVA_TOOL_OPTIONS", ""), BEELINE_JVM_OPTS,
                               extra.pop("JAVA_TOOL_OPTIONS", "")) if o)
    env.update(extra)
    env["JAVA_TOOL_OPTIONS"] = jvm
    proc = subprocess.run(cmd, cwd=workdir, env=env, capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)
    stdout = proc.stdout.decode("utf-8", "replace")
    stderr = proc.stderr.decode("utf-8", "replace")

    results: list[Result] = []
    block: list[str] = []
    lines = stdout.split("\n")
    i = 0
    while i < len(lines):
        line = _strip_progress(lines[i])
        if line == "blmark" and i + 1 < len(lines) and lines[i + 1].startswith(f"BLMARK_{token}_"):
            results.append(_parse_block(block))
            block = []
            i += 2
            continue
        block.append(lines[i])
        i += 1
    errors = []
    for m in _ERROR_RE.finditer(stderr):
        first = m.group(1)
        state = _STATE_RE.search(stderr, m.end())
        errors.append((state.group(1) if state else None, first))
    script_path.unlink(missing_ok=True)
    return BeelineRun(results, errors, proc.returncode, stdout, stderr)


# --------------------------------------------------------------------------- PyHive

def pyhive_connect(host: str, port: int, *, database: str = "default", auth: str = "NONE",
                   username: str = "me", configuration: dict[str, str] | None = None):
    from pyhive import hive
    return hive.connect(host=host, port=port, database=database, auth=auth,
                        username=username, configuration=configuration)


def _pyhive_error(exc: Exception) -> ClientError:
    resp = exc.args[0] if exc.args else None
    status = getattr(resp, "status", None)
    if status is not None:
        return ClientError(status.sqlState, status.errorMessage or "")
    return ClientError(None, str(exc))


def pyhive_execute(cursor, sql: str) -> Result:
    """Execute + fetchall on a PyHive cursor; raises ClientError on a server error."""
    from pyhive import exc as pyhive_exc
    try:
        cursor.execute(sql)
        rows = cursor.fetchall() if cursor.description is not None else []
    except pyhive_exc.OperationalError as e:
        raise _pyhive_error(e) from e
    desc = cursor.description or []
    return Result([d[0] for d in desc], [d[1] for d in desc], [tuple(r) for r in rows])


def pyhive_query(host: str, port: int, sql: str, **connect_kw) -> Result:
    conn = pyhive_connect(host, port, **connect_kw)
    try:
        cur = conn.cursor()
        try:
            return pyhive_execute(cur, sql)
        finally:
            cur.close()
    finally:
        conn.close()


# --------------------------------------------------------------------------- impyla

def impyla_connect(host: str, port: int, *, auth: str = "PLAIN", database: str | None = None,
                   user: str = "me", password: str = "x", timeout: float = 60):
    from impala import dbapi
    kw = {"user": user, "password": password} if auth == "PLAIN" else {}
    return dbapi.connect(host=host, port=port, auth_mechanism=auth, database=database,
                         timeout=timeout, **kw)


def impyla_execute(cursor, sql: str, *, fetch: bool = True) -> Result:
    """Execute (+ fetchall when `fetch`). impyla 0.24 crashes fetching the empty 'Result'
    set that Spark returns for DDL/DML, so pass fetch=False for those."""
    from impala import error as impala_error
    try:
        cursor.execute(sql)
        rows = cursor.fetchall() if fetch and cursor.description is not None else []
    except impala_error.Error as e:
        raise ClientError(getattr(e, "sqlstate", None), str(e)) from e
    desc = cursor.description or []
    return Result([d[0] for d in desc], [d[1] for d in desc], [tuple(r) for r in rows])


# --------------------------------------------------------------------------- raw Thrift

class RawHS2:
    """A TCLIService session through the proxy's own asyncio HiveServer2 client
    (proxy/upstream/client.py), made blocking for tests: `raw.client.<Call>(req)` sends one request
    and returns the decoded response whatever its status; `raw.t` is the ttypes module. The
    helpers return a Result or raise ClientError (a lost connection too). Like PyHive, it
    asks for protocol V6, logs in with password "x" and runs USE `database`."""

    def __init__(self, host: str, port: int, *, auth: str = "NONE", database: str = "default",
                 username: str = "me", timeout: float = 600.0):
        from proxy.config import UpstreamSettings
        from proxy.thrift.gen.TCLIService import ttypes
        from proxy.upstream.client import UpstreamSession

        self.t = ttypes
        # The client is asyncio; tests are blocking (and some run inside an event loop), so
        # it lives on a loop of its own in a thread this object owns and joins.
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name=f"raw-hs2-{host}:{port}", daemon=True)
        self._thread.start()
        self._upstream = UpstreamSession(UpstreamSettings(
            host=host, port=port, auth="nosasl" if auth.upper() == "NOSASL" else "plain",
            connect_timeout=timeout, call_timeout=timeout))
        self.client = _Calls(self)
        try:
            resp = self._run(self._upstream.open(
                username, "x", ttypes.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V6, None))
            self.session = self._check(resp).sessionHandle
            if database:
                self.execute(f"USE `{database}`")
        except BaseException:
            self.close()
            raise

    def _run(self, coro) -> Any:
        from proxy.errors import UpstreamError
        try:
            return asyncio.run_coroutine_threadsafe(coro, self._loop).result()
        except UpstreamError as e:
            raise ClientError(e.sqlstate, str(e)) from e

    def close(self) -> None:
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            asyncio.run_coroutine_threadsafe(self._upstream.close(), self._loop).result()
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join()
        self._loop.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _check(self, resp):
        st = resp.status
        if st.statusCode not in (self.t.TStatusCode.SUCCESS_STATUS,
                                 self.t.TStatusCode.SUCCESS_WITH_INFO_STATUS):
            raise ClientError(st.sqlState, st.errorMessage or "")
        return resp

    def _columns(self, tcols, ncols: int) -> list[list[Any]]:
        """A columnar rowset's columns as lists of values (None for NULL)."""
        from proxy.thrift.rowsets import decode_rowset
        rows = decode_rowset(self.t.TRowSet(startRowOffset=0, rows=[], columns=tcols), ncols)
        return [list(c) for c in zip(*rows)]

    def fetch_all(self, op_handle, batch: int = 1000) -> Result:
        """GetResultSetMetadata, then FetchResults(NEXT) until an empty batch; closes the op."""
        t = self.t
        try:
            meta = self._check(self.client.GetResultSetMetadata(
                t.TGetResultSetMetadataReq(operationHandle=op_handle)))
            names = [c.columnName for c in meta.schema.columns]
            types = []
            for c in meta.schema.columns:
                entry = c.typeDesc.types[0]
                type_id = entry.primitiveEntry.type if entry.primitiveEntry else t.TTypeId.STRING_TYPE
                name = t.TTypeId._VALUES_TO_NAMES[type_id]
                quals = getattr(entry.primitiveEntry, "typeQualifiers", None)
                if quals is not None and quals.qualifiers:      # decimal(p,s), varchar(n)
                    name += "(" + ",".join(str(v.i32Value) for _, v in
                                           sorted(quals.qualifiers.items())) + ")"
                types.append(name)
            rows = self._run(self._upstream.fetch_rows(op_handle, len(names), batch))
            return Result(names, types, rows)
        finally:
            self.client.CloseOperation(t.TCloseOperationReq(operationHandle=op_handle))

    def _op(self, resp) -> Result:
        self._check(resp)
        return self.fetch_all(resp.operationHandle)

    def execute(self, sql: str, run_async: bool = False) -> Result:
        t = self.t
        resp = self._check(self.client.ExecuteStatement(t.TExecuteStatementReq(
            sessionHandle=self.session, statement=sql, runAsync=run_async)))
        op = resp.operationHandle
        if run_async:
            self.wait(op)
        if not op.hasResultSet:
            self.client.CloseOperation(t.TCloseOperationReq(operationHandle=op))
            return Result([], None, [])
        return self.fetch_all(op)

    def wait(self, op, timeout: float = 120.0) -> int:
        import time
        t = self.t
        deadline = time.monotonic() + timeout
        while True:
            st = self._check(self.client.GetOperationStatus(
                t.TGetOperationStatusReq(operationHandle=op)))
            state = st.operationState
            if state == t.TOperationState.ERROR_STATE:
                raise ClientError(st.sqlState, st.errorMessage or "")
            if state not in (t.TOperationState.INITIALIZED_STATE, t.TOperationState.RUNNING_STATE,
                             t.TOperationState.PENDING_STATE):
                return state
            if time.monotonic() > deadline:
                raise TimeoutError(f"operation still in state {state} after {timeout}s")
            time.sleep(0.05)

    def get_info(self, info_type: int):
        t = self.t
        resp = self._check(self.client.GetInfo(t.TGetInfoReq(sessionHandle=self.session,
                                                             infoType=info_type)))
        v = resp.infoValue
        for attr in ("stringValue", "smallIntValue", "integerBitmask", "integerFlag",
                     "binaryValue", "lenValue"):
            if getattr(v, attr) is not None:
                return getattr(v, attr)
        return None

    def get_catalogs(self) -> Result:
        return self._op(self.client.GetCatalogs(self.t.TGetCatalogsReq(sessionHandle=self.session)))

    def get_schemas(self, catalog: str | None = None, schema: str | None = None) -> Result:
        return self._op(self.client.GetSchemas(self.t.TGetSchemasReq(
            sessionHandle=self.session, catalogName=catalog, schemaName=schema)))

    def get_tables(self, catalog: str | None = None, schema: str | None = "%",
                   table: str | None = "%", types: list[str] | None = None) -> Result:
        return self._op(self.client.GetTables(self.t.TGetTablesReq(
            sessionHandle=self.session, catalogName=catalog, schemaName=schema,
            tableName=table, tableTypes=types)))

    def get_table_types(self) -> Result:
        return self._op(self.client.GetTableTypes(
            self.t.TGetTableTypesReq(sessionHandle=self.session)))

    def get_columns(self, catalog: str | None = None, schema: str | None = None,
                    table: str | None = None, column: str | None = "%") -> Result:
        return self._op(self.client.GetColumns(self.t.TGetColumnsReq(
            sessionHandle=self.session, catalogName=catalog, schemaName=schema,
            tableName=table, columnName=column)))

    def get_type_info(self) -> Result:
        return self._op(self.client.GetTypeInfo(self.t.TGetTypeInfoReq(sessionHandle=self.session)))

    def get_functions(self, catalog: str | None = None, schema: str | None = None,
                      function: str = "%") -> Result:
        return self._op(self.client.GetFunctions(self.t.TGetFunctionsReq(
            sessionHandle=self.session, catalogName=catalog, schemaName=schema,
            functionName=function)))


class _Calls:
    """`raw.client.GetInfo(req)` & co: one TCLIService call, answered synchronously."""

    def __init__(self, raw: RawHS2):
        self._raw = raw

    def __getattr__(self, name: str):
        def call(req):
            return self._raw._run(self._raw._upstream.conn.call(name, req))
        return call
