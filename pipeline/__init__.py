"""PySpark jobs that keep datamap tables: full build, incremental append, compaction.

No asyncio and no proxy import: every function takes a SparkSession, a compiled
DatamapDefinition (rewriter/api.py) and plain data, and blocks. The proxy reserves segment
ids and publishes results in its catalog; see pipeline/jobs.py for the order of steps and
the incremental (delta) rule, pipeline/files.py for base-table file listing and
"only these files" readers, pipeline/table.py for the datamap's storage table and its
writes, pipeline/segments.py for its partitions, pipeline/live.py for `<name>_table`, the
view of the live segments.
"""
from pipeline.files import (  # noqa: F401
    list_files, normalize_path, read_files, register_files_view, table_layout, table_schemas,
)
from pipeline.jobs import (  # noqa: F401
    DeltaPlan, RefreshResult, cleanup_orphans, compact, drop, full_build, incremental_append,
    plan_delta, reaggregate,
)
from pipeline.errors import PipelineError  # noqa: F401
from pipeline.live import adopt_table, drop_live, show_live, shown_segments  # noqa: F401
from pipeline.segments import (  # noqa: F401
    drop_segments, list_segments, read_segments, table_exists,
)
from pipeline.table import SegmentWrite, create_table, with_spark_types  # noqa: F401
