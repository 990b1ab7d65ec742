"""fresh_answer.stacked_check: a datamap stacked on another is judged by the one below it
(pure logic: a guard that returns set verdicts, a provider of Covered)."""
from __future__ import annotations

from proxy.datamaps.freshness.answer import stacked_check
from proxy.datamaps.freshness.guard import CHANGED, FRESH, NEW, UNVERIFIED, Covered, Verdict

HOUR = Covered({"d.ev": frozenset({"/ev/1"})}, 0.0, None)
DAY = Covered({"d.hour_table": frozenset({"/hour/1"})}, 0.0, None)


class Provider:
    def covered(self, name, index=None):
        return {"d.hour": HOUR, "d.day": DAY}.get(name)


class Guard:
    def __init__(self, **verdicts):
        self.verdicts, self.asked = verdicts, []

    def check(self, name, covered, allowed, compensable, since=None):
        self.asked.append((name, dict(covered.files)))
        return self.verdicts.get(name.split(".")[1], Verdict(FRESH))


def judge(guard):
    return stacked_check(guard, Provider(), "d.day", DAY, 0.0, lambda _t: None)


def test_the_lower_table_is_not_listed_the_lower_datamap_is_judged():
    guard = Guard()
    assert judge(guard) == Verdict(FRESH)
    assert guard.asked == [("d.hour", {"d.ev": HOUR.files["d.ev"]}), ("d.day", {})]


def test_new_files_below_make_it_changed():
    v = judge(Guard(hour=Verdict(NEW, new={"d.ev": ("/ev/2",)})))
    assert v.kind == CHANGED and "datamap d.hour below it is not fresh" in v.reason


def test_unverified_below_is_unverified():
    assert judge(Guard(hour=Verdict(UNVERIFIED, "cannot list d.ev"))) == Verdict(
        UNVERIFIED, "cannot list d.ev")


def test_not_checked_below_is_not_reported_as_checked():
    # the lower one was answered without a listing (within max_staleness, a write in
    # progress): EXPLAIN must not say the stacked one's base files were found unchanged
    v = judge(Guard(hour=Verdict(FRESH, "within max_staleness")))
    assert v.kind == FRESH and "within max_staleness" in v.reason
