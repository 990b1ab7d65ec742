"""The datamap advisor's pure planning: candidates, extensions, profiles, workload.

    candidates.py  plan, replay: which datamaps would answer the most base-table time
    extend.py      extensions: near misses of current datamaps
    profile.py     what a datamap must hold to answer one query (a Profile)
    workload.py    the logged workload folded per query shape
    shape.py       a statement's shape: the query log's key for "the same query"

The names the proxy uses are handed on here (the profile function as `statement_profile`,
so that it does not hide the module of the same name).
"""
from rewriter.advise.candidates import Proposal, estimate_rows, plan, replay  # noqa: F401
from rewriter.advise.extend import extensions  # noqa: F401
from rewriter.advise.profile import profile as statement_profile  # noqa: F401
from rewriter.advise.shape import fold_tokens, shape_hash, shape_of  # noqa: F401
from rewriter.advise.workload import Shape, fold  # noqa: F401
