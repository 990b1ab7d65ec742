"""CompiledForms: the matcher's compiled form of each catalog definition, kept across
rewrite indexes (rewriter/index.py) so a new index compiles only what changed.

"""
from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from rewriter.api import DatamapDefinition, DatamapDefinitionError
from rewriter.layout import Compiled, compile_internal, schema_key

# Compiled definitions are kept by count, not bytes: an index holds its compiled forms
# anyway (about 100 KB each, measured with tracemalloc over bench/rewrite.py's
# definitions), so the cache costs only its keys; a byte budget smaller than the index
# made every build of a large catalog compile every definition again (a scan through an
# LRU larger than its capacity misses every time).
log = logging.getLogger(__name__)
COMPILED_SPARE = 4096      # entries kept beyond those of the largest index built


def tables_schema(schemas, tables) -> dict:
    """The part of `schemas` ({db: {table: {col: type}}}) naming `tables` ("db.table")."""
    out: dict = {}
    for t in tables:
        db, _, name = t.partition(".")
        cols = schemas.get(db, {}).get(name)
        if cols is not None:
            out.setdefault(db, {})[name] = cols
    return out


class CompiledForms:
    """Compiled definitions by definition identity and the schema of the tables it reads,
    least recently used first out, bounded by count: at least the entries of the largest
    index built plus `spare`, so building an index never evicts its own forms. Thread-safe:
    indexes are built and CREATEs compiled in worker threads; two threads that compile one
    definition at once both compile it, and store equal values."""

    def __init__(self, spare: int = COMPILED_SPARE):
        self.spare = spare
        self.limit = spare
        self.entries: OrderedDict[tuple, Compiled] = OrderedDict()
        self.compiles = 0          # how many definitions were compiled (tests, bench)
        # "db.name" of definitions compiled under the whole schema (they read beyond their
        # base tables: any table's change may change them); never forgotten: a superset
        self.wide: set[str] = set()
        self._lock = threading.Lock()

    @staticmethod
    def key(d: DatamapDefinition, skey: tuple) -> tuple:
        return (d.name, d.qualified_sql or d.select_sql, d.database, d.table, d.version,
                tuple(c.name for c in d.columns), skey)

    def fit(self, entries: int) -> None:
        """Keep at least `entries` forms (an index of that many datamaps is being built)."""
        with self._lock:
            self.limit = max(self.limit, entries + self.spare)

    def remember(self, comp: Compiled, skey: tuple) -> None:
        self._put(self.key(comp.definition, skey), comp)

    def _put(self, key: tuple, comp) -> None:
        with self._lock:
            self.entries[key] = comp
            self.entries.move_to_end(key)
            while len(self.entries) > self.limit:
                self.entries.popitem(last=False)

    def ready(self, definition: DatamapDefinition, schemas) -> bool:
        """True when get() would answer without compiling (a form, or the error the
        definition gave, is kept): what a caller that must not wait on a compile asks."""
        key = self.key(definition, schema_key(tables_schema(schemas, definition.base_tables)))
        with self._lock:
            comp = self.entries.get(key)
        return comp is not None and (comp is not _WHOLE or self._fallback(definition, schemas)
                                     in self.entries)

    def _fallback(self, definition: DatamapDefinition, schemas, skey: tuple | None = None):
        # tagged: the whole schema may be just the base tables' (then the keys would meet)
        return self.key(definition, ("whole",) + (skey if skey is not None
                                                  else schema_key(schemas)))

    def get(self, definition: DatamapDefinition, schemas, skey: tuple | None = None) -> Compiled:
        """The matcher's form of a catalog definition, compiled on a miss (a definition that
        does not compile raises DatamapDefinitionError, then and on every later get). Keyed
        by the schema of the tables it reads (`skey` is only a fallback): loading another
        table's schema does not compile every definition again."""
        own = tables_schema(schemas, definition.base_tables)
        key = self.key(definition, schema_key(own))
        with self._lock:
            comp = self.entries.get(key)
            if comp is not None:
                self.entries.move_to_end(key)
        if comp is None:
            comp = _compiled(definition, own)
            if isinstance(comp, _Failed) and not comp.internal:
                comp = _WHOLE   # a table it reads beyond its base tables: the whole schema
            self._count(comp)
            self._put(key, comp)
        if comp is _WHOLE:
            self.wide.add(definition.qualified)
            key = self._fallback(definition, schemas, skey)
            with self._lock:
                comp = self.entries.get(key)
            if comp is None:
                comp = _compiled(definition, schemas)
                self._count(comp)
                self._put(key, comp)
        if isinstance(comp, _Failed):
            raise comp.error
        return comp

    def _count(self, comp) -> None:
        if isinstance(comp, Compiled):
            self.compiles += 1


class _Failed:
    """A definition that does not compile under a schema: kept so it is not tried again."""
    __slots__ = ("error", "internal")

    def __init__(self, error: DatamapDefinitionError, internal: bool = False):
        self.error = error
        self.internal = internal


def _compiled(definition: DatamapDefinition, schemas) -> "Compiled | _Failed":
    try:
        return compile_internal(definition, schemas)
    except DatamapDefinitionError as e:
        return _Failed(e)
    except RecursionError:
        return _Failed(DatamapDefinitionError(
            f"datamap {definition.name}: nested too deeply to compile", "54001"), True)
    except Exception as e:  # a compiler bug: the datamap is left out, not every query failed
        log.exception("compiling datamap %s failed", definition.qualified)
        return _Failed(DatamapDefinitionError(
            f"datamap {definition.name}: internal error while compiling "
            f"({type(e).__name__})", "HY000"), True)


_WHOLE = object()    # compiled under the whole schema, not only its base tables'
