"""codec.MessageSkipper: finds a message's end from pieces without keeping it, so an
oversized upstream reply can be read past and the connection stays in step."""
import random

import pytest

from proxy.thrift import codec
from proxy.thrift.gen.TCLIService import ttypes as T
from tests.support.thrift_samples import ALL_METHODS, sample_req, sample_resp


def _rowset_reply(rows: int) -> bytes:
    cols = [T.TColumn(stringVal=T.TStringColumn(values=[f"s{i}" * 3 for i in range(rows)], nulls=b"\x01")),
            T.TColumn(i64Val=T.TI64Column(values=list(range(rows)), nulls=b"")),
            T.TColumn(binaryVal=T.TBinaryColumn(values=[b"\x00\xff"] * rows, nulls=b""))]
    return codec.encode_reply("FetchResults", 3, T.TFetchResultsResp(
        status=T.TStatus(statusCode=0), hasMoreRows=True,
        results=T.TRowSet(startRowOffset=0, rows=[], columns=cols)))


def _feed_in_pieces(msg: bytes, tail: bytes, rng: random.Random) -> tuple[int, int]:
    sk = codec.MessageSkipper()
    data = msg + tail
    pos = 0
    while True:
        k = rng.choice([1, 2, 3, 7, 64, 4096])
        left = sk.feed(data[pos:pos + k])
        got = len(data[pos:pos + k])
        pos += got
        if left is not None:
            return sk.size, pos - left
        assert got, "ran out of data before the message ended"


MESSAGES = ([codec.encode_call(n, 1, sample_req(n)) for n in ALL_METHODS]
            + [codec.encode_reply(n, 2, sample_resp(n)) for n in ALL_METHODS]
            + [_rowset_reply(3000), codec.application_exception("GetLog", 4, "no such method")])


def test_every_message_ends_where_message_length_says():
    rng = random.Random(7)
    for msg in MESSAGES:
        size, end = _feed_in_pieces(msg, b"\x80\x01next-message", rng)
        assert size == end == len(msg) == codec.message_length(msg)


def test_one_feed_returns_the_bytes_after_the_message():
    msg = _rowset_reply(10)
    sk = codec.MessageSkipper()
    assert sk.feed(msg[:5]) is None and not sk.done
    assert sk.feed(msg[5:] + b"xyz") == 3 and sk.done and sk.size == len(msg)


def test_keeps_only_a_size_field_not_the_message():
    sk = codec.MessageSkipper()
    msg = _rowset_reply(20000)
    for i in range(0, len(msg) - 1, 65536):
        sk.feed(msg[i:min(i + 65536, len(msg) - 1)])
        assert len(sk._part) <= 6
    assert sk.feed(msg[-1:]) == 0


@pytest.mark.parametrize("garbage", [b"GET / HTTP/1.1\r\n", b"\x81\x02\x00\x01" + b"\x00" * 20,
                                     b"\x80\x01\x00\x02\x00\x00\x00\x01x\x00\x00\x00\x00\x0f\x00\x01\x0c\xff\xff\xff\xff"])
def test_garbage_is_a_protocol_error(garbage):
    with pytest.raises(codec.ProtocolError):
        codec.MessageSkipper().feed(garbage)


def test_oversize_is_its_own_protocol_error():
    with pytest.raises(codec.MessageTooLarge):
        codec.message_length(_rowset_reply(1000), max_bytes=1000)
