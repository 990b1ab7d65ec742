"""The advisor's planner on synthetic workloads with a known best answer: the lattice
merges shapes into the coarsest datamap that still saves (HRU's greedy choice, benefit =
measured seconds), what each query needs (grouping, filter columns, mergeable partials),
near-miss extensions, what-if replay; every proposal is answered by the real rewriter."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from pipeline.stats import gee
from rewriter import DatamapIndex, compile_datamap
from rewriter.advise.candidates import NO_GAIN, plan, replay
from rewriter.advise.extend import extensions
from rewriter.advise.profile import profile
from rewriter.advise.shape import shape_of
from rewriter.advise.workload import fold
from rewriter.api import Candidate
from tests.support.advise import ADVISE_SCHEMAS, J, Sizes


@dataclass
class Logged:
    statement: str
    duration_s: float = 1.0
    decision: str = "forwarded"
    current_db: str = "s"
    datamaps: tuple = ()
    why_not: tuple = ()
    reason_class: str | None = "no_datamap"
    shape_hash: str | None = None
    saved_s: float | None = None
    outcome: str = "FINISHED"


def log(*pairs):
    """(statement, times, seconds each) -> logged entries."""
    return [Logged(sql, secs) for sql, times, secs in pairs for _ in range(times)]


def answers(proposal, statements):
    d = compile_datamap(proposal.name, proposal.select_sql, ADVISE_SCHEMAS, proposal.database)
    index = DatamapIndex([Candidate(d)], ADVISE_SCHEMAS)
    return [d.qualified in index.rewrite(s, "s").used for s in statements]


def test_shapes_fold_literals_and_keep_one_statement():
    a = f"SELECT dim.region, sum(amt) AS t {J} WHERE dim.cat = 'x' AND q > 3 GROUP BY 1"
    b = a.replace("'x'", "'y'").replace("3", "42")
    assert shape_of(a, "s").hash == shape_of(b.upper().replace("  ", " "), "s").hash
    failed = Logged(a, 0.5, decision="served", datamaps=("s.dm",), saved_s=1.0, outcome="ERROR")
    pruned = Logged(a, 4.0, decision="rewritten")     # files pruned: still the base tables
    shapes = fold(log((a, 3, 2.0), (b, 2, 1.0)) + [Logged(a, 9.0, decision="rewritten",
                                                        datamaps=("s.dm",)), failed, pruned])
    assert len(shapes) == 1
    sh = shapes[0]
    # a failed answer is no hit (as the query log's usage and totals count them)
    assert (sh.count, sh.base_count, sh.answered, sh.datamaps) == (8, 6, 1, {"s.dm": 1})
    assert sh.saved == {}
    assert sh.base_seconds == pytest.approx(12.0) and sh.statement == a


def test_a_datamaps_saving_per_shape_is_an_estimate_never_a_made_up_zero():
    """Shape.saved_by: the query log's estimates, hits not measured yet at the measured
    ones' mean; else the window's base-table mean minus the answers' mean; else unknown."""
    a = f"SELECT dim.region, sum(amt) AS t {J} GROUP BY 1"
    hit = dict(decision="served", datamaps=("s.dm",))
    sh, = fold([Logged(a, 0.5, saved_s=3.0, **hit), Logged(a, 0.5, saved_s=5.0, **hit),
                Logged(a, 0.5, **hit), Logged(a, 0.5, **hit)])
    assert sh.measured == {"s.dm": 2} and sh.saved_by("s.dm") == pytest.approx(16.0)
    assert sh.saved_by("s.other") == 0.0                  # no hit: saved nothing
    sh, = fold([Logged(a, 0.5, **hit), Logged(a, 4.5)])  # timed on the base tables
    assert sh.saved_by("s.dm") == pytest.approx(4.0)
    sh, = fold([Logged(a, 0.5, **hit)])
    assert sh.saved_by("s.dm") is None


def test_profile_needs_grouping_filter_columns_and_partials():
    p = profile(f"SELECT dim.region, avg(q) AS a, count(DISTINCT txn) AS n, max(amt) AS m "
                f"{J} WHERE dim.cat = 'x' GROUP BY dim.region", "s", ADVISE_SCHEMAS)
    assert sorted(p.dims.values()) == ["dim.cat", "dim.region", "sales.txn"]
    assert sorted(p.aggs.values()) == ["COUNT(*)", "COUNT(sales.q)", "MAX(sales.amt)",
                                       "SUM(sales.q)"]
    assert p.graph.tables == ("s.sales", "s.dim")
    assert profile("SELECT txn FROM s.sales", "s", ADVISE_SCHEMAS) == "not an aggregate query"
    assert "mergeable" in profile("SELECT percentile(amt, 0.5) AS x FROM s.sales", "s",
                                  ADVISE_SCHEMAS)


