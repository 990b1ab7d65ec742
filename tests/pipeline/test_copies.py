"""Datamap files copied out of the warehouse through the session's Hadoop FileSystem
(pipeline/copies.py), on the shared pipeline session: byte for byte from `file:` and from a
`viewfs://` mount the proxy's Python cannot open; and the forced mirror (`[serving] mirror =
always`) of local segment files through it, served by the tier."""
from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from pipeline.copies import copy_to_local, error_text, file_status
from proxy.config import ServingSettings
from proxy.datamaps.explain import served_lines
from proxy.serving import Served, ServingTier
from proxy.serving.mirror import SegmentMirror, SparkFiles
from proxy.serving.tier import local_path
from tests.support.datamaps import add_datamap, decision_service
from tests.support.serving_tier import TIER_AGG, TIER_QUERY, TIER_SCHEMAS, publish

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def written(pipeline_spark, tmp_path_factory):
    """A Parquet file Spark wrote under a local directory, and the same directory mounted
    as viewfs://<mount>/w (a mount table of its own: FileSystem instances are cached)."""
    d = tmp_path_factory.mktemp("copies")
    mount = f"mt{uuid.uuid4().hex[:8]}"
    pipeline_spark._jsc.hadoopConfiguration().set(f"fs.viewfs.mounttable.{mount}.link./w",
                                                   d.as_uri())
    pipeline_spark.range(1000).selectExpr("id", "cast(id AS string) s") \
        .coalesce(1).write.parquet(f"viewfs://{mount}/w/t")
    (part,) = (d / "t").glob("*.parquet")
    return part, f"viewfs://{mount}/w/t/{part.name}"


def test_a_file_is_copied_byte_for_byte_from_file_and_viewfs(pipeline_spark, written, tmp_path):
    part, viewfs = written
    assert local_path(viewfs) is None          # the proxy cannot open it itself
    for i, uri in enumerate((part.as_uri(), viewfs)):
        size, mtime = file_status(pipeline_spark, uri)
        assert size == part.stat().st_size and abs(mtime / 1000 - part.stat().st_mtime) < 2
        t0 = time.monotonic()
        copy_to_local(pipeline_spark, uri, str(tmp_path / f"c{i}"))
        print(f"{uri.split(':')[0]}: {size} bytes copied in {time.monotonic() - t0:.4f} s")
        assert (tmp_path / f"c{i}").read_bytes() == part.read_bytes()
        assert not list(tmp_path.glob(".*crc"))
    with pytest.raises(Exception) as missing:
        file_status(pipeline_spark, viewfs + ".gone")
    assert error_text(missing.value).startswith("java.io.FileNotFoundException")


def test_the_forced_mirror_copies_local_segments_through_the_session(pipeline_spark, tmp_path):
    for service in decision_service(tmp_path / "state", TIER_SCHEMAS):
        add_datamap(service, TIER_SCHEMAS, "db1", "agg", TIER_AGG, build=False)
        service.catalog.add_base_segment("db1.sales", ["file:/w/a.parquet"])
        publish(service, tmp_path, [("de", 3, "1.50", 1, 1), ("fr", None, None, 0, 2)])
        mirror = SegmentMirror(service.catalog, tmp_path / "state" / "serving-mirror",
                               SparkFiles(lambda: pipeline_spark), mode="always",
                               local=local_path)
        tier = ServingTier(service.catalog, ServingSettings(), mirror=mirror)
        try:
            mirror.step()
            result = service.index().rewrite(TIER_QUERY, "db1")
            assert served_lines(tier, result, {})[0] == "Served by: local engine (mirror)"
            plan = tier.plan(result, {})
            assert isinstance(plan, Served) and "serving-mirror" in plan.plan.sql
            rows, _ = asyncio.run(tier.answer(plan, {}))
            assert sorted(r[:2] for r in rows.rows) == [("de", 3), ("fr", None)]
            st = mirror.status()
            print(f"forced mirror: {st.fetched_bytes} bytes in {st.fetch_seconds:.4f} s")
            assert (st.segments, st.failures) == (1, 0)
        finally:
            tier.close()
