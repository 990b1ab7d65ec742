"""CREATE DATAMAP statements running now, kept in the catalog so that SHOW DATAMAP (on
every replica sharing it) shows a datamap from the moment its CREATE starts: before its
own row exists (opening the pipeline Spark session and analysing the SELECT can take
tens of seconds) and while its first segment is written.

Each running CREATE is one `meta` row, "creating:<token>" -> JSON (db, name, provider,
properties, base tables, start, expiry). The statement's runner renews the expiry while
it runs (proxy/datamaps/ddl/creating.py) and deletes the row when it ends, however it
ends. A row whose runner died with its process (a crash, a killed replica) is not
renewed: readers ignore it once expired, and the next CREATE deletes it, so no phantom
row outlives a crash by more than its time to live. Expiry is wall-clock time, as for
leases (leases.py): replicas' clocks must agree to well within it.

These writes do not bump the catalog version: nothing the rewriter caches changes.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

_CREATING = "creating:"      # meta key prefix


@dataclass(frozen=True)
class Creating:
    token: str                      # one running statement
    db: str
    name: str
    provider: str
    properties: dict[str, str]
    base_tables: tuple[str, ...]
    started: float                  # epoch seconds: when the statement started

    @property
    def qualified(self) -> str:
        return f"{self.db}.{self.name}"

    @property
    def table(self) -> str:
        return f"{self.db}.{self.name}_table"


class CreatingStore:
    """Mixed into Catalog: uses its `_tx`."""

    def begin_creating(self, entry: Creating, ttl: float) -> None:
        """Record a CREATE that started (expiring in `ttl` s unless renewed); rows of
        CREATEs whose runner stopped renewing them go."""
        now = time.time()
        value = json.dumps({"db": entry.db, "name": entry.name, "provider": entry.provider,
                            "properties": entry.properties,
                            "base_tables": list(entry.base_tables),
                            "started": entry.started, "expires": now + ttl})
        with self._tx(bump=False) as c:
            for key, old in c.execute("SELECT key, value FROM meta WHERE key LIKE ?",
                                      (_CREATING + "%",)).fetchall():
                if _expires(old) < now:
                    c.execute("DELETE FROM meta WHERE key = ?", (key,))
            c.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                      "value = excluded.value", (_CREATING + entry.token, value))

    def renew_creating(self, token: str, ttl: float) -> bool:
        """Push the expiry of a running CREATE `ttl` s from now; False when its row is gone."""
        with self._tx(bump=False) as c:
            row = c.execute("SELECT value FROM meta WHERE key = ?",
                            (_CREATING + token,)).fetchone()
            if row is None:
                return False
            data = json.loads(row[0])
            data["expires"] = time.time() + ttl
            c.execute("UPDATE meta SET value = ? WHERE key = ?",
                      (json.dumps(data), _CREATING + token))
            return True

    def end_creating(self, token: str) -> None:
        with self._tx(bump=False) as c:
            c.execute("DELETE FROM meta WHERE key = ?", (_CREATING + token,))

    def creating(self) -> list[Creating]:
        """The CREATEs running now (unexpired rows), earliest first."""
        now = time.time()
        with self._tx(write=False) as c:
            rows = c.execute("SELECT key, value FROM meta WHERE key LIKE ?",
                             (_CREATING + "%",)).fetchall()
        out = []
        for key, value in rows:
            data = json.loads(value)
            if data["expires"] < now:
                continue
            out.append(Creating(key[len(_CREATING):], data["db"], data["name"],
                                data["provider"], dict(data["properties"]),
                                tuple(data["base_tables"]), data["started"]))
        return sorted(out, key=lambda e: e.started)


def _expires(value: str) -> float:
    try:
        return float(json.loads(value)["expires"])
    except (ValueError, KeyError, TypeError):
        return 0.0          # unreadable: treated as expired
