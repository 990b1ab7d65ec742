"""Two `serve` replicas on one PostgreSQL catalog (docs/replicas.md): one leads, a killed
leader's role moves to the survivor, a stopped one hands it over at once, and neither logs
the catalog's password. No Spark: the upstream is a closed port (nothing here opens a
session) and without datamaps no pipeline session starts."""
from __future__ import annotations

import signal

from proxy.datamaps.catalog.store import Catalog
from proxy.ha import leader
from tests.support.lease_worker import wait_until
from tests.support.ports import free_port, signal_group
from tests.support.proxy_proc import NO_SERVING, start_proxy

TTL_S = 2.0


def _holder(catalog: Catalog) -> str | None:
    held = catalog.lease_holder(leader.LEADER)
    return None if held is None else held[0]


def _pid_of(holder: str) -> int:
    return int(holder.split(":")[-2])


def test_two_replicas_share_one_leader(tmp_path, postgres):
    url = postgres.new_database()
    config = tmp_path / "proxy.toml"
    config.write_text(f'[state]\ncatalog = "{url}"\nlease_ttl_s = {TTL_S}\n')
    dead_upstream = ("127.0.0.1", free_port())
    replicas = [start_proxy(tmp_path / name, dead_upstream, extra_args=["--config", str(config)],
                            env=NO_SERVING) for name in ("a", "b")]
    catalog = Catalog(url)
    try:
        first = wait_until("a leader", lambda: _holder(catalog))
        by_pid = {r.pid: r for r in replicas}
        assert _pid_of(first) in by_pid
        survivor = next(r for r in replicas if r.pid != _pid_of(first))
        signal_group(_pid_of(first), signal.SIGKILL)        # no release: the lease expires
        wait_until("the survivor to lead",
                  lambda: (_holder(catalog) or ":0:").split(":")[-2] == str(survivor.pid))
        assert survivor.stop() == 0
        assert _holder(catalog) is None                      # a clean stop hands it over
        for r in replicas:
            text = r.log_path.read_text()
            assert postgres.password not in text
        assert f"datamap catalog: {catalog.path}" in survivor.log_path.read_text()
    finally:
        catalog.close()
        for r in replicas:
            r.stop(5)
