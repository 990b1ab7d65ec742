"""docs/limits.md stays true: its example loads, its SIGHUP list is proxy/gateway/reload.py's, and
the refusal texts it shows are the ones the code produces."""
import re
from pathlib import Path

import pytest

from proxy import config as cfg
from proxy.gateway.reload import RELOADABLE
from proxy.hs2.limits import RunGate, RunQueueError, SessionLimitReached, SessionLimits

DOC = (Path(__file__).resolve().parents[3] / "docs" / "limits.md").read_text()


def test_the_example_loads(tmp_path):
    example = re.search(r"```toml\n(.*?)```", DOC, re.S).group(1)
    (tmp_path / "proxy.toml").write_text(example)
    s = cfg.load(tmp_path / "proxy.toml", env={})
    assert s.server.limit_connections_per_user == 20 and s.server.max_running_operations == 16
    assert s.server.query_timeout == 1800.0 and s.upstream.max_sessions_per_user == 40


def test_the_sighup_list_is_the_reloadable_set():
    section = DOC.split("## Reloading settings: SIGHUP", 1)[1].split("A lower limit", 1)[0]
    listed = set(re.findall(r"`([a-z_]+)`", section)) - {"server", "upstream", "datamaps"}
    assert listed == set().union(*RELOADABLE.values())


@pytest.mark.parametrize("limits, holders", [
    ({"per_user": 2}, ["alice"] * 2), ({"per_address": 50}, ["bob"] * 50),
    ({"per_user_address": 5}, ["alice"] * 5)])
def test_the_refusal_texts_are_the_codes(limits, holders):
    lim = SessionLimits(**limits)
    for user in holders:
        lim.admit(user, "10.0.0.7")
    with pytest.raises(SessionLimitReached) as e:
        lim.admit("alice", "10.0.0.7")
    assert str(e.value) in DOC


async def test_the_queue_texts_are_the_codes():
    g = RunGate(limit=4, queue_size=100, queue_timeout=60)
    for _ in range(4):
        g.enter()
    line = [g.enter() for _ in range(100)]
    with pytest.raises(RunQueueError) as e:
        g.enter()
    assert str(e.value) in DOC
    g.queue_timeout = 0.01
    with pytest.raises(RunQueueError) as e:
        await g.wait(line[0])
    assert str(e.value).replace("0.01s", "60s") in DOC
