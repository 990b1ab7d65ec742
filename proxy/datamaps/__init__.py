"""Datamaps in the proxy: DDL, catalog, maintenance orchestration, router handlers.

    ddl.py      parse(statement) -> CreateDatamap | DropDatamap | ... | None (not ours);
                DdlError(message, sqlstate, position, token) for bad DDL
    legacy.py   USING 'preaggregate' / 'timeseries' -> the equivalent mv SELECT
    catalog.py  Catalog(path): SQLite (or shared PostgreSQL) store of definitions, status,
                base-table segments, datamap segments (visible flag = atomic publish),
                events, version counter
      catalog_segments.py  SegmentStore: the segment half of Catalog
      catalog_leases.py    LeaseStore: leader and datamap-job leases (proxy/ha/leader.py)
      catalog_backend.py   SQLite / PostgreSQL connections under one `?` SQL
      catalog_schema.py    MIGRATIONS, migrate()
      records.py           DatamapRecord, segments, Event, DatamapStatus (values, no I/O)
    show.py     SHOW DATAMAP / SHOW SEGMENTS result sets (contract.md columns)
    service.py  DatamapService(catalog, spark_provider): builds the parts below on one
                catalog, lock registry and Spark provider; the handlers' interface
      schemas.py       SchemaCache: base tables' schemas, background loader
      commands.py      DatamapCommands: the DDL runners
      maintenance.py   Maintenance: refresh/build, after-load hooks, recovery; RefreshOutcome
      compaction.py    Compaction (COMPACT, auto-compaction), SegmentGarbage
      zone_policy.py   ZoneReader (read), TimeZonePolicy (act): the zone datamaps were computed under
      rewrite_index.py RewriteIndexProvider: candidates and the rewriter's DatamapIndex
      locks.py         KeyedLocks: one lock per datamap / base table, shared by the parts
                       (and by replicas, through a catalog lease per key)
    sync.py     SYNC DATAMAPS: files written to base tables outside the proxy
    audit.py    Auditor: sampled and on-demand (AUDIT DATAMAP) audits of datamap answers;
                audit_ring.py (recent queries per datamap), audit_compare.py (pure)
    handler.py  DatamapDdlHandler, DatamapLoadHandler, DatamapSelectHandler: Router
                StatementHandlers (register in that order, before the default)

Wiring (done by proxy/app.py's App for `serve`):
    catalog = Catalog.in_state_dir(state_dir)
    service = DatamapService(catalog, lambda: engine_spark_session, leases=keeper)
    await asyncio.to_thread(service.recover)        # once, before serving
    router = Router(handlers=[..., DatamapDdlHandler(service), DatamapLoadHandler(service),
                              DatamapSelectHandler(service)])
"""