def test_variances_are_suggested_with_their_moments_stored():
    """Every variance and standard deviation form of one argument needs one var_pop of it
    in the datamap (its moments: count, sum, sum of squares, min, max); the suggestion
    answers each form, at its grain and coarser."""
    p = profile(f"SELECT dim.region, stddev(amt) AS s, var_pop(amt) AS v, variance(q) AS w "
                f"{J} GROUP BY dim.region", "s", ADVISE_SCHEMAS)
    assert sorted(p.aggs.values()) == ["COUNT(*)", "VAR_POP(sales.amt)", "VAR_POP(sales.q)"]
    q1 = f"SELECT dim.region, stddev(amt) AS s {J} GROUP BY dim.region"
    q2 = f"SELECT dim.cat, var_samp(amt) AS v, stddev_pop(q) AS p {J} GROUP BY dim.cat"
    got = plan(fold(log((q1, 10, 5.0), (q2, 10, 4.0))), ADVISE_SCHEMAS, Sizes())
    assert len(got) == 1 and "VAR_POP(sales.amt) AS var_pop_amt" in got[0].select_sql
    assert answers(got[0], [q1, q2, f"SELECT std(amt) AS s {J}"]) == [True, True, True]


def test_two_shapes_merge_into_the_coarsest_datamap_that_answers_both():
    q1 = f"SELECT dim.region, sum(amt) AS t {J} WHERE dim.cat = 'c1' GROUP BY dim.region"
    q2 = f"SELECT dim.cat, count(*) AS n {J} GROUP BY dim.cat"
    got = plan(fold(log((q1, 10, 5.0), (q2, 10, 4.0))), ADVISE_SCHEMAS, Sizes())
    assert len(got) == 1
    p = got[0]
    assert p.kind == "create" and p.queries == 20 and p.est_rows == 200
    assert "GROUP BY dim.cat, dim.region" in p.select_sql
    assert p.est_saving_s == pytest.approx(90 * (1 - 200 / 1_000_000))
    assert answers(p, [q1, q2]) == [True, True]


def test_a_union_too_big_to_pay_splits_into_two_datamaps():
    q1 = f"SELECT dim.brand, sum(amt) AS t {J} GROUP BY dim.brand"
    q2 = f"SELECT dim.region, sum(amt) AS t {J} GROUP BY dim.region"
    q3 = "SELECT sales.d, sum(amt) AS t FROM s.sales GROUP BY sales.d"
    sizes = Sizes({"dim.brand": 100_000})         # brand x region: as many rows as sales
    got = plan(fold(log((q1, 5, 2.0), (q2, 5, 3.0), (q3, 5, 1.0))), ADVISE_SCHEMAS, sizes)
    assert len(got) == 3
    assert [answers(p, [q1, q2, q3]) for p in got] == [
        [False, True, False], [True, False, False], [False, False, True]]
    assert got[0].est_saving_s >= got[1].est_saving_s >= got[2].est_saving_s
    merged = plan(fold(log((q1, 5, 2.0), (q2, 5, 3.0))), ADVISE_SCHEMAS, Sizes())
    assert len(merged) == 1 and answers(merged[0], [q1, q2]) == [True, True]


def test_hru_prefers_measured_seconds_and_stops_at_max_suggestions():
    cheap = f"SELECT dim.region, sum(amt) AS t {J} GROUP BY dim.region"
    costly = "SELECT stores.city, sum(amt) AS t FROM s.sales JOIN s.stores ON " \
             "sales.store = stores.store GROUP BY stores.city"
    got = plan(fold(log((cheap, 50, 0.1), (costly, 2, 30.0))), ADVISE_SCHEMAS, Sizes(),
               max_suggestions=1)
    assert len(got) == 1 and "stores.city" in got[0].select_sql


def test_no_gain_when_the_grouping_is_as_fine_as_the_table():
    q = "SELECT txn, sum(amt) AS t FROM s.sales GROUP BY txn"
    assert plan(fold(log((q, 100, 10.0))), ADVISE_SCHEMAS, Sizes()) == []
    assert NO_GAIN < 1


