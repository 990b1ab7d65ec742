"""The segment mirror without Spark: a real catalog (SQLite), real Parquet segments, the
real DuckDB engine, `[serving] mirror = always` over local files (copied by Python here;
by the pipeline session's Hadoop FileSystem in tests/e2e/test_mirror_viewfs.py). What is
served, from which files, with which reasons when not; the budget and eviction;
compaction and DROP; a full disk; a kill -9 mid-copy."""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from proxy.config import ServingSettings
from proxy.datamaps.explain import served_lines
from proxy.serving import Served, ServingTier
from proxy.serving.mirror import SegmentMirror, needs_mirror
from proxy.serving.tier import local_path
from tests.support.datamaps import add_datamap, decision_service
from tests.support.mirror import FullDisk, LocalFiles
from tests.support.serving_tier import TIER_AGG, TIER_QUERY, TIER_SCHEMAS, publish

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def service(tmp_path):
    yield from decision_service(tmp_path / "state", TIER_SCHEMAS)


@pytest.fixture
def setup(service, tmp_path):
    add_datamap(service, TIER_SCHEMAS, "db1", "agg", TIER_AGG, build=False)
    service.catalog.add_base_segment("db1.sales", ["file:/w/a.parquet"])
    publish(service, tmp_path, [("de", 3, "1.50", 1, 1), ("fr", None, None, 0, 2)])
    return service


def mirror_of(service, tmp_path, files=None, **kw) -> SegmentMirror:
    return SegmentMirror(service.catalog, tmp_path / "state" / "serving-mirror",
                         files or LocalFiles(), mode=kw.pop("mode", "always"),
                         local=local_path, **kw)


def explain(service, tier) -> list[str]:
    service.catalog._seen = None           # read the catalog's version now
    return served_lines(tier, service.index().rewrite(TIER_QUERY, "db1"), {})


def served(service, tier):
    service.catalog._seen = None
    plan = tier.plan(service.index().rewrite(TIER_QUERY, "db1"), {})
    assert isinstance(plan, Served), plan
    result, how = asyncio.run(tier.answer(plan, {}))
    return plan, sorted(result.rows, key=repr)


def step(service, mirror):
    service.catalog._seen = None
    mirror.step()


def mirrored_files(tmp_path) -> list[str]:
    root = tmp_path / "state" / "serving-mirror"
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def test_which_files_need_the_mirror():
    assert needs_mirror("auto", ["hdfs://nn/w/a.parquet"], local_path)
    assert needs_mirror("auto", ["file:/w/a", "s3a://b/w/a"], local_path)
    assert not needs_mirror("auto", ["file:/w/a", "/w/b"], local_path)
    assert needs_mirror("always", ["file:/w/a"], local_path)
    assert not needs_mirror("off", ["hdfs://nn/w/a"], local_path)
    assert not needs_mirror("always", [], local_path)


def test_a_segment_is_served_from_its_copy_once_mirrored(setup, tmp_path):
    mirror = mirror_of(setup, tmp_path)
    tier = ServingTier(setup.catalog, ServingSettings(), mirror=mirror)
    try:
        assert explain(setup, tier)[0] == "Served by: spark (segment 0 of db1.agg_table not mirrored yet)"
        step(setup, mirror)
        assert explain(setup, tier)[0] == "Served by: local engine (mirror)"
        plan, rows = served(setup, tier)
        assert [r[:2] for r in rows] == [("de", 3), ("fr", None)]
        assert "serving-mirror" in plan.plan.sql and str(tmp_path / "agg_table") not in plan.plan.sql
        assert [f.endswith(("part-0.parquet", "MANIFEST.json")) for f in mirrored_files(tmp_path)] \
            == [True, True]
        st = mirror.status()
        assert (st.segments, st.files, st.fetches, st.failures) == (1, 1, 1, 0)
        assert st.bytes == os.path.getsize(next((tmp_path / "agg_table").rglob("*.parquet")))
        # a restart finds the copy: nothing is fetched again
        again = mirror_of(setup, tmp_path)
        step(setup, again)
        assert again.status().segments == 1 and again.fetches == 0
    finally:
        tier.close()


