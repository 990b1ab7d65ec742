"""Index datamaps at query time: the files a query's filters rule out.

    files.py      prune_sql: per table reference, the files its filters cannot match, and
                  the derived table that skips them
    values.py     one column's predicates compiled to tests over one file's statistics
    filestats.py  FileStats, ColumnStats: what an index datamap knows about one file
    bloom.py      the bloom filter format, shared with its Spark build (pipeline/indexes.py)
    scope.py      restrict: read only some files of a table (external tables' selections)

The names the proxy uses are handed on here; `bloom` is imported as the module.
"""
from rewriter.prune.files import IndexedTable, IndexSpec, prune_sql, referenced_tables  # noqa: F401
from rewriter.prune.filestats import ColumnStats, FileStats  # noqa: F401
from rewriter.prune.scope import Unsupported, restrict  # noqa: F401
