"""DatamapIndex: the datamaps of one catalog version, ready to answer rewrite(sql, db).

Cost model of a decision:
  * text pre-check: a query whose text names none of the indexed base tables is returned
    unchanged without parsing (regex over the table names);
  * datamaps are indexed by base table; a block is matched only against datamaps whose
    tables it contains (Calcite's pre-filter): datamaps elsewhere cost nothing;
  * definitions are compiled once, cached across indexes by definition and the schema of
    the tables each reads, bounded by count (DatamapIndex.compiled_forms, which
    compile_datamap fills after a CREATE);
  * results that took a parse are cached in an LRU keyed on (sql text, current_db) and
    bounded in bytes (CACHE_BYTES; an entry over CACHE_BYTES / 8 is not cached); what the
    text pre-check answers is not cached (it costs less than a lookup's worth of memory);
    a catalog change makes a new index (new `version`), which starts with an empty cache;
    `updated()` makes it from the previous one by replacing only the changed datamaps.
A statement nested too deep to analyse is forwarded unchanged with one WARNING line.
Datamaps are keyed by "db.name" in `used` and `skipped`; the SQL's alias is the bare name.
Datamaps refreshed in full are tried first, on whole blocks (rewriter/rebuilt_match.py).
Each SELECT block (subqueries, CTEs, UNION branches, wrapped BI queries) is rewritten on its
own; a block that joins a derived table or filters on a subquery keeps that subquery as
written (rewriter/derived.put_matches grafts the written nodes back), so the subquery's own block
is rewritten in place too and one statement may read a datamap twice. Among several
datamaps answering a block the one with the fewest rows wins (then the fewest grouping
columns, then the name); one that also reads base tables (narrow.py) only when none else.
"""
from __future__ import annotations

import itertools
import logging
import re
from collections import defaultdict

from sqlglot import exp

from rewriter.api import Candidate, DatamapDefinition, DatamapDefinitionError, RewriteResult
from rewriter.bytecache import ByteLRU, text_size
from rewriter.compiled import CompiledForms, tables_schema
from rewriter.derived import put_matches
from rewriter.facts import Unsupported, extract
from rewriter.distinct import APPROXIMATE
from rewriter.flatten import flattened_blocks, with_notes
from rewriter.layout import Compiled, compile_definition, schema_key
from rewriter.match import Match, match
from rewriter.self_joins import describe_reference, mappings, most_references
from rewriter.rebuilt_match import NOT_ANSWERED, FullForm, rewrite_full
from rewriter.normalize import (DIALECT, NormalizeError, make_schema, parse, qualify_tree,
                                spark_output_name)

log = logging.getLogger(__name__)
_HAS_TIMESERIES = re.compile(r"timeseries\s*\(", re.I)
_TOKENS = itertools.count(1)
CACHE_BYTES = 64 << 20
TREE_KEPT_BYTES = 16 << 10
MAX_MAPPINGS = 25       # alias mappings of a self-joined block tried (the first is FROM order)
TOO_COMPLEX = "statement too complex (nested too deeply to analyse)"


def _entry_size(key: tuple[str, str], res: RewriteResult) -> int:
    # an unchanged statement's result shares the key's text: count it once
    return text_size(key, res.used, res.skipped, res.missing_schemas,
                     "" if res.sql is key[0] else res.sql) + (
        _TREE_WEIGHT * len(res.sql) if res.tree is not None else 0)


_TREE_WEIGHT = 32


def compile_datamap(name: str, select_sql: str, schemas, current_db: str) -> DatamapDefinition:
    comp = compile_definition(name, select_sql, schemas, current_db)
    DatamapIndex.compiled_forms.remember(
        comp, schema_key(tables_schema(schemas, comp.definition.base_tables)))
    return comp.definition


