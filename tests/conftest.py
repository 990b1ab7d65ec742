"""Suite-wide pytest options. Keep this file small: fixtures live next to the tests.

--targets   which endpoints the integration suite runs against: "direct" (Spark Thrift
            Server itself), "proxy" (the proxy in front of it), or both (the default).
            Narrowing it is for development only; CI runs both.
"""
from __future__ import annotations


def pytest_addoption(parser):
    parser.addoption(
        "--targets", default="direct,proxy",
        help="comma-separated integration targets: direct, proxy (default: both)")
