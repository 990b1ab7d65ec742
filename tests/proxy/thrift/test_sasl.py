import pytest

from proxy.thrift import sasl


def _neg(buf):
    out = []
    while True:
        r = sasl.decode_negotiation(buf, 1 << 20)
        if r is None:
            return out, buf
        out.append(r[:2])
        buf = buf[r[2]:]


@pytest.mark.parametrize("status", [sasl.COMPLETE, sasl.OK])  # Java sends COMPLETE, Python OK
def test_plain_negotiation(status):
    srv = sasl.PlainServer()
    wire = sasl.encode_negotiation(sasl.START, b"PLAIN") + sasl.encode_negotiation(status, b"\x00alice\x00x")
    msgs, rest = _neg(wire)
    assert rest == b"" and len(msgs) == 2
    assert srv.on_message(*msgs[0]).reply == b""
    step = srv.on_message(*msgs[1])
    assert step.credentials == sasl.Credentials("", "alice", "x")
    assert srv.accept("alice") == b"\x05\x00\x00\x00\x00"
    assert srv.state is sasl.NegState.COMPLETE


def test_two_token_plain_and_split_input():
    wire = sasl.encode_negotiation(sasl.START, b"PLAIN") + sasl.encode_negotiation(sasl.OK, b"bob\x00pw")
    assert sasl.decode_negotiation(wire[:3], 100) is None
    assert sasl.decode_negotiation(wire[:7], 100) is None
    srv = sasl.PlainServer()
    msgs, _ = _neg(wire)
    srv.on_message(*msgs[0])
    assert srv.on_message(*msgs[1]).credentials.user == "bob"


def test_bad_mechanism():
    step = sasl.PlainServer().on_message(sasl.START, b"GSSAPI")
    assert step.error == "Unsupported mechanism type GSSAPI"
    assert step.reply[0] == sasl.BAD


@pytest.mark.parametrize("token,why", [(b"\x00\x00x", "empty user"), (b"\x00bob\x00", "empty password"),
                                       (b"nonuls", "Invalid PLAIN")])
def test_bad_credentials(token, why):
    srv = sasl.PlainServer()
    srv.on_message(sasl.START, b"PLAIN")
    step = srv.on_message(sasl.OK, token)
    assert step.error and why in step.error and step.reply[0] == sasl.BAD


def test_reject_and_bad_status():
    srv = sasl.PlainServer()
    srv.on_message(sasl.START, b"PLAIN")
    srv.on_message(sasl.OK, b"\x00a\x00b")
    assert srv.reject("nope")[0] == sasl.BAD
    with pytest.raises(sasl.SaslError):
        sasl.decode_negotiation(b"\x80\x01\x00\x01xxxx", 100)      # NOSASL client
    with pytest.raises(sasl.SaslError):
        sasl.decode_negotiation(b"\x01\x7f\xff\xff\xff", 100)      # oversized


def test_client_side():
    c = sasl.PlainClient("me", "")
    msgs, _ = _neg(c.initial())
    assert msgs == [(sasl.START, b"PLAIN"), (sasl.OK, b"\x00me\x00x")]
    c.on_message(sasl.COMPLETE, b"")
    assert c.complete
    with pytest.raises(sasl.SaslRejected, match="denied"):      # a refusal ...
        sasl.PlainClient("me", "p").on_message(sasl.BAD, b"denied")
    with pytest.raises(sasl.SaslError) as e:                   # ... vs a broken exchange
        sasl.PlainClient("me", "p").on_message(sasl.START, b"")
    assert not isinstance(e.value, sasl.SaslRejected)


def test_frames_as_byte_stream():
    dec = sasl.FrameDecoder(100)
    wire = sasl.encode_frame(b"abc") + sasl.encode_frame(b"") + sasl.encode_frame(b"defg")
    got = []
    for i in range(len(wire)):
        got += dec.feed(wire[i:i + 1])
    assert got == [b"abc", b"", b"defg"] and dec.pending == 0
    with pytest.raises(sasl.SaslError):
        sasl.FrameDecoder(10).feed(b"\x00\x00\x01\x00")


def test_mechanism_name_in_the_error_is_one_bounded_line():
    step = sasl.PlainServer().on_message(sasl.START, b"PLAIN\nFORGED line" + b"x" * 5000)
    assert step.error.startswith("Unsupported mechanism type PLAIN\\nFORGED LINE")
    assert "\n" not in step.error and len(step.error) < 200

