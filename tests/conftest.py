"""Suite-wide pytest options. Keep this file small: fixtures live next to the tests.

--targets   which endpoints the integration suite runs against: "direct" (Spark Thrift
            Server itself), "proxy" (the proxy in front of it), or both (the default).
            Narrowing it is for development only; CI runs both.

The processes the tests start read the project's modules compiled once for the run
(tests/support/bytecode.py), where Python is told not to write bytecode.

scripts/test runs the fast tier (-m "not spark") in two pytest-xdist workers, then the Spark
tier (-m spark) in one process: its Spark tests share servers and state across modules.

`postgres`: one real PostgreSQL for the whole session (tests/support/postgres.py), started
at first use; each test takes a fresh database with new_database().
"""
from __future__ import annotations

import pytest

from tests.support import bytecode, collected
from tests.support import postgres as pg_support


def pytest_addoption(parser):
    parser.addoption(
        "--targets", default="direct,proxy",
        help="comma-separated integration targets: direct, proxy (default: both)")


def pytest_configure(config):
    config._datamap_pycache = bytecode.share()


def pytest_unconfigure(config):
    bytecode.remove(getattr(config, "_datamap_pycache", None))


def pytest_collection_finish(session):
    collected.record()


@pytest.fixture(scope="session")
def postgres():
    if pg_support.bin_dir() is None:
        pytest.fail("PostgreSQL is not installed (Debian package postgresql; scripts/test "
                    "installs it)")
    server = pg_support.PostgresServer.start()
    yield server
    server.stop()
