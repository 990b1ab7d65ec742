"""What a client gets for a served answer, as bytes: the FetchResults replies of a local
result, batch by batch. The served answer (the engine's `run`: column by column,
proxy/serving/columnar.py) must give exactly the bytes its rows as Python values give
through the value-by-value path (proxy/thrift/rowsets.py), up to the order of rows where
two runs of an unordered query may order them otherwise (a UNION's hash table)."""
from __future__ import annotations

import math

from proxy.serving.engine import EngineFailure
from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T
from proxy.thrift.rowsets import LocalRowSource, decode_rowset

# (protocol, batch): columnar (V10, V6) with batches that start inside a NULL-bitmap byte,
# and row-based (V5, V1)
SHAPES = ((9, 1000), (9, 7), (5, 3), (4, 1000), (0, 5))


def replies(columns, rows, protocol: int, batch: int) -> list[bytes]:
    """The encoded FetchResults replies of `rows` (Python rows or ColumnarRows)."""
    src = LocalRowSource(columns, rows, protocol)
    out = []
    while True:
        rowset, more = src.fetch(batch, T.TFetchOrientation.FETCH_NEXT)
        out.append(codec.encode_reply("FetchResults", 0, T.TFetchResultsResp(
            status=T.TStatus(statusCode=0), hasMoreRows=more, results=rowset)))
        if not more:
            return out


def _wire_rows(data: list[bytes], width: int) -> list[tuple]:
    """The rows the replies carry, each value as the wire tells it apart (-0.0, NaN)."""
    out = []
    for reply in data:
        rowset = codec.decode_reply(reply, "FetchResults").results
        for row in decode_rowset(rowset, width):
            out.append(tuple(("NaN" if math.isnan(v) else repr(v)) if isinstance(v, float)
                             else repr(v) for v in row))
    return out


def assert_same_replies(columns, rows, served, ordered: bool = False) -> None:
    """`served` (the engine's answer) gives a client the bytes `rows` give, in every shape;
    unless `ordered`, the same rows in another order pass (each row's values the same)."""
    for protocol, batch in SHAPES:
        want = replies(columns, rows, protocol, batch)
        got = replies(columns, served, protocol, batch)
        if got == want:
            continue
        why = (f"protocol {protocol}, batches of {batch}: the served answer "
               f"{list(served)[:5]} is sent otherwise than the rows {list(rows)[:5]}")
        assert not ordered and len(got) == len(want), why
        assert sorted(_wire_rows(got, len(columns))) == sorted(
            _wire_rows(want, len(columns))), why


def check_served(engine, plan, rows=None, failure: EngineFailure | None = None) -> None:
    """The engine's served answer of `plan` against its rows (or the failure they ended in:
    the served answer fails too)."""
    try:
        served = engine.answer_blocking(plan)
    except EngineFailure as e:
        assert failure is not None, f"the served answer failed ({e}) where the rows did not"
        return
    assert failure is None, f"the served answer succeeded where the rows failed ({failure})"
    assert_same_replies(plan.columns, rows, served)
