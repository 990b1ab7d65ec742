from proxy.gateway.admission import ConnectionLimits, LoginThrottle


def test_connection_limits_total_and_per_address():
    lim = ConnectionLimits(total=3, per_address=2)
    assert lim.admit("10.0.0.1") is None and lim.admit("10.0.0.1") is None
    assert "max_connections_per_address" in lim.admit("10.0.0.1")
    assert lim.admit("10.0.0.2") is None
    assert "server.max_connections)" in lim.admit("10.0.0.3")
    lim.release("10.0.0.1")
    assert lim.admit("10.0.0.3") is None
    for a in ("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.3"):   # the last one is spurious
        lim.release(a)
    assert lim.total == 0 and lim._by_address == {}              # no entry per past address


def test_connection_limits_zero_means_no_cap():
    lim = ConnectionLimits(total=0, per_address=0)
    assert all(lim.admit("a") is None for _ in range(5000))


def _throttle(now, **kw):
    kw = {"per_user": 3, "per_address": 5, "window": 60.0, **kw}
    return LoginThrottle(clock=lambda: now[0], **kw)


def test_user_locked_after_n_failures_until_window_ends():
    now = [0.0]
    t = _throttle(now)
    assert t.failed("alice", "a1") == [] and t.failed("alice", "a2") == []
    started = t.failed("alice", "a3")
    assert [lock.what for lock in started] == ["user alice"]
    now[0] = 20.0
    lock = t.check("alice", "a4")
    assert lock.what == "user alice" and round(lock.retry_after) == 40
    assert "Too many failed logins for user alice; retry in 40 s" == lock.message()
    assert t.check("bob", "a4") is None                  # other users are not affected
    now[0] = 60.0
    assert t.check("alice", "a4") is None                # the window is over


def test_success_clears_the_user_but_not_the_address():
    now = [0.0]
    t = _throttle(now)
    t.failed("alice", "x")
    t.failed("alice", "x")
    t.succeeded("alice")
    t.failed("alice", "x")
    t.failed("alice", "x")
    assert t.check("alice", "x") is None                 # count restarted at the success
    assert [lock.what for lock in t.failed("carol", "x")] == ["address x"]   # 5th from x
    assert t.check("mallory", "x").what == "address x"   # spraying names from x stops
    assert t.check("mallory", "y") is None


def test_state_is_bounded_under_a_flood_of_names():
    now = [0.0]
    t = _throttle(now, per_address=0, max_keys=100)     # 0: no per-address limit
    for i in range(10_000):
        t.failed(f"user{i}", f"10.0.{i // 256}.{i % 256}")
    assert len(t.users) == 100 and len(t.addresses) == 0
    assert t.check("user9999", "z") is None              # one failure each: nobody locked


def test_zero_limit_disables_lockout():
    now = [0.0]
    t = _throttle(now, per_user=0, per_address=0)
    for _ in range(100):
        assert t.failed("alice", "x") == []
    assert t.check("alice", "x") is None
