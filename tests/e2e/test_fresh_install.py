"""What a new user gets from README's first command: the project installed with
`python3 -m pip install .` into a new virtual environment (no system site-packages, no test
extras: only what pyproject.toml declares, resolved from the package index), then
`datamap-proxy serve` from that environment, outside the checkout. A datamap answer must be
served in-process by the serving tier there too (EXPLAIN says so, the log says the local
engine answered), with Spark's exact rows: a dependency the serving tier imports but the
project does not declare (DuckDB's Python functions need numpy) turns it off, and only an
install like a user's can see it."""
from __future__ import annotations

import subprocess
import time

import pytest

from tests.support.clients import RawHS2
from tests.support.e2e import ServeProc, sort_rows
from tests.support.package import copy_source, fresh_venv

pytestmark = pytest.mark.spark

DATAMAP = ("CREATE DATAMAP agg_sales USING 'mv' AS SELECT country, sex, sum(quantity), "
           "avg(price) FROM sales GROUP BY country, sex")
QUERY = "SELECT country, sum(quantity) q, avg(price) p FROM sales GROUP BY country"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    root = tmp_path_factory.mktemp("fresh_install")
    venv = fresh_venv(root / "venv", copy_source(root / "src"))
    srv = ServeProc(root / "serve", root / "state", env={"TZ": "UTC"}, installed=venv)
    try:
        yield venv, srv
    finally:
        srv.kill()


def test_the_install_is_the_declared_dependencies_only(installed):
    """The environment is the install's own: its Python does not see the tests' packages,
    and the proxy it runs is the installed one, not this checkout."""
    venv, srv = installed
    python = str(venv / "bin" / "python")
    proc = subprocess.run([python, "-c", "import importlib.util as u, proxy, sys; "
                           "print(proxy.__file__); print(sys.flags.no_site, "
                           "u.find_spec('pytest') is None)"],
                          cwd=venv, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    where, flags = proc.stdout.splitlines()
    assert where.startswith(str(venv)), where
    assert flags.endswith("True"), "the test extras leaked into a plain install"
    assert srv.proc.args[0] == str(venv / "bin" / "datamap-proxy")


def test_a_datamap_answer_is_served_in_process(installed):
    venv, srv = installed
    log_start = len(srv.log_path.read_bytes())
    with RawHS2("127.0.0.1", srv.port) as proxy:
        proxy.execute("CREATE TABLE sales (country STRING, sex STRING, quantity INT, "
                      "price DECIMAL(10,2)) USING parquet")
        proxy.execute("INSERT INTO sales VALUES ('FR', 'f', 3, 9.99), ('FR', 'm', 1, 0.01), "
                      "('DE', 'f', 7, 1.50), ('DE', NULL, NULL, NULL)")
        proxy.execute(DATAMAP)
        proxy.execute("INSERT INTO sales VALUES ('IT', 'm', 2, 2.25)")   # a second segment
        plan = proxy.execute("EXPLAIN " + QUERY).rows[0][0]
        assert "Hit mv DataMap: agg_sales" in plan, plan[:1500]
        assert "Served by: local engine" in plan, plan[:1500]
        times, got = [], None
        for _ in range(5):
            t0 = time.perf_counter()
            got = proxy.execute(QUERY)
            times.append(time.perf_counter() - t0)
    with RawHS2("127.0.0.1", srv.engine_port) as spark:
        want = spark.execute(QUERY)
    assert (got.columns, got.types) == (want.columns, want.types)
    assert sort_rows(got.rows) == sort_rows(want.rows)
    log = srv.log_path.read_bytes()[log_start:].decode(errors="replace")
    assert "served=local" in log, srv.tail(60)
    assert "served=spark" not in log, srv.tail(60)
    start = srv.log_path.read_text(errors="replace")[:log_start]
    assert "could not start" not in start and "Traceback" not in start, start[-4000:]
    print(f"fresh install: served answer median {sorted(times)[2] * 1000:.1f} ms")
