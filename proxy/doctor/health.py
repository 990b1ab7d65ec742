"""doctor's view of a serving proxy's upstream health: what `serve` last wrote to
<state dir>/upstream-health.json (proxy/hs2/recovery.py) on each change of state, and every few
seconds while Spark answers."""
from __future__ import annotations

import os
import time
from pathlib import Path

from proxy.doctor.checks import FAIL, PASS, WARN, Check, Target
from proxy.hs2.recovery import HEALTH_FILE, read_health


def _ago(then: float | None, now: float) -> str:
    return "never" if then is None else f"{max(0.0, now - then):.0f}s ago"


def _running(pid: object) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_upstream_health(state_dir: Path, now: float | None = None) -> list[Check]:
    """One check when a proxy serving from this state directory recorded its upstream's
    health; none when no proxy ever did."""
    h = read_health(state_dir)
    if h is None:
        return []
    now = time.time() if now is None else now
    name = "upstream health"
    failure = (f"; last failure {_ago(h.get('last_failure'), now)}: "
               f"{h.get('last_failure_reason')}" if h.get("last_failure") else "")
    facts = (f"last success {_ago(h.get('last_success'), now)}, "
             f"{h.get('consecutive_failures', 0)} consecutive failure(s), "
             f"{h.get('reconnects', 0)} session(s) reopened{failure}")
    if not _running(h.get("pid")):
        return [Check(name, PASS, f"as last recorded by proxy pid {h.get('pid')} (no longer "
                      f"running): {h.get('state')}, {facts}")]
    if h.get("state") == "down":
        return [Check(name, WARN, f"serving proxy pid {h['pid']} sees {h.get('upstream')} "
                      f"DOWN since {_ago(h.get('down_since'), now)}: {facts}",
                      "start the Spark Thrift Server again: client sessions reopen on their "
                      "next statement, new sessions work at once (docs/recovery.md)")]
    return [Check(name, PASS, f"serving proxy pid {h['pid']} sees {h.get('upstream')} "
                  f"{h.get('state', 'unknown').upper()}: {facts}")]


def serving_proxy(state_dir: Path) -> dict | None:
    """What the proxy serving from `state_dir` wrote of itself, while it runs; else None."""
    h = read_health(state_dir)
    return h if h is not None and _running(h.get("pid")) else None


def beside_serving_proxy(checks: list[Check], t: Target) -> list[Check]:
    """doctor run beside the deployment's own running proxy (same config): its listen
    address taken, and its engine's lock on the state directory held, by that proxy is how
    a healthy deployment looks, not a failure."""
    h = serving_proxy(t.state_dir)
    if h is None:
        return checks
    pid, out = h["pid"], []
    ours = h.get("listen") in (f"{t.listen_host}:{t.listen_port}",)
    for c in checks:
        if c.name == f"listen {t.listen_host}:{t.listen_port}" and c.status == FAIL and ours:
            c = Check(c.name, PASS, f"in use by the serving proxy pid {pid} (this state "
                                    "directory's): the deployment is running")
        elif c.name == "state dir lock" and c.status == WARN and f"(pid {pid})" in c.detail:
            c = Check(c.name, PASS, f"held by the serving proxy pid {pid}'s engine")
        out.append(c)
    return out


__all__ = ["HEALTH_FILE", "beside_serving_proxy", "check_upstream_health", "serving_proxy"]
