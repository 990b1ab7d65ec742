"""What the catalog stores, as values: datamap records, segments, events, statuses.

Plain frozen dataclasses and the functions that make them from catalog rows; no I/O.
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Mapping

from rewriter.api import DatamapDefinition, StoredColumn

class DatamapStatus(StrEnum):
    """Whether a datamap may answer queries (SHOW DATAMAP's DataMap Status). Not to be
    confused with maintenance.RefreshOutcome, what a refresh did."""
    ENABLED = "ENABLED"
    DISABLED = "DISABLED"


# Base segment status.
SEG_SUCCESS = "SUCCESS"
SEG_DELETED = "MARKED_FOR_DELETE"
# Datamap segment status (SEG_SUCCESS and SEG_DELETED too).
SEG_IN_PROGRESS = "INSERT_IN_PROGRESS"
SEG_COMPACTED = "COMPACTED"
SEG_FAILED = "FAILED"

SOURCES = ("proxy-load", "discovered")

class CatalogError(Exception):
    """A catalog request that cannot be served; `sqlstate` per contract.md."""

    def __init__(self, message: str, sqlstate: str = "HY000"):
        super().__init__(message)
        self.sqlstate = sqlstate


@dataclass(frozen=True)
class DatamapRecord:
    db: str
    name: str
    provider: str
    select_sql: str
    original_sql: str
    base_tables: tuple[str, ...]
    lazy: bool
    properties: Mapping[str, str]
    definition: DatamapDefinition | None
    status: str
    status_reason: str
    created_at: float

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def table(self) -> str:
        return f"{self.db}.{self.name}_table"

    @property
    def compiled_version(self) -> int | None:
        return self.definition.version if self.definition else None


@dataclass(frozen=True)
class BaseSegment:
    table: str
    id: str
    files: tuple[str, ...]
    rows: int | None
    load_start: float
    load_seconds: float
    source: str
    status: str


@dataclass(frozen=True)
class DatamapSegment:
    db: str
    name: str
    id: str
    files: tuple[str, ...]
    rows: int | None
    extra_info: Mapping[str, tuple[str, ...]]   # {"db.table": ("0", "1")}
    visible: bool
    status: str
    dropped: bool
    load_start: float
    load_seconds: float | None
    kind: str | None = None     # built | refreshed | compacted, once published


@dataclass(frozen=True)
class Event:
    seq: int
    at: float
    kind: str          # created, built, refreshed, compacted, enabled, disabled, failed,
                       # invalidated, audit_mismatch, ...
    rows: int | None
    seconds: float | None
    detail: str


def definition_to_json(definition: DatamapDefinition) -> str:
    return json.dumps(dataclasses.asdict(definition), sort_keys=True)


def definition_from_json(text: str) -> DatamapDefinition:
    data = json.loads(text)
    data["columns"] = tuple(StoredColumn(**c) for c in data["columns"])
    data["base_tables"] = tuple(data["base_tables"])
    data["join_kinds"] = tuple(data.get("join_kinds", ()))
    return DatamapDefinition(**data)


def record_from_row(row: Any) -> DatamapRecord:
    return DatamapRecord(
        db=row["db"], name=row["name"], provider=row["provider"],
        select_sql=row["select_sql"], original_sql=row["original_sql"],
        base_tables=tuple(json.loads(row["base_tables"])), lazy=bool(row["lazy"]),
        properties=json.loads(row["properties"]),
        definition=definition_from_json(row["definition"]) if row["definition"] else None,
        status=row["status"], status_reason=row["status_reason"],
        created_at=row["created_at"])


def base_from_row(row: Any) -> BaseSegment:
    return BaseSegment(table=row["tbl"], id=str(row["id"]),
                       files=tuple(json.loads(row["files"])), rows=row["rows"],
                       load_start=row["load_start"], load_seconds=row["load_seconds"],
                       source=row["source"], status=row["status"])


def segment_from_row(row: Any) -> DatamapSegment:
    return DatamapSegment(
        db=row["db"], name=row["name"], id=str(row["id"]),
        files=tuple(json.loads(row["files"])), rows=row["rows"],
        extra_info={k: tuple(v) for k, v in json.loads(row["extra_info"]).items()},
        visible=bool(row["visible"]), status=row["status"], dropped=bool(row["dropped"]),
        load_start=row["load_start"], load_seconds=row["load_seconds"], kind=row["kind"])


def one_line(text: str, limit: int = 300) -> str:
    """A status reason fit for one output line (reasons may hold a Spark error's text)."""
    first = next((ln.strip() for ln in (text or "").splitlines() if ln.strip()), "")
    return first if len(first) <= limit else first[: limit - 3] + "..."


def format_time(epoch: float) -> str:
    """Timestamps as Spark prints them: local time, milliseconds."""
    t = time.localtime(epoch)
    return time.strftime("%Y-%m-%d %H:%M:%S", t) + f".{int(epoch * 1000) % 1000:03d}"



def display_name(datamap: str, current_db: str | None) -> str:
    """How EXPLAIN and error messages name a datamap ("db.name"): bare when it belongs to
    the session's current database, else qualified — the name that, in this session, DROP /
    REBUILD DATAMAP resolve to that very datamap, so two same-named datamaps never print
    alike."""
    db, dot, name = datamap.rpartition(".")
    return name if dot and db == (current_db or "default").lower() else datamap