class OpensSlowly(LocalFiles):
    """A file system whose first call waits, as the pipeline session opening does."""

    def __init__(self, wait: float):
        super().__init__()
        self.wait = wait

    def status(self, uri: str) -> tuple[int, int]:
        if self.wait:
            time.sleep(self.wait)
            self.wait = 0.0
        return super().status(uri)


def test_the_fetch_seconds_count_the_copy_not_the_file_systems_opening(setup, tmp_path):
    mirror = mirror_of(setup, tmp_path, OpensSlowly(0.5))
    step(setup, mirror)
    st = mirror.status()
    assert st.fetches == 1 and 0 < st.fetch_seconds < 0.5


def test_auto_leaves_local_files_in_place(setup, tmp_path):
    mirror = mirror_of(setup, tmp_path, mode="auto")
    tier = ServingTier(setup.catalog, ServingSettings(), mirror=mirror)
    try:
        step(setup, mirror)
        assert explain(setup, tier)[0] == "Served by: local engine"
        assert mirrored_files(tmp_path) == []
    finally:
        tier.close()


def test_a_damaged_copy_is_not_read_and_is_fetched_again(setup, tmp_path):
    mirror = mirror_of(setup, tmp_path)
    tier = ServingTier(setup.catalog, ServingSettings(), mirror=mirror)
    try:
        step(setup, mirror)
        copy = next((tmp_path / "state" / "serving-mirror").rglob("*.parquet"))
        copy.write_bytes(copy.read_bytes()[:10])
        mirror.generation += 1                  # as any change the tier must see
        assert explain(setup, tier)[0] == "Served by: spark (segment 0 of db1.agg_table not mirrored yet)"
        step(setup, mirror)
        assert served(setup, tier)[1][0][:2] == ("de", 3)
    finally:
        tier.close()


def test_compaction_and_drop_remove_the_copies(setup, tmp_path):
    mirror = mirror_of(setup, tmp_path)
    tier = ServingTier(setup.catalog, ServingSettings(), mirror=mirror)
    try:
        publish(setup, tmp_path, [("de", 4, "2.00", 1, 1)])
        step(setup, mirror)
        assert {f.split("/")[1].split("-")[0] for f in mirrored_files(tmp_path)} == {"0", "1"}
        # a compaction: segment 2 replaces 0 and 1
        c = setup.catalog
        sid = c.begin_segment("db1", "agg", {"db1.sales": ["0"]})
        d = tmp_path / "agg_table" / f"dm_segment_id={sid}"
        d.mkdir(parents=True)
        merged = d / "part-0.parquet"
        merged.write_bytes(next((tmp_path / "agg_table" / "dm_segment_id=0").glob("*")).read_bytes())
        c.publish_segment("db1", "agg", sid, rows=2, files=[merged.as_uri()],
                          supersedes=["0", "1"], kind="compacted")
        step(setup, mirror)
        assert {f.split("/")[1].split("-")[0] for f in mirrored_files(tmp_path)} == {sid}
        assert explain(setup, tier)[0] == "Served by: local engine (mirror)"
        c.drop_datamap("db1", "agg")
        step(setup, mirror)
        assert mirrored_files(tmp_path) == []
        assert list((tmp_path / "state" / "serving-mirror").iterdir()) == []
    finally:
        tier.close()


def test_a_segment_over_the_budget_goes_to_spark(setup, tmp_path):
    mirror = mirror_of(setup, tmp_path, max_bytes=100)
    tier = ServingTier(setup.catalog, ServingSettings(), mirror=mirror)
    try:
        step(setup, mirror)
        line = explain(setup, tier)[0]
        assert line.startswith("Served by: spark (segment 0 of db1.agg_table not mirrored: its ")
        assert line.endswith(" bytes are over [serving] mirror_max_bytes (100))")
        assert mirror.status().failures == 1 and mirrored_files(tmp_path) == []
    finally:
        tier.close()


