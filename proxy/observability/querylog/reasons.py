"""Why a query that read base tables was not answered from a datamap, as one class
(the query log's reason_class; docs/querylog.md):

  no_datamap   no datamap over its tables
  disabled     a datamap over them is DISABLED (or its query rewrite is switched off)
  stale        one would have answered, but its data is behind the base tables
  columns      a datamap lacks a column (or output) the query needs
  filters      the query filters on what a datamap cannot filter, or more widely
  grouping     the query groups finer than a datamap, or not at all
  aggregates   an aggregate a datamap cannot give (not stored, not re-aggregable)
  joins        the join graph differs (another table, another join type)
  unsupported  a construct the rewriter does not take
  bypassed     not considered: rewriting off for the session, statement too long, a
               blocking setting
  other        anything else

The reasons come from the rewriter (NoMatch reasons, one line each) and the freshness
guard; they are matched by words, most specific first. Pure functions.
"""
from __future__ import annotations

import re

REASON_CLASSES = ("no_datamap", "disabled", "stale", "columns", "filters", "grouping",
                  "aggregates", "joins", "unsupported", "bypassed", "other")

# (class, pattern) in the order tried on each reason
_RULES = [
    ("stale", r"\bstale\b|not in sync|not refreshed|files changed|could not be compensated"),
    ("disabled", r"\bdisabled\b|rewrite is off|rewrite off"),
    ("grouping", r"\bgroup|\bgrain|granularity|rollup|roll up|one row per group|not an aggregate"),
    ("aggregates", r"\baggregat|\bsum\(|\bcount\(|\bavg\(|\bmin\(|\bmax\(|distinct|sketch"),
    ("joins", r"\bjoin|datamap table \S+ is not in the query|tables? differ"),
    ("filters", r"\bfilter|\brange\b|\brestrict|predicate|conjunct|implied|\bwhere\b|requires"),
    ("columns", r"\bcolumns?\b|\boutput|not stored|not projected|does not hold|no alias"),
    ("unsupported", r"not supported|unsupported|cannot (?:be )?rewrite|too complex|nested too"
                    r"|window|subquer|lateral|not take"),
]
_COMPILED = [(name, re.compile(p, re.IGNORECASE)) for name, p in _RULES]
# when datamaps give different reasons, the class of the nearest miss stands
_PRECEDENCE = ("stale", "disabled", "columns", "grouping", "aggregates", "filters", "joins",
               "unsupported", "other")


def class_of(reason: str) -> str:
    for name, pattern in _COMPILED:
        if pattern.search(reason):
            return name
    return "other"


def reason_class(why_not, bypassed: bool = False) -> str:
    """The class of a miss: `why_not` is ((datamap, reason), ...); none given: no datamap
    was over its tables."""
    if bypassed:
        return "bypassed"
    if not why_not:
        return "no_datamap"
    found = {class_of(reason) for _, reason in why_not}
    return next(c for c in _PRECEDENCE if c in found)


# Why a datamap answer was computed by Spark though the proxy serves answers in-process
# (the serving tier's reason: proxy/serving/tier.py plan() and answer()), as one class:
# the query log's not_served_class, the label of datamap_proxy_not_served_total.
#
#   switched_off  [serving] enabled = false, or the session set datamap.serving.enabled=false
#   compensated   new base files were compensated and the tier could not read them: Spark
#                 computes the union
#   construct     the query uses what the serving tier does not compute (its allow-list)
#   size          a datamap read over [serving] max_datamap_bytes
#   segments      a segment no longer visible, or not readable by path
#   engine        the local engine is down, closed, or failed the query
#   timeout       the local engine gave no answer within [serving] timeout
#   internal      a translation bug (logged with its traceback)
#   other         anything else (a reason added later falls here until it has a rule)
NOT_SERVED_CLASSES = ("switched_off", "compensated", "construct", "size", "segments", "engine",
                      "timeout", "internal", "other")
_NOT_SERVED_RULES = [
    ("switched_off", r"\[serving\] enabled|serving\.enabled"),
    ("compensated", r"\bcompensated\b"),
    ("timeout", r"no answer within|timed? ?out"),
    ("internal", r"internal error"),
    ("size", r"max_datamap_bytes"),
    ("segments", r"\bsegment \S+ of\b"),
    ("construct", r"not served locally|not understood"),
    ("engine", r"local engine"),
]
_NOT_SERVED = [(name, re.compile(p, re.IGNORECASE)) for name, p in _NOT_SERVED_RULES]


def not_served_class(reason: str) -> str | None:
    """The class of a reason a datamap answer was not served in-process; None: no reason
    (served, or not a datamap answer)."""
    if not reason:
        return None
    return next((name for name, pattern in _NOT_SERVED if pattern.search(reason)), "other")
