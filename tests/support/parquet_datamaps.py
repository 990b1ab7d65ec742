"""Datamap tables written by Spark as Parquet directories partitioned by segment (full, or
sliced with a hidden segment), for the serving tier's differential tests."""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from rewriter.api import SEGMENT_COLUMN, DatamapDefinition
from tests.support.spark_tier import HIDDEN_SEGMENT, SLICES, Materialiser


VISIBLE = tuple(str(k) for k in range(SLICES))


class ParquetDatamaps:
    """Datamap tables as Parquet directories partitioned by segment, written by Spark."""

    def __init__(self, spark, schemas, root: Path):
        self.spark = spark
        self.root = root
        self.slices = Materialiser(spark, schemas)     # its slice views and sliceable()
        self._dirs: dict[tuple, Path] = {}              # (layout, build SQLs) -> directory

    def _write(self, parts: list[str]) -> Path:
        key = tuple(parts)
        if key not in self._dirs:
            path = self.root / f"dm{len(self._dirs)}"
            df = self.spark.sql(" UNION ALL ".join(parts))
            df.write.partitionBy(SEGMENT_COLUMN).parquet(str(path))
            self._dirs[key] = path
        return self._dirs[key]

    def directory(self, d: DatamapDefinition, layout: str) -> Path:
        if layout == "full":
            return self._write([f"SELECT b.*, '0' AS {SEGMENT_COLUMN} FROM ({d.build_sql({})}) b"])
        fact = self.slices.sliceable(d)
        parts = [f"SELECT b.*, '{k}' AS {SEGMENT_COLUMN} FROM "
                 f"({d.build_sql({fact: self.slices._slice(fact, k)})}) b" for k in range(SLICES)]
        parts.append(f"SELECT b.*, '{HIDDEN_SEGMENT}' AS {SEGMENT_COLUMN} FROM ({d.build_sql({})}) b")
        return self._write(parts)

    def close(self) -> None:
        self.slices.drop_all()


@pytest.fixture(scope="module")
def parquet_datamaps(spark, schemas):
    root = Path(tempfile.mkdtemp(prefix="serving-diff-"))
    dm = ParquetDatamaps(spark, schemas, root)
    try:
        yield dm
    finally:
        dm.close()
        shutil.rmtree(root, ignore_errors=True)


def segment_files(directory: Path, ids) -> list[str]:
    assert HIDDEN_SEGMENT not in ids, "the hidden segment was asked for"
    out: list[str] = []
    for sid in ids:
        out += sorted(str(p) for p in (directory / f"{SEGMENT_COLUMN}={sid}").glob("part-*.parquet"))
    return out