def test_eviction_is_least_recently_served_and_refetches_at_the_next_hit(setup, tmp_path):
    size = os.path.getsize(next((tmp_path / "agg_table").rglob("*.parquet")))
    publish(setup, tmp_path, [("de", 3, "1.50", 1, 1), ("fr", None, None, 0, 2)])
    mirror = mirror_of(setup, tmp_path, max_bytes=size + size // 2)     # room for one
    tier = ServingTier(setup.catalog, ServingSettings(), mirror=mirror)
    try:
        step(setup, mirror)           # 0 copied, then 1 evicts it (never served)
        assert mirror.status().held == {"db1.agg_table_segments": (1, size)}
        assert mirror.evictions == 1
        line = explain(setup, tier)[0]  # a hit: the evicted segment is wanted again
        assert line == ("Served by: spark (segment 0 of db1.agg_table was evicted from the mirror "
                        "(fetched again now))")
        step(setup, mirror)           # 0 back, 1 evicted: it was not served either
        assert mirror.evictions == 2 and [s for s, _ in mirror.status().missing[
            "db1.agg_table_segments"]] == ["1"]
        mirror.touch(list(mirror._held))          # 0 was just served: it stays
        explain(setup, tier)
        step(setup, mirror)
        line = explain(setup, tier)[0]
        assert "segment 1 of db1.agg_table not mirrored: the mirror is full: [serving] " \
               f"mirror_max_bytes ({size + size // 2}) holds {size} bytes of segments served " \
               "in the last 60 s" in line, line
    finally:
        tier.close()


def test_a_full_disk_leaves_no_file_and_goes_to_spark(setup, tmp_path):
    mirror = mirror_of(setup, tmp_path, files=FullDisk())
    tier = ServingTier(setup.catalog, ServingSettings(), mirror=mirror)
    try:
        step(setup, mirror)
        assert explain(setup, tier)[0] == ("Served by: spark (segment 0 of db1.agg_table not "
                                           "mirrored: No space left on device)")
        assert mirrored_files(tmp_path) == []
        assert mirror.status().missing == {"db1.agg_table_segments": [("0", "No space left on device")]}
    finally:
        tier.close()


KILLED_WORKER = """
import sys
from pathlib import Path
from proxy.datamaps.catalog.store import Catalog
from proxy.serving.mirror import SegmentMirror
from proxy.serving.tier import local_path
from tests.support.mirror import StallsMidCopy
catalog = Catalog.in_state_dir(Path(sys.argv[1]))
SegmentMirror(catalog, Path(sys.argv[2]), StallsMidCopy(), mode="always", local=local_path).step()
"""


def test_a_kill_mid_copy_leaves_nothing_that_is_served(setup, tmp_path):
    root = tmp_path / "state" / "serving-mirror"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WORKER, str(tmp_path / "state"),
                             str(root)], stdout=subprocess.PIPE, text=True, cwd=ROOT,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        line = proc.stdout.readline()
        assert line.startswith("mid-copy "), line
        half = Path(line.split(" ", 1)[1].strip())
        assert half.exists() and half.stat().st_size > 0
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    assert any(p.name.startswith(".") for p in root.rglob("*"))   # the interrupted copy
    mirror = mirror_of(setup, tmp_path)        # a restart
    assert not half.exists() and mirrored_files(tmp_path) == []
    tier = ServingTier(setup.catalog, ServingSettings(), mirror=mirror)
    try:
        assert explain(setup, tier)[0] == "Served by: spark (segment 0 of db1.agg_table not mirrored yet)"
        step(setup, mirror)
        assert served(setup, tier)[1][0][:2] == ("de", 3)
    finally:
        tier.close()


def test_the_console_shows_the_mirror_per_datamap(setup, tmp_path):
    from proxy.console import views
    mirror = mirror_of(setup, tmp_path)
    tier = ServingTier(setup.catalog, ServingSettings(), mirror=mirror)
    try:
        mirror.follow_catalog()
        assert views.serving(tier).mirror.datamaps == [("db1.agg", 0, 0,
                                                        [("0", "not mirrored yet")])]
        step(setup, mirror)
        m = views.serving(tier).mirror
        assert m.mode == "always" and m.datamaps == [("db1.agg", 1, m.bytes, [])] and m.bytes
    finally:
        tier.close()
