"""DMPROPERTIES of a datamap: which are honoured, which are accepted as no-ops, and how
their values are spelled (CarbonData's documents write sizes as '256 MB', '128MB', '1 GB').

Pure functions, no Spark: the DDL parser validates with them at CREATE, the pipeline reads
the values when it writes. Keys are lower-cased by the parser.
"""
from __future__ import annotations

import re
from typing import Mapping

# Honoured on the Parquet datamap table or by the proxy's maintenance.
HONOURED = {
    "table_blocksize": "Parquet row-group size of the datamap's files (MB; '256', '256 MB', '1 GB')",
    "sort_columns": "rows sorted by these stored columns within each file",
    "column_compressor": "Parquet compression codec (snappy, zstd, gzip, lz4, none)",
    "minor_compaction_threshold": "segments COMPACT 'MINOR' and auto-compaction merge",
    "auto_compaction": "MINOR compaction after a refresh once the threshold is reached",
    "distinct_sketch": "'hll': approx_count_distinct(x) stored as a mergeable HLL sketch "
                       "(rewriter/distinct.py)",
    "distinct_sketch_lgk": "lgConfigK (4-21) of those sketches; default from relativeSD, "
                           "else 12",
}
# CarbonData table properties (the MV guide's inherited ones and their relatives): accepted
# so that CarbonData DDL runs as written, with no effect on a Parquet datamap table.
NO_OPS = ("sort_scope", "flat_folder", "long_string_columns", "local_dictionary_enable",
          "local_dictionary_threshold", "local_dictionary_include", "local_dictionary_exclude",
          "inverted_index", "no_inverted_index", "range_column", "column_meta_cache",
          "cache_level", "table_page_size_inmb", "dictionary_include", "dictionary_exclude")

_BOOLEANS = ("auto_compaction", "local_dictionary_enable", "flat_folder")
_SIZE = re.compile(r"\s*(\d+)\s*(mb?|gb?)?\s*", re.IGNORECASE)
_SORT_SCOPES = ("no_sort", "local_sort", "global_sort", "batch_sort")
_CODECS = {"snappy": "snappy", "zstd": "zstd", "gzip": "gzip", "lz4": "lz4",
           "none": "uncompressed", "uncompressed": "uncompressed"}
MAX_BLOCKSIZE_MB = 2048


class PropertyError(ValueError):
    """A DMPROPERTIES value that cannot mean anything: `what` is "'key'='value'", `why`
    the spellings it takes."""

    def __init__(self, key: str, value: str, why: str):
        self.what, self.why = f"'{key}'='{value}'", why
        super().__init__(f"{self.what}: {why}")


def size_mb(value: str) -> int | None:
    """'256', '256MB', '256 mb', '1 GB', '1g' -> MB; None when not a size."""
    m = _SIZE.fullmatch(value)
    if not m:
        return None
    n = int(m.group(1))
    return n * 1024 if (m.group(2) or "m").lower().startswith("g") else n


def is_true(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


def check(props: Mapping[str, str]) -> None:
    """Raise PropertyError for a value of a known property that is not one of its spellings.
    Unknown property names are kept as given (as CarbonData keeps them)."""
    for key in _BOOLEANS:
        value = props.get(key)
        if value is not None and value.strip().lower() not in ("true", "false"):
            raise PropertyError(key, value, "expected 'true' or 'false'")
    size = props.get("table_blocksize")
    if size is not None:
        mb = size_mb(size)
        if mb is None or not 1 <= mb <= MAX_BLOCKSIZE_MB:
            raise PropertyError("table_blocksize", size, "expected a size between 1 MB and "
                                f"{MAX_BLOCKSIZE_MB} MB ('256', '256 MB', '1 GB')")
    scope = props.get("sort_scope")
    if scope is not None and scope.strip().lower() not in _SORT_SCOPES:
        raise PropertyError("sort_scope", scope, "expected one of "
                            f"{', '.join(s.upper() for s in _SORT_SCOPES)}")
    threshold = props.get("local_dictionary_threshold")
    if threshold is not None and not threshold.strip().isdigit():
        raise PropertyError("local_dictionary_threshold", threshold, "expected a whole number")
    codec = props.get("column_compressor")
    if codec is not None and codec.strip().lower() not in _CODECS:
        raise PropertyError("column_compressor", codec,
                            f"expected one of {', '.join(sorted(_CODECS))}")


def parquet_options(props: Mapping[str, str]) -> dict[str, str]:
    """Writer/table options the honoured properties become."""
    options = {}
    if props.get("table_blocksize"):
        options["parquet.block.size"] = str(size_mb(props["table_blocksize"]) * 1024 * 1024)
    if props.get("column_compressor"):
        options["compression"] = _CODECS[props["column_compressor"].strip().lower()]
    return options