class DatamapIndex:
    # Shared by every index: a catalog change builds a new index over mostly the same
    # definitions.
    compiled_forms = CompiledForms()

    def __init__(self, candidates, schemas, version: int = 0, cache_bytes: int = CACHE_BYTES):
        candidates = list(candidates)
        self.version = version
        self.token = next(_TOKENS)    # tells this index from a rebuilt one of the same version
        self.schemas = schemas
        self.schema = make_schema(schemas)
        self.candidates: dict[str, Candidate] = {}
        self.compiled: dict[str, Compiled] = {}
        self.broken: dict[str, str] = {}
        # "db.name" -> ((rows, grouping columns, name): the cheapest is tried first, its tables)
        self.costs: dict[str, tuple[tuple, frozenset[str]]] = {}
        self.by_table: dict[str, list[str]] = defaultdict(list)
        self.compiled_forms.fit(len(candidates))
        for cand in candidates:
            self._add(cand)
        self._precheck = self._table_pattern()
        self._cache: ByteLRU[tuple[str, str], RewriteResult] = ByteLRU(cache_bytes, _entry_size)

    def updated(self, put=(), drop=(), version: int | None = None,
                schemas=None) -> "DatamapIndex":
        """A new index equal to this one with the candidates in `put` added or replacing
        those of the same name, and the datamaps named in `drop` ("db.name") left out.
        The other datamaps' entries are shared, not rebuilt: the cost is that of the
        changed entries (a compile only for a definition not compiled before) plus copying
        the name maps. With `schemas`, it holds those (the caller puts again or drops the
        datamaps they change). This index is not changed; the new one starts with an empty cache
        and a new token."""
        put = list(put)
        new = object.__new__(DatamapIndex)
        new.version = self.version if version is None else version
        new.token = next(_TOKENS)
        new.schemas, new.schema = ((self.schemas, self.schema) if schemas is None
                                   else (schemas, make_schema(schemas)))
        new.candidates = dict(self.candidates)
        new.compiled = dict(self.compiled)
        new.broken = dict(self.broken)
        new.costs = dict(self.costs)
        gone = set(drop) | {c.definition.qualified for c in put}
        new.by_table = defaultdict(list)
        for t, names in self.by_table.items():
            kept = [n for n in names if n not in gone] if gone.intersection(names) else list(names)
            if kept:
                new.by_table[t] = kept
        for n in gone:
            new.candidates.pop(n, None)
            new.compiled.pop(n, None)
            new.broken.pop(n, None)
            new.costs.pop(n, None)
        self.compiled_forms.fit(len(new.candidates) + len(put))
        for cand in put:
            new._add(cand)
        new._precheck = (self._precheck if set(new.by_table) == set(self.by_table)
                         else new._table_pattern())
        new._cache = ByteLRU(self._cache.max_bytes, _entry_size)
        return new

    def _add(self, cand: Candidate) -> None:
        name = cand.definition.qualified
        self.candidates[name] = cand
        for t in cand.definition.base_tables:
            self.by_table[t].append(name)
        try:
            self.compiled[name] = comp = self.compiled_forms.get(cand.definition, self.schemas)
        except DatamapDefinitionError as e:
            self.broken[name] = f"definition no longer compiles: {e}"
            return
        if not isinstance(comp, FullForm):      # refreshed in full: no cost, rebuilt_match.py
            self.costs[name] = ((cand.rows if cand.rows is not None else float("inf"),
                                 len(comp.group) + len(comp.plain), name), comp.facts.tables)

    def _table_pattern(self):
        bare = sorted({t.split(".", 1)[1] for t in self.by_table}, key=len, reverse=True)
        return re.compile(r"\b(" + "|".join(re.escape(b) for b in bare) + r")\b", re.I) if bare else None

    # ------------------------------------------------------------------ public
    def would_parse(self, sql: str) -> bool:
        """False when the text alone settles that nothing is rewritten (no datamap's base
        table is named and no timeseries() is called): rewrite() then returns at once."""
        return bool((self._precheck is not None and self._precheck.search(sql))
                    or _HAS_TIMESERIES.search(sql))

    def candidates_named(self, sql: str) -> list[Candidate]:
        """The candidates over the tables whose names `sql` contains (the text pre-check's
        test, table by table): every datamap a rewrite of `sql` can use or report."""
        if self._precheck is None:
            return []
        named = {m.group(1).lower() for m in self._precheck.finditer(sql)}
        names = dict.fromkeys(n for t, ns in self.by_table.items()
                              if t.partition(".")[2] in named for n in ns)
        return [self.candidates[n] for n in names]

    def rewrite(self, sql: str, current_db: str, approximate: bool = False) -> RewriteResult:
        """`approximate`: the session allows estimates from stored sketches
        (SET datamap.rewrite.approximate=true; rewriter/distinct.py)."""
        if not self.would_parse(sql):
            return RewriteResult(sql, False)       # nothing to parse for
        key = (sql, current_db) if not approximate else (sql, current_db, True)
        hit = self._cache.get(key)
        if hit is not None:
            return RewriteResult(hit.sql, hit.rewritten, list(hit.used), dict(hit.skipped),
                                 list(hit.missing_schemas), hit.tree, list(hit.approximate))
        allowed = APPROXIMATE.set(approximate)
        try:
            res = self._rewrite(sql, current_db)
        except RecursionError:
            log.warning("statement of %d characters is nested too deeply to rewrite; "
                        "forwarding it unchanged", len(sql))
            res = RewriteResult(sql, False, [], {n: TOO_COMPLEX for n in self.candidates})
        except Exception as e:  # a rewriter bug must never fail the statement: forward it as is
            log.exception("rewrite failed; forwarding the statement unchanged")
            res = RewriteResult(sql, False, [], {n: f"internal error ({type(e).__name__})"
                                                 for n in self.candidates})
        finally:
            APPROXIMATE.reset(allowed)
        self._cache.put(key, res)
        return RewriteResult(res.sql, res.rewritten, list(res.used), dict(res.skipped),
                             list(res.missing_schemas), res.tree, list(res.approximate))

    # ------------------------------------------------------------------ work
    def _rewrite(self, sql: str, current_db: str) -> RewriteResult:
        res = self._rewrite_datamaps(sql, current_db)
        if _HAS_TIMESERIES.search(res.sql):
            # blocks no datamap answered still carry timeseries(): Spark has no such function
            from rewriter import timeseries as ts
            try:
                translated = ts.translate_sql(res.sql, self.schemas, current_db or "default")
            except ValueError as e:
                log.info("timeseries translation failed: %s", e)
                translated = res.sql
            if translated != res.sql:
                res = RewriteResult(translated, True, res.used, res.skipped, res.missing_schemas,
                                    approximate=res.approximate)
        return res

    def _rewrite_datamaps(self, sql: str, current_db: str) -> RewriteResult:
        unchanged = RewriteResult(sql=sql, rewritten=False)
        if self._precheck is None or not self._precheck.search(sql):
            return unchanged
        try:
            tree = parse(sql)
        except NormalizeError:
            return unchanged
        if not isinstance(tree, (exp.Select, exp.SetOperation, exp.Subquery)):
            return unchanged
        current_db = (current_db or "default").lower()
        touched = self._touched(tree, current_db)
        if not touched:
            return unchanged
        missing = self._unknown_tables(tree, current_db)
        if missing:
            reason = f"schema of {', '.join(missing)} not loaded yet"
            return RewriteResult(sql, False, [], {n: reason for n in touched}, missing)
        skipped: dict[str, str] = {}
        originals = list(tree.find_all(exp.Select))
        names = [None if any(isinstance(e, exp.Star) or (isinstance(e, exp.Column) and isinstance(e.this, exp.Star))
                             for e in s.expressions) else [spark_output_name(e) for e in s.expressions]
                 for s in originals]
        qtree = tree          # qualified in place; the original is parsed again on a hit
        try:
            qualify_tree(qtree, self.schema, current_db)
        except RecursionError:
            raise
        except (NormalizeError, Exception) as e:  # sqlglot raises several error types
            for n in touched:
                skipped[n] = self.broken.get(n) or f"query does not resolve: {str(e).splitlines()[0]}"
            return RewriteResult(sql, False, [], skipped)
        qualified = list(qtree.find_all(exp.Select))
        if len(qualified) != len(originals):
            return RewriteResult(sql, False, [], {n: "query shape changed during qualification" for n in touched})
        if (res := rewrite_full(sql, qtree, touched, self.compiled, self.candidates, skipped)):
            return res
        notes: list[str] = []
        flat_skipped: dict[str, str] = dict(skipped)
        matches = self._rewrite_flattened(qtree, names, flat_skipped, notes) \
            if qtree.find(exp.Subquery, exp.CTE) is not None else None
        if matches is None:
            matches = [self._rewrite_block(qsel, nm, skipped) for qsel, nm in zip(qualified, names)]
        else:
            skipped = flat_skipped
        if len(matches) == 1 and matches[0] is not None and originals[0] is tree \
                and tree.args.get("with_") is None:
            originals = [tree]        # the whole statement is the rewritten block
        elif any(m is not None for m in matches):
            tree = parse(sql)         # the other blocks must be emitted as written
            originals = list(tree.find_all(exp.Select))
        tree, used, approximate, replaced = put_matches(tree, originals, matches, skipped)
        for n in used:
            skipped.pop(n, None)
        for n in touched:
            if n not in used and n not in skipped:
                skipped[n] = "no query block reads its tables"
        if not replaced:
            return with_notes(RewriteResult(sql, False, [], skipped), flat_skipped, notes)
        out = tree.sql(DIALECT)
        # the tree rides along for the serving tier only for dashboard-sized statements:
        # a cached tree weighs tens of times its text
        return RewriteResult(out, True, used, skipped,
                             tree=tree if len(out) <= TREE_KEPT_BYTES else None,
                             approximate=approximate)

    def _rewrite_flattened(self, qtree: exp.Expression, names, skipped, notes) -> list | None:
        """Match a copy of the qualified statement with its BI wrappers inlined
        (rewriter/flatten.py). The blocks left are emitted in place of the blocks of the
        same index as written. None when nothing was inlined or nothing answers: the
        statement is then matched as written (no hit of the unflattened form is lost)."""
        ftree = qtree.copy()
        fblocks = list(ftree.find_all(exp.Select))
        left = flattened_blocks(ftree, fblocks, notes)
        if not left:
            return None
        matches = [None] * len(fblocks)
        for i in left:
            matches[i] = self._rewrite_block(fblocks[i], names[i], skipped)
        return matches if any(m is not None for m in matches) else None

    def _unknown_tables(self, tree: exp.Expression, current_db: str) -> list[str]:
        """Tables read by the statement that the index has no schema for (CTE names and
        table functions aside): qualification would fail, so say which ones to load."""
        ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
        out: dict[str, None] = {}
        for t in tree.find_all(exp.Table):
            if not isinstance(t.this, exp.Identifier) or (not t.db and t.name.lower() in ctes):
                continue
            db, name = (t.db or current_db).lower(), t.name.lower()
            if name not in self.schemas.get(db, {}):
                out[f"{db}.{name}"] = None
        return list(out)

    def _touched(self, tree: exp.Expression, current_db: str) -> list[str]:
        out: dict[str, None] = {}
        for t in tree.find_all(exp.Table):
            full = f"{(t.db or current_db).lower()}.{t.name.lower()}"
            for n in self.by_table.get(full, ()):
                out[n] = None
        return list(out)

    def _rewrite_block(self, qsel: exp.Select, names, skipped) -> Match | None:
        tables = set()
        from_ = qsel.args.get("from_")
        rels = ([from_.this] if from_ else []) + [j.this for j in qsel.args.get("joins") or []]
        for r in rels:
            if isinstance(r, exp.Table) and r.db:
                tables.add(f"{r.db}.{r.name}")
        cands = list(dict.fromkeys(n for t in tables for n in self.by_table.get(t, ())))
        if not cands:
            return None
        by_table: dict[str, list[str]] = defaultdict(list)
        for r in rels:
            if isinstance(r, exp.Table) and r.db:
                by_table[f"{r.db}.{r.name}"].append(r.alias_or_name)
        twice = {t: a for t, a in by_table.items() if len(a) > 1}
        # a self-join's references may map onto a datamap's other ways than FROM order:
        # keep a copy to extract again per mapping (extract changes the block in place)
        pristine = qsel.copy() if twice else None
        facts = self._extract(qsel, names, cands, skipped)
        best = self._match_facts(facts, cands, skipped) if facts is not None else None
        if best is None and facts is not None and twice:
            best = self._match_mappings(pristine, names, cands, skipped, twice)
        return best

    def _match_mappings(self, pristine, names, cands, skipped, twice) -> Match | None:
        """Match a block reading a table more than once under each other alias mapping
        (rewriter/facts.py `refs`): every way of naming as many of its references as a
        candidate reads (a datamap that reads it once: any one reference, the others
        opaque). The first mapping that answers wins; when none does, a self-joined
        datamap's reason is the first that got past its tables."""
        reasons: dict[str, list[str]] = defaultdict(list)
        most = most_references([self.compiled.get(n) for n in cands], twice)
        # read once by every candidate: the first mapping is what was just tried
        first = 1 if all(k == 1 for k in most.values()) else 0
        for refs in itertools.islice(mappings(twice, most), first, MAX_MAPPINGS):
            retry: dict[str, str] = {}
            alt = self._extract(pristine.copy(), names, cands, retry, refs)
            best = self._match_facts(alt, cands, retry) if alt is not None else None
            if best is not None:
                skipped.update(retry)
                return best
            for n, why in retry.items():
                reasons[n].append(why)
        for n, whys in reasons.items():
            if self.compiled.get(n) is not None and self.compiled[n].facts.self_joined():
                kept = [w for w in whys if not w.startswith("datamap table ")]
                skipped[n] = kept[0] if kept else skipped.get(n, whys[0])
        return None

    def _extract(self, qsel: exp.Select, names, cands, skipped, refs=None):
        try:
            return extract(qsel, self.schemas, names, in_place=True, as_query=True, refs=refs)
        except Unsupported as e:
            for n in cands:
                skipped.setdefault(n, f"query block not supported: {e}")
            return None
        except RecursionError:
            raise                 # the whole statement is too deep: rewrite() says so once
        except Exception as e:  # never let a block take the statement down
            log.exception("fact extraction failed")
            for n in cands:
                skipped.setdefault(n, f"query block not supported: internal error {type(e).__name__}")
            return None

    def _match_facts(self, facts, cands, skipped) -> Match | None:
        aliases = {e.alias for e in facts.edges}
        # Try the cheapest first and stop at the first that answers: the rest cannot be
        # cheaper, so they are not matched (keeps the decision cost flat in their number).
        order = []
        tables = facts.tables
        for n in cands:
            if n in self.broken or isinstance(self.compiled.get(n), FullForm):
                skipped[n] = self.broken.get(n) or skipped.get(n) or NOT_ANSWERED
                continue
            cost, own = self.costs[n]
            if not own <= tables:
                skipped[n] = f"datamap table {describe_reference(min(own - tables))} is not in the query"
                continue
            order.append((cost, n))
        order.sort()
        best = fallback = None
        for _, n in order:
            if best is not None:
                skipped[n] = f"datamap {best.datamap} is cheaper for the same query block"
                continue
            bare = self.compiled[n].definition.name
            alias = bare if bare not in aliases else f"{bare}_dm"
            try:
                m = match(facts, self.compiled[n], self.candidates[n], alias)
            except RecursionError:
                raise
            except Exception as e:  # a bug must not fail the query: forward it unchanged
                log.exception("matching %s failed", n)
                m = f"internal error while matching ({type(e).__name__})"
            if isinstance(m, str):
                skipped[n] = m
            elif m.reads_base:
                # a datamap that answers only with base-table rows added is the last resort
                if fallback is None:
                    fallback = m
                else:
                    skipped[n] = f"datamap {fallback.datamap} is cheaper for the same query block"
            else:
                best = m
        if best is not None and fallback is not None:
            skipped[fallback.datamap] = (f"datamap {best.datamap} answers without reading the "
                                         "base tables")
        return best or fallback


def rewrite(sql: str, candidates, schemas, current_db: str,
            approximate: bool = False) -> RewriteResult:
    return DatamapIndex(candidates, schemas).rewrite(sql, current_db, approximate)
