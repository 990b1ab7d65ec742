"""The catalog's schema: a list of migrations, applied in order at open.

The schema version is PRAGMA user_version (SQLite) or the catalog_schema row (PostgreSQL);
MIGRATIONS[i] takes it from i to i + 1, in the same transaction as the version bump, so a
failed migration leaves the catalog as it was. The text is SQLite's; the PostgreSQL backend
translates its types (backend.py), and replicas starting together migrate one at a
time.
"""
from __future__ import annotations

from proxy.datamaps.catalog.records import CatalogError

# MIGRATIONS[i] takes the schema from version i to i + 1. Append only.
MIGRATIONS: list[str] = [
    """
    CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta VALUES ('catalog_version', '0');
    CREATE TABLE counters (scope TEXT PRIMARY KEY, next_id INTEGER NOT NULL);
    CREATE TABLE datamaps (
        db TEXT NOT NULL, name TEXT NOT NULL,
        provider TEXT NOT NULL,
        select_sql TEXT NOT NULL,
        original_sql TEXT NOT NULL,
        base_tables TEXT NOT NULL,
        lazy INTEGER NOT NULL,
        properties TEXT NOT NULL,
        definition TEXT,
        compiled_version INTEGER,
        status TEXT NOT NULL CHECK (status IN ('ENABLED', 'DISABLED')),
        status_reason TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL,
        PRIMARY KEY (db, name));
    CREATE TABLE base_segments (
        tbl TEXT NOT NULL, id INTEGER NOT NULL,
        files TEXT NOT NULL, rows INTEGER,
        load_start REAL NOT NULL, load_seconds REAL NOT NULL,
        source TEXT NOT NULL CHECK (source IN ('proxy-load', 'discovered')),
        status TEXT NOT NULL,
        PRIMARY KEY (tbl, id));
    CREATE TABLE dm_segments (
        db TEXT NOT NULL, name TEXT NOT NULL, id INTEGER NOT NULL,
        files TEXT NOT NULL DEFAULT '[]', rows INTEGER,
        extra_info TEXT NOT NULL,
        visible INTEGER NOT NULL DEFAULT 0,
        status TEXT NOT NULL,
        dropped INTEGER NOT NULL DEFAULT 0,
        load_start REAL NOT NULL, load_seconds REAL,
        PRIMARY KEY (db, name, id),
        FOREIGN KEY (db, name) REFERENCES datamaps (db, name) ON DELETE CASCADE);
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        db TEXT NOT NULL, name TEXT NOT NULL, at REAL NOT NULL, kind TEXT NOT NULL,
        rows INTEGER, seconds REAL, detail TEXT NOT NULL DEFAULT '',
        FOREIGN KEY (db, name) REFERENCES datamaps (db, name) ON DELETE CASCADE);
    CREATE INDEX events_by_datamap ON events (db, name, seq);
    """,
    # 1 -> 2: how each published datamap segment was made (built, refreshed, compacted),
    # which auto-compaction needs; before, it was read back from the history's text.
    """
    ALTER TABLE dm_segments ADD COLUMN kind TEXT;
    UPDATE dm_segments SET kind = (
        SELECT e.kind FROM events e
        WHERE e.db = dm_segments.db AND e.name = dm_segments.name
          AND e.kind IN ('built', 'refreshed', 'compacted')
          AND (e.detail = 'segment ' || dm_segments.id
               OR e.detail LIKE 'segment ' || dm_segments.id || ' %')
        ORDER BY e.seq DESC LIMIT 1)
    """,
    # external-format tables (proxy/external): the table and its hidden CSV source table,
    # and each segment's user paths and mapped files (link path -> original, size)
    """
    CREATE TABLE IF NOT EXISTS external_tables (
        tbl TEXT PRIMARY KEY, source TEXT NOT NULL, location TEXT NOT NULL,
        fields TEXT NOT NULL, header TEXT NOT NULL, properties TEXT NOT NULL,
        created_at REAL NOT NULL);
    CREATE TABLE IF NOT EXISTS external_segments (
        tbl TEXT NOT NULL, id INTEGER NOT NULL,
        status TEXT NOT NULL, paths TEXT NOT NULL, files TEXT NOT NULL,
        file_count INTEGER NOT NULL, size INTEGER NOT NULL, rows INTEGER,
        load_start REAL NOT NULL, load_seconds REAL NOT NULL,
        merged_into INTEGER,
        PRIMARY KEY (tbl, id))
    """,
    # index datamaps (proxy/datamaps/indexes/entries.py): definitions, one entry per indexed file
    # (identity at build time, row count, per-column minmax JSON) and its bloom filters
    """
    CREATE TABLE IF NOT EXISTS index_datamaps (
        db TEXT NOT NULL, name TEXT NOT NULL, tbl TEXT NOT NULL,
        provider TEXT NOT NULL CHECK (provider IN ('minmax', 'bloomfilter')),
        columns TEXT NOT NULL,
        properties TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('ENABLED', 'DISABLED')),
        status_reason TEXT NOT NULL DEFAULT '',
        created_at REAL NOT NULL, built_at REAL,
        PRIMARY KEY (db, name));
    CREATE INDEX IF NOT EXISTS index_datamaps_by_table ON index_datamaps (tbl);
    CREATE TABLE IF NOT EXISTS index_files (
        db TEXT NOT NULL, name TEXT NOT NULL, path TEXT NOT NULL, segment TEXT,
        size INTEGER, mtime_ns INTEGER, rows INTEGER NOT NULL, stats TEXT NOT NULL,
        PRIMARY KEY (db, name, path),
        FOREIGN KEY (db, name) REFERENCES index_datamaps (db, name) ON DELETE CASCADE);
    CREATE TABLE IF NOT EXISTS index_blooms (
        db TEXT NOT NULL, name TEXT NOT NULL, path TEXT NOT NULL, col TEXT NOT NULL,
        m INTEGER NOT NULL, k INTEGER NOT NULL, bits BLOB NOT NULL,
        PRIMARY KEY (db, name, path, col),
        FOREIGN KEY (db, name, path) REFERENCES index_files (db, name, path) ON DELETE CASCADE)
    """,
    # leases (leases.py): the leader's and each datamap job's, shared by replicas;
    # `expires` is the holder's wall clock (epoch seconds) plus the lease's time to live
    """
    CREATE TABLE IF NOT EXISTS leases (
        name TEXT PRIMARY KEY, holder TEXT NOT NULL, expires REAL NOT NULL,
        acquired REAL NOT NULL)
    """,
    # the query log (proxy/observability/querylog/log.py, docs/querylog.md): one row per
    # statement, written in batches by its own thread; JSON lists in tables, datamaps and
    # why_not
    """
    CREATE TABLE IF NOT EXISTS query_log (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        at REAL NOT NULL, user_name TEXT NOT NULL, client TEXT NOT NULL,
        session_id TEXT NOT NULL, shape_hash TEXT NOT NULL, shape TEXT NOT NULL,
        statement TEXT NOT NULL, current_db TEXT NOT NULL, tables TEXT NOT NULL,
        decision TEXT NOT NULL, datamaps TEXT NOT NULL, why_not TEXT NOT NULL,
        reason_class TEXT, duration_s REAL NOT NULL, rows INTEGER, outcome TEXT NOT NULL,
        sqlstate TEXT, saved_s REAL);
    CREATE INDEX IF NOT EXISTS query_log_by_time ON query_log (at);
    CREATE INDEX IF NOT EXISTS query_log_by_shape ON query_log (shape_hash, id)
    """,
    # the query log: why a datamap answer was computed by Spark though the proxy serves
    # answers in-process (the serving tier's reason), and its class
    """
    ALTER TABLE query_log ADD COLUMN not_served TEXT;
    ALTER TABLE query_log ADD COLUMN not_served_class TEXT
    """,
    # change marks (the rewrite index tells what changed without reading definitions or
    # segments): the catalog version of the last change of each datamap (its row, its
    # visible segments, its rewrite switch) and of each base table's live segments
    """
    ALTER TABLE datamaps ADD COLUMN changed INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE IF NOT EXISTS base_changes (tbl TEXT PRIMARY KEY, changed INTEGER NOT NULL)
    """,
    # change marks read by what changed since a version (the rewrite index reads only
    # those), and a mark for each dropped datamap, which has no row left to carry one
    """
    CREATE INDEX IF NOT EXISTS datamaps_by_change ON datamaps (changed);
    CREATE INDEX IF NOT EXISTS base_changes_by_change ON base_changes (changed);
    CREATE TABLE IF NOT EXISTS datamap_drops (
        db TEXT NOT NULL, name TEXT NOT NULL, changed INTEGER NOT NULL,
        PRIMARY KEY (db, name));
    CREATE INDEX IF NOT EXISTS datamap_drops_by_change ON datamap_drops (changed)
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


def migrate(backend) -> None:
    """Bring the catalog behind `backend` (backend.py) to SCHEMA_VERSION."""
    conn = backend.begin_migration()
    try:
        current = backend.user_version(conn)
        if current > SCHEMA_VERSION:
            raise CatalogError(
                f"Catalog {backend.name} has schema version {current}, newer than this "
                f"program supports ({SCHEMA_VERSION})", "HY000")
        for version in range(current, SCHEMA_VERSION):
            for stmt in MIGRATIONS[version].split(";"):
                if stmt.strip():
                    conn.execute(backend.ddl(stmt))
            backend.set_user_version(conn, version + 1)
        backend.commit()
    except BaseException:
        backend.rollback()
        raise
