"""SHOW SEGMENTS and DESC rows of external-format tables: contract.md's SHOW SEGMENTS
columns, then Format, Paths, File Count and Size (bytes, summed when the segment was
added), Merged Into (a compacted segment's successor). Rows is NULL unless the index
hook counted them (docs/external.md)."""
from __future__ import annotations

from proxy.datamaps.catalog.records import format_time
from proxy.datamaps.ddl.show import SHOW_SEGMENTS_COLUMNS, format_seconds
from proxy.external.store import ExternalSegment, ExternalTable
from proxy.routing.router import LocalResult

EXTERNAL_SEGMENT_COLUMNS = SHOW_SEGMENTS_COLUMNS + (
    ("Format", "string"), ("Paths", "string"), ("File Count", "int"), ("Size", "bigint"),
    ("Merged Into", "string"))
DESC_COLUMNS = (("col_name", "string"), ("data_type", "string"), ("comment", "string"))


def segment_row(seg: ExternalSegment) -> tuple:
    # Extra Info stays empty, as for every base-table segment (contract.md)
    return (str(seg.id), seg.status, format_time(seg.load_start),
            format_seconds(seg.load_seconds), seg.rows, len(seg.files), "",
            "csv", ",".join(seg.paths), len(seg.files), seg.size,
            "" if seg.merged_into is None else str(seg.merged_into))


def show_segments(segments: list[ExternalSegment]) -> LocalResult:
    return LocalResult(EXTERNAL_SEGMENT_COLUMNS, [segment_row(s) for s in segments])


def describe_rows(t: ExternalTable, live: list[ExternalSegment]) -> list[tuple[str, str, str]]:
    """Rows appended to DESC's: the format information."""
    rows = [("", "", ""), ("# External Format Information", "", ""),
            ("Format", t.properties.get("format", "csv"), "")]
    rows += [(k, v, "") for k, v in sorted(t.properties.items()) if k != "format"]
    rows += [("Source Table", t.source, "the CSV data-source table the view reads"),
             ("Location", t.location, "one directory of links per segment"),
             ("Segments", str(len(live)), "live"),
             ("Files", str(sum(len(s.files) for s in live)), ""),
             ("Size", str(sum(s.size for s in live)), "bytes")]
    return rows
