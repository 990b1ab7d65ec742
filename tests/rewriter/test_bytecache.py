"""Caches on the statement path are bounded in bytes, not entries (pure logic, no Spark):
distinct megabyte statements must not pile up."""
from __future__ import annotations

import threading

from rewriter import Candidate, DatamapIndex, compile_datamap
from rewriter.bytecache import ByteLRU, text_size
from rewriter.compiled import CompiledForms

SCHEMAS = {"db1": {"sales": {"country": "string", "qty": "int"}}}
AGG = "SELECT country, sum(qty) AS q FROM sales GROUP BY country"
MB = 1 << 20


def _lru(budget, max_entry=None):
    return ByteLRU(budget, lambda k, v: len(k) + len(v), max_entry)


def test_evicts_least_recently_used_by_bytes():
    c = _lru(100, max_entry=100)
    c["a"] = "x" * 39
    c["b"] = "x" * 39
    assert c.get("a") is not None           # a is now the most recent
    c["c"] = "x" * 39                       # 120 bytes: b goes
    assert "b" not in c and "a" in c and "c" in c
    assert c.bytes == 80 and len(c) == 2


def test_an_entry_over_max_entry_is_not_kept_and_evicts_nothing():
    c = _lru(1000, max_entry=100)
    c["small"] = "x"
    assert not c.put("huge", "x" * 200)
    assert "huge" not in c and "small" in c and c.bytes == len("small") + 1


def test_replacing_a_key_counts_it_once_and_pop_and_clear_release_bytes():
    c = _lru(1000)
    c["k"] = "x" * 100
    c["k"] = "x" * 10
    assert c.bytes == 11
    assert c.pop("k") == "x" * 10 and c.bytes == 0 and c.pop("k") is None
    c["k"] = "v"
    c.clear()
    assert c.bytes == 0 and len(c) == 0


def test_concurrent_use_keeps_the_books_straight():
    c = _lru(5000)

    def work(seed):
        for i in range(2000):
            key = f"{seed}-{i % 50}"
            c[key] = "x" * (i % 97)
            c.get(f"{seed}-{(i * 7) % 50}")
            if i % 13 == 0:
                c.pop(key)
    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.bytes == sum(len(k) + len(c.get(k)) for k in c) <= 5000


def test_text_size_counts_nested_text():
    assert text_size("abc") < text_size("abc" * 100)
    assert text_size({"k": ("x" * 1000,)}) > 1000


def _agg_index(cache_bytes):
    return DatamapIndex([Candidate(compile_datamap("agg", AGG, SCHEMAS, "db1"))], SCHEMAS,
                        cache_bytes=cache_bytes)


def test_rewrite_cache_holds_distinct_megabyte_statements_within_its_budget():
    idx = _agg_index(32 * MB)
    for i in range(20):   # each rewritten: its text and the rewritten text, ~2 MB an entry,
        # so 20 of them (~40 MB) outgrow the budget
        r = idx.rewrite(f"SELECT country, sum(qty) FROM sales WHERE country <> '{i}{'x' * MB}' "
                        "GROUP BY country", "db1")
        assert r.used == ["db1.agg"]
    assert 0 < len(idx._cache) < 20 and idx._cache.bytes <= 32 * MB
    assert sum(len(sql) for sql, _ in idx._cache) <= 32 * MB


def test_rewrite_cache_skips_entries_over_an_eighth_of_the_budget_and_cheap_answers():
    idx = _agg_index(8 * MB)
    small = "SELECT country, sum(qty) FROM sales GROUP BY country"
    idx.rewrite(small, "db1")
    idx.rewrite(f"SELECT country, sum(qty) FROM sales WHERE country <> '{'x' * MB}' "
                "GROUP BY country", "db1")
    idx.rewrite(f"SELECT 1 AS v, '{'x' * 100}' AS pad", "db1")   # names no datamap table
    assert [sql for sql, _ in idx._cache] == [small]


def test_compiled_definition_cache_is_bounded_by_count(monkeypatch):
    forms = CompiledForms(spare=50)
    monkeypatch.setattr(DatamapIndex, "compiled_forms", forms)
    for i in range(200):   # each definition compiles to a distinct entry
        compile_datamap(f"agg{i}", f"SELECT country, sum(qty) + {i} AS q FROM sales GROUP BY country",
                        SCHEMAS, "db1")
    assert len(forms.entries) == 50
    assert "agg199" in {k[0] for k in forms.entries}    # the newest survive
