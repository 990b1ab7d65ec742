import hashlib

from proxy.gateway.auth.plain import UsersFile, add_user


def test_unknown_user_costs_the_same_hash_work_as_a_wrong_password(tmp_path, monkeypatch):
    """Counted, not timed (a busy 2-core box made the timing flaky): an unknown user runs
    scrypt once with the same cost parameters as a known user's wrong password."""
    path = tmp_path / "users"
    add_user(path, "alice", "wonder")
    users = UsersFile(path)
    assert users.check("alice", "wonder") is None
    real = hashlib.scrypt
    calls: list[tuple] = []

    def counting(password, *, salt, n, r, p, dklen):
        calls.append((n, r, p, dklen))
        return real(password, salt=salt, n=n, r=r, p=p, dklen=dklen)
    monkeypatch.setattr("proxy.gateway.auth.plain.hashlib.scrypt", counting)

    def work(user):
        calls.clear()
        assert users.check(user, "guess") == f"PLAIN authentication failed for user {user}"
        return list(calls)

    known, unknown = work("alice"), work("nobody")
    assert len(known) == 1 and unknown == known
