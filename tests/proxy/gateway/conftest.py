"""The gateway's tests: a proxy as a subprocess pointed at a port nobody listens on, for
everything answered before OpenSession reaches the upstream (and nothing to serve: no
serving engine)."""
from __future__ import annotations

import pytest

from tests.support.ports import free_port
from tests.support.proxy_proc import NO_SERVING, start_proxy


@pytest.fixture
def proxy_without_spark(tmp_path):
    """start(*flags) -> a proxy without Spark; each one must stop cleanly at the end."""
    started = []

    def start(*flags: str, workdir: str = "proxy"):
        p = start_proxy(tmp_path / workdir, ("127.0.0.1", free_port()), extra_args=list(flags),
                        env=NO_SERVING)
        started.append(p)
        return p
    yield start
    for p in started:
        assert p.stop(check=True) == 0
