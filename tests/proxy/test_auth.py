import statistics
import time

from proxy.auth import UsersFile, add_user


def test_unknown_user_costs_the_same_hash_work_as_a_wrong_password(tmp_path):
    path = tmp_path / "users"
    add_user(path, "alice", "wonder")
    users = UsersFile(path)
    assert users.check("alice", "wonder") is None

    def median_seconds(user):
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            assert users.check(user, "guess") == f"PLAIN authentication failed for user {user}"
            times.append(time.perf_counter() - t0)
        return statistics.median(times)

    known, unknown = median_seconds("alice"), median_seconds("nobody")
    # Before: 1 ms against 40 ms. Generous bounds: a busy 2-core box jitters.
    assert 0.4 < unknown / known < 2.5, (unknown, known)
