"""Handle registry, operation transitions, session defaults, users file."""
import pytest

from proxy.errors import InternalError, InvalidHandle, UpstreamError, ClientError, to_status
from proxy.gateway.auth import plain as auth
from proxy.gateway.auth import base as auth_base
from proxy.hs2.handles import HandleRegistry, mint
from proxy.hs2.operation import TRANSITIONS, OpKind, OpState, Operation, can_move
from proxy.hs2.session import Session
from proxy.thrift.gen.TCLIService import ttypes as T


def test_registry_mint_lookup_remove():
    reg = HandleRegistry("OperationHandle")
    h = reg.add("a")
    assert len(h.guid) == 16 and len(h.secret) == 16
    assert reg.get(h) == "a"
    forged = T.THandleIdentifier(guid=h.guid, secret=b"x" * 16)
    with pytest.raises(InvalidHandle, match="Invalid OperationHandle"):
        reg.get(forged)
    assert reg.find(None) is None
    assert reg.remove(h) == "a" and reg.remove(h) is None and len(reg) == 0
    assert mint().guid != mint().guid


def test_transitions_written_out():
    assert can_move(OpState.INITIALIZED, OpState.RUNNING)
    assert can_move(OpState.RUNNING, OpState.FINISHED)
    assert can_move(OpState.FINISHED, OpState.CLOSED)
    assert not can_move(OpState.FINISHED, OpState.RUNNING)
    assert not can_move(OpState.CLOSED, OpState.FINISHED)
    assert TRANSITIONS[OpState.CLOSED] == frozenset()
    for s in OpState:
        assert s in TRANSITIONS
    op = Operation(OpKind.LOCAL, 0)
    op.to(OpState.RUNNING)
    op.to(OpState.ERROR)
    assert op.completed_ms is not None
    with pytest.raises(InternalError):
        op.to(OpState.FINISHED)
    assert int(OpState.TIMEDOUT) == 8 and int(OpState.PENDING) == 7


def test_session_defaults():
    s = Session(user="u", protocol=9, client_protocol=9, configuration={"use:database": "Sales"})
    assert s.current_db == "sales" and s.rewrite_enabled and s.columnar
    s.conf["datamap.rewrite.enabled"] = "false"
    assert not s.rewrite_enabled
    assert not Session(user="u", protocol=4, client_protocol=4).columnar


def test_to_status_families():
    st = to_status(ClientError("bad thing on t1", "42S02"))
    assert (st.statusCode, st.sqlState, st.errorMessage) == (3, "42S02", "bad thing on t1")
    up = T.TStatus(statusCode=3, sqlState="42000", errorCode=1, errorMessage="[PARSE_SYNTAX_ERROR]")
    assert to_status(UpstreamError("x", up)) is up
    assert to_status(UpstreamError("Spark unreachable")).sqlState == "08S01"
    st = to_status(KeyError("k"))
    assert st.sqlState == "HY000" and "KeyError" in st.errorMessage


def test_users_file(tmp_path):
    path = tmp_path / "users"
    auth.add_user(path, "alice", "s3cret")
    auth.add_user(path, "bob", "pw")
    auth.add_user(path, "alice", "new")
    text = path.read_text()
    assert "s3cret" not in text and text.count("alice:") == 1
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    uf = auth.UsersFile(path)
    assert uf.check("alice", "new") is None
    assert uf.check("alice", "s3cret") is not None
    assert uf.check("carol", "x") is not None
    with pytest.raises(auth_base.AuthError):
        auth.add_user(path, "bad:name", "x")
    with pytest.raises(auth_base.AuthError):
        auth.add_user(path, "x", "")
    (tmp_path / "broken").write_text("garbage\n")
    with pytest.raises(auth_base.AuthError, match="line 1"):
        auth.UsersFile(tmp_path / "broken")
    assert auth_base.AllowAll().check("any", "x") is None
