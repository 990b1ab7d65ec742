"""The Spark side of a datamap audit (proxy/datamaps/verify/auditor.py): run a query, or a datamap's
definition and its segments, in a session of its own, and bring the rows back.

An audit runs in a new session of the pipeline SparkSession (`newSession()`): its current
database, temp views and table-relation cache are its own, so setting the database cannot
disturb a job running beside it, and tables are listed afresh. A new session does not
inherit the settings changed at run time on its parent (the pipeline zone alignment sets
`spark.sql.session.timeZone` that way), so every modifiable `spark.sql.*` setting of the
parent is copied: the audit computes under the semantics the datamaps were built under.
Its jobs carry the job tag `datamap-audit` (shutdown cancels them) and run in the FAIR
scheduler pool `datamap_audit`, which proxy/engine/sparkconf.py gives a low weight.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Iterator, Sequence

from pipeline.files import quote_table
from pipeline.jobs import reaggregate
from pipeline.segments import read_segments
from rewriter.api import DatamapDefinition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

POOL = "datamap_audit"
JOB_TAG = "datamap-audit"


@dataclass(frozen=True)
class Answer:
    """A result set: (name, Spark type) per column, and the rows; `rows` is None when there
    were more than the audit's row cap (nothing is compared then)."""
    columns: tuple[tuple[str, str], ...]
    rows: list[tuple] | None


@contextmanager
def audit_session(spark: "SparkSession") -> Iterator["SparkSession"]:
    """A session of its own that computes as `spark` does (see the module docstring). The
    calling thread's jobs run in the audit pool, tagged, until the block ends: the thread
    may be a shared worker that runs a build next."""
    session = spark.newSession()
    conf = session.conf
    for key, value in spark.conf.getAll.items():
        if key.startswith("spark.sql.") and conf.isModifiable(key):
            conf.set(key, value)
    sc = spark.sparkContext
    pool = sc.getLocalProperty("spark.scheduler.pool")
    sc.setLocalProperty("spark.scheduler.pool", POOL)
    sc.addJobTag(JOB_TAG)
    try:
        yield session
    finally:
        sc.removeJobTag(JOB_TAG)
        sc.setLocalProperty("spark.scheduler.pool", pool)


def cancel_audits(spark: "SparkSession") -> None:
    """Cancel the running jobs of every audit (shutdown)."""
    spark.sparkContext.cancelJobsWithTag(JOB_TAG)


def refresh_tables(session: "SparkSession", tables: Sequence[str]) -> None:
    """Forget cached file listings: the audit must read what the tables hold now."""
    for table in tables:
        session.catalog.refreshTable(quote_table(table))


def _answer(df: "DataFrame", max_rows: int) -> Answer:
    from pyspark.sql import functions as F
    columns = tuple((f.name, f.dataType.simpleString()) for f in df.schema.fields)
    # Timestamps as the session time zone shows them (what a client reads), not as
    # collect() would turn them: into the Python process's own zone.
    stamps = [i for i, (_, t) in enumerate(columns) if t == "timestamp"]
    if stamps:
        df = df.select(*[F.col(f"`{f.name}`").cast("string").alias(f"c{i}")
                         if i in stamps else F.col(f"`{f.name}`").alias(f"c{i}")
                         for i, f in enumerate(df.schema.fields)])
    # limit(max_rows + 1) changes nothing when the answer has at most max_rows rows, and
    # then every row is compared; a larger answer is not compared at all.
    rows = [tuple(_stamp(v) if i in stamps else v for i, v in enumerate(r))
            for r in df.limit(max_rows + 1).collect()]
    return Answer(columns, rows if len(rows) <= max_rows else None)


def _stamp(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def run_query(session: "SparkSession", sql: str, database: str, max_rows: int) -> Answer:
    session.catalog.setCurrentDatabase(database)
    return _answer(session.sql(sql), max_rows)


def definition_answers(session: "SparkSession", definition: DatamapDefinition,
                       segment_ids: Sequence[str], max_rows: int) -> tuple[Answer, Answer]:
    """(the definition computed on the base tables, its visible segments re-aggregated):
    the same rows, when the datamap is intact (what a full build would write). HLL sketch
    columns are left out of both: merged sketches are not byte-equal to one built at once,
    nor are their estimates (rewriter/distinct.py)."""
    from pyspark.sql import functions as F
    sketches = [c.name for c in definition.columns if c.agg == "hll"]
    built = session.sql(definition.build_sql({})).drop(*sketches)
    segments = read_segments(session, definition, segment_ids)
    # re-aggregating widens sums (decimal(20,2) -> decimal(30,2)); a segment stores the
    # definition's own types, as compaction writes them
    stored = reaggregate(definition, segments).select(
        *[F.col(f"`{f.name}`").cast(f.dataType).alias(f.name) for f in segments.schema.fields
          if f.name not in sketches])
    return _answer(built, max_rows), _answer(stored, max_rows)
