"""External-format tables (docs/external.md): CSV files mapped into segments in place.

    grammar.py   the SQL (CREATE TABLE ... 'format', ADD SEGMENT, DELETE SEGMENT, COMPACT,
                 segment selection), parsed without I/O; alter.py the ALTER TABLE clauses
    links.py     which files a path names; the symbolic links per segment, staged then
                 published by one rename; reconciliation at start
    store.py     the catalog rows (external_tables, external_segments)
    tables.py    ExternalTables: the blocking operations, one lock per table
    hooks.py     SegmentHooks: where per-file indexes learn of added and removed files
    show.py      SHOW SEGMENTS and DESC rows
    handler.py   ExternalHandler: the Router handler (Local / Reject / Rewrite)

The Spark side (the view and its hidden CSV source table) is pipeline/external.py.
"""
