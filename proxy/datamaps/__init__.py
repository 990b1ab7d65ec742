"""Datamaps in the proxy: DDL, catalog, maintenance orchestration, router handlers.

    ddl.py      parse(statement) -> CreateDatamap | DropDatamap | ... | None (not ours);
                DdlError(message, sqlstate, position, token) for bad DDL
    legacy.py   USING 'preaggregate' / 'timeseries' -> the equivalent mv SELECT
    catalog.py  Catalog(path): SQLite store of definitions, status, base-table segments,
                datamap segments (visible flag = atomic publish), events, version counter
    show.py     SHOW DATAMAP / SHOW SEGMENTS result sets (contract.md columns)
    service.py  DatamapService(catalog, spark_provider): blocking DDL runners, refresh,
                after_load, recover, candidates() and index() for the rewriter;
                auto-compaction after a refresh
    sync.py     SYNC DATAMAPS: files written to base tables outside the proxy
    handler.py  DatamapDdlHandler, DatamapLoadHandler, DatamapSelectHandler: Router
                StatementHandlers (register in that order, before the default)

Wiring (done by proxy/app.py build_router for `serve`):
    catalog = Catalog.in_state_dir(state_dir)
    service = DatamapService(catalog, lambda: engine_spark_session)
    await asyncio.to_thread(service.recover)        # once, before serving
    router.handlers += [DatamapDdlHandler(service), DatamapLoadHandler(service),
                        DatamapSelectHandler(service)]
"""
