"""Shared set-up of the decision tests (no Spark): a real catalog in a temp dir, schemas
given as data, and a Spark provider that fails if a decision ever needed Spark."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, Mapping

from proxy.datamaps.catalog.store import Catalog
from proxy.datamaps.service import DatamapService
from proxy.routing.router import StatementContext
from rewriter import compile_datamap
from rewriter.api import DatamapDefinition

Schemas = Mapping[str, Mapping[str, Mapping[str, str]]]


def no_spark():
    raise AssertionError("a decision must not need Spark")


def schemas_of(schemas: Schemas):
    """A schemas_provider serving the tables asked for ("db.table") out of `schemas`."""
    return lambda tables: {db: {t: cols for t, cols in ts.items() if f"{db}.{t}" in tables}
                           for db, ts in schemas.items()}


def decision_service(state_dir: Path, schemas: Schemas) -> Iterator[DatamapService]:
    """Body of a `service` fixture: yields the service, closes it and its catalog."""
    catalog = Catalog.in_state_dir(state_dir)
    svc = DatamapService(catalog, no_spark, schemas_provider=schemas_of(schemas))
    yield svc
    svc.close()
    catalog.close()


def add_datamap(svc: DatamapService, schemas: Schemas, db: str, name: str, sql: str, *,
                lazy: bool = False, build: bool = True, rows: int = 5) -> DatamapDefinition:
    """Register datamap db.name over `sql`; with `build`, also a base segment of its first
    table (if it has none) and a published full-build segment of `rows` rows."""
    d = compile_datamap(name, sql, schemas, db)
    c = svc.catalog
    c.create_datamap(db, name, provider="mv", select_sql=sql, base_tables=d.base_tables,
                     lazy=lazy, definition=d)
    if build:
        table = d.base_tables[0]
        if not c.base_segments(table):
            c.add_base_segment(table, [f"file:/w/{table}/a.parquet"])
        sid = c.begin_segment(db, name, {table: ["0"]})
        c.publish_segment(db, name, sid, rows=rows, kind="built")
    return d


def forwarded(decision) -> bool:
    """The query goes to Spark as written: no decision, or a PassThrough that only says why
    (why_not / bypassed, for the query log)."""
    from proxy.routing.router import PassThrough
    return decision is None or (isinstance(decision, PassThrough) and decision.after is None
                                and not decision.before and not decision.settings)


SALES_SCHEMAS = {"db1": {"sales": {"id": "int", "country": "string", "qty": "int",
                             "ts": "timestamp"}}}


SALES_AGG = "SELECT country, sum(qty) FROM db1.sales GROUP BY country"


def sales_service(state_dir: Path, datamaps: dict[str, str]) -> Iterator[DatamapService]:
    """decision_service over SALES_SCHEMAS with `datamaps` (name -> SELECT) built in db1,
    3 rows each."""
    for svc in decision_service(state_dir, SALES_SCHEMAS):
        for name, sql in datamaps.items():
            add_datamap(svc, SALES_SCHEMAS, "db1", name, sql, rows=3)
        yield svc


def statement_ctx(**conf):
    return StatementContext("s1", "me", "db1", dict(conf), 10)
