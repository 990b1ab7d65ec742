"""Hook points for what else keeps per-file state of an external-format table (index
datamaps). The defaults do nothing; proxy/app.py wires them.

- on_segment_files(table, segment_id, [(staged_path, final_path), ...]): a segment's links
  exist but are not visible yet (staged paths, readable by Spark by path); final paths are
  the names Spark's `_metadata.file_path` will give them. Raising aborts ADD SEGMENT with
  nothing visible. It may return the segment's row count (an int: it read every row
  anyway), which SHOW SEGMENTS then shows instead of NULL.
- on_files_gone(table, [final_path, ...]): DELETE SEGMENT / DROP TABLE unmapped them.
- on_compacted(table, old_ids, new_id): segments re-mapped into one (same files, same
  paths). Raising aborts the compaction.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


def _nothing(*_args) -> None:
    return None


@dataclass
class SegmentHooks:
    on_segment_files: Callable[[str, int, list[tuple[str, str]]], int | None] = _nothing
    on_files_gone: Callable[[str, list[str]], None] = _nothing
    on_compacted: Callable[[str, list[int], int], None] = _nothing