def test_only_what_the_rewriter_answers_counts():
    # an unnamed date_trunc output: the rewriter cannot name it, so nothing is proposed
    q = "SELECT date_trunc('MONTH', d), sum(amt) FROM s.sales GROUP BY date_trunc('MONTH', d)"
    named = q.replace("date_trunc('MONTH', d), sum(amt)", "date_trunc('MONTH', d) AS m, "
                      "sum(amt) AS t")
    assert plan(fold(log((q, 10, 5.0))), ADVISE_SCHEMAS, Sizes()) == []
    got = plan(fold(log((q, 10, 5.0), (named, 10, 5.0))), ADVISE_SCHEMAS, Sizes())
    assert len(got) == 1 and got[0].queries == 10
    assert answers(got[0], [named]) == [True]


def test_answered_and_unfixable_shapes_are_left_alone():
    q = f"SELECT dim.region, sum(amt) AS t {J} GROUP BY dim.region"
    entries = [Logged(q, 5.0, decision="rewritten", datamaps=("s.x",)),
               Logged(q, 5.0, reason_class="stale"), Logged(q, 5.0, decision="bypassed")]
    assert plan(fold(entries), ADVISE_SCHEMAS, Sizes()) == []


def test_near_miss_extends_a_datamap_by_the_missing_column():
    d = compile_datamap("by_region", f"SELECT dim.region, sum(amt) AS t {J} GROUP BY "
                        "dim.region", ADVISE_SCHEMAS, "s")
    q = f"SELECT dim.region, sum(amt) AS t {J} WHERE dim.cat = 'x' GROUP BY dim.region"
    other = "SELECT stores.city, sum(amt) AS t FROM s.sales JOIN s.stores ON " \
            "sales.store = stores.store GROUP BY stores.city"
    got = extensions(fold(log((q, 7, 3.0), (other, 3, 1.0))), [Candidate(d)], ADVISE_SCHEMAS, Sizes())
    assert len(got) == 1
    p = got[0]
    assert (p.kind, p.name, p.replaces, p.added, p.queries) == (
        "extend", "by_region", "s.by_region", ("dim.cat",), 7)
    assert p.base_seconds == pytest.approx(21.0)
    assert answers(p, [q]) == [True]


def test_whatif_replay_counts_hits_and_gains():
    q1 = f"SELECT dim.region, sum(amt) AS t {J} GROUP BY dim.region"
    q2 = f"SELECT dim.cat, sum(amt) AS t {J} GROUP BY dim.cat"
    entries = log((q1, 4, 2.0), (q2, 3, 1.0)) + [
        Logged(q1, 0.1, decision="rewritten", datamaps=("s.old",))]
    cand = Candidate(compile_datamap("new", f"SELECT dim.region, dim.cat, sum(amt) AS t {J} "
                                     "GROUP BY dim.region, dim.cat", ADVISE_SCHEMAS, "s"), rows=200)
    r = replay(fold(entries), [], cand, ADVISE_SCHEMAS)
    assert (r.examined, r.hits, r.gained) == (8, 8, 7)
    assert r.gained_seconds == pytest.approx(11.0)
    assert [n for _, n in r.examples] == [5, 3]
    narrow = Candidate(compile_datamap("narrow", f"SELECT dim.cat, sum(amt) AS t {J} "
                                       "GROUP BY dim.cat", ADVISE_SCHEMAS, "s"))
    r = replay(fold(entries), [], narrow, ADVISE_SCHEMAS)
    assert (r.examined, r.hits, r.gained) == (8, 3, 3)


def test_gee_distinct_estimate():
    assert gee(40, 0, 100, 100) == 40                 # the whole table: exact
    assert gee(40, 0, 100, 10_000) == 40              # every value seen twice: all seen
    assert gee(100, 100, 100, 10_000) == 1000         # all singletons: sqrt(N/n) each
    assert gee(100, 100, 100, 500) <= 500


def test_shapes_a_current_datamap_answers_now_are_not_suggested_again():
    q = f"SELECT dim.region, sum(amt) AS t {J} GROUP BY dim.region"
    shapes = fold(log((q, 10, 5.0)))       # logged before the datamap was created
    [p] = plan(shapes, ADVISE_SCHEMAS, Sizes())
    now = Candidate(compile_datamap(p.name, p.select_sql, ADVISE_SCHEMAS, p.database))
    assert plan(shapes, ADVISE_SCHEMAS, Sizes(), existing=[now]) == []
    assert extensions(shapes, [now], ADVISE_SCHEMAS, Sizes()) == []
