"""Index datamaps: `CREATE DATAMAP x ON TABLE t USING 'minmax' | 'bloomfilter'`.

Per-file indexes of a table's data files (row count, per-column min/max/NULL count,
bloom filters) that let the query side read only the files a filter can match.

    entries.py    IndexStore: definitions and per-file entries in the catalog; the
                  query side's read interface (indexes_on, file_stats, file_identity)
    commands.py   IndexService: CREATE / DROP / SHOW / REBUILD, and the hooks that keep
                  entries current (after a load, mv refreshes, ADD SEGMENT, compaction)

The statement after USING '<index provider>' and its property checks are
proxy/datamaps/ddl/index_providers.py. The build job is pipeline/indexes.py; the bloom
filter format is rewriter/prune/bloom.py. docs/indexes.md is the user's guide.
"""
