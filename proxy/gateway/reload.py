"""SIGHUP: read the settings again and apply the reloadable ones to the running server.

The same sources as at start-up are read again (the --config TOML file, the environment
of the process, the command-line flags, which still win). A file that does not parse or
holds a bad value changes nothing: the error is logged and the old settings stay. A
non-reloadable key whose value changed is logged as needing a restart and keeps its old
value, so the live settings always match the objects built from them.

What is reloaded (RELOADABLE) goes to live objects through callbacks, in order; a failing
callback is logged and does not stop the others. `register(fn)` adds one: fn(settings) gets
the new live Settings. Nothing is closed or taken back: a lower limit refuses or queues only
what comes after it (docs/limits.md).
"""
from __future__ import annotations

import dataclasses
import logging
import os
from typing import Any, Callable, Mapping

from proxy import config as cfg

log = logging.getLogger("proxy.reload")

RELOADABLE: dict[str, frozenset[str]] = {
    "server": frozenset({
        "limit_connections_per_user", "limit_connections_per_ipaddress",
        "limit_connections_per_user_ipaddress", "max_running_operations",
        "operation_queue_size", "operation_queue_timeout", "query_timeout",
        "max_connections", "max_connections_per_address", "max_login_failures",
        "max_login_failures_per_address", "login_failure_window",
        "idle_session_timeout", "idle_operation_timeout", "idle_connection_timeout",
        "impersonation"}),
    "upstream": frozenset({"max_sessions", "max_sessions_per_user", "session_queue_size",
                           "session_queue_timeout"}),
    "datamaps": frozenset({"audit_sample_rate"}),      # the Auditor's callback (proxy/app.py)
}
# never written to the log, changed or not (their values are secrets; the catalog URL
# carries the PostgreSQL password)
_SECRET = {("upstream", "password"), ("server", "ldap_bind_password"), ("state", "catalog")}

Callback = Callable[[cfg.Settings], None]


def changes(old: cfg.Settings, new: cfg.Settings) -> list[tuple[str, str]]:
    """(section, key) of every setting whose value differs."""
    out = []
    for section in cfg.SECTIONS:
        a, b = getattr(old, section), getattr(new, section)
        for f in dataclasses.fields(a):
            if getattr(a, f.name) != getattr(b, f.name):
                out.append((section, f.name))
    return out


def merge(live: cfg.Settings, new: cfg.Settings) -> cfg.Settings:
    """`live` with the reloadable keys taken from `new`."""
    parts = {}
    for section, keys in RELOADABLE.items():
        src = getattr(new, section)
        parts[section] = dataclasses.replace(getattr(live, section),
                                             **{k: getattr(src, k) for k in keys})
    return dataclasses.replace(live, **parts)


def _show(settings: cfg.Settings, section: str, key: str) -> str:
    if (section, key) in _SECRET:
        return "(secret)"
    return repr(getattr(getattr(settings, section), key))


class Reloader:
    def __init__(self, live: cfg.Settings, config_file: str | None = None,
                 flags: Mapping[str, Mapping[str, Any]] | None = None,
                 env: Callable[[], Mapping[str, str]] = lambda: os.environ,
                 loaded: cfg.Settings | None = None):
        self.live = live
        # as loaded at start (before serve filled in e.g. the embedded engine's address):
        # what a changed non-reloadable key is compared with, so that it keeps being
        # reported until the restart that applies it
        self._loaded = loaded or live
        self._source = (config_file, flags)
        self._env = env
        self._callbacks: list[Callback] = []

    def register(self, fn: Callback) -> None:
        self._callbacks.append(fn)

    def reload(self) -> bool:
        """Re-read and apply; False when the new settings were refused."""
        config_file, flags = self._source
        try:
            new = cfg.load(config_file, env=self._env(), flags=flags)
        except cfg.ConfigError as e:
            log.error("SIGHUP: settings not reloaded, the old ones stay: %s", e)
            return False
        changed = changes(self._loaded, new)
        restart = [(s, k) for s, k in changed if k not in RELOADABLE.get(s, ())]
        for s, k in restart:
            log.warning("SIGHUP: [%s] %s changed to %s but needs a restart; still %s", s, k,
                        _show(new, s, k), _show(self._loaded, s, k))
        before = self.live
        self.live = merge(before, new)
        applied = [(s, k) for s, k in changes(before, self.live)]
        for fn in self._callbacks:
            try:
                fn(self.live)
            except Exception:  # noqa: BLE001 - one broken callback must not stop the others
                log.exception("SIGHUP: applying the settings with %r failed",
                              getattr(fn, "__qualname__", fn))
        if applied:
            log.info("SIGHUP: settings reloaded: %s", ", ".join(
                f"[{s}] {k} = {_show(self.live, s, k)}" for s, k in applied))
        else:
            log.info("SIGHUP: settings reloaded, no reloadable setting changed")
        return True


def apply_to_server(server: Any) -> Callback:
    """The callback for a proxy.gateway.server.ProxyServer and its Frontend: every reloadable
    setting of the gateway's own objects. Other parts' policy objects with an `update(...)`
    register their own callback, or are found here by name (`impersonation`)."""
    def apply(settings: cfg.Settings) -> None:
        s, up = settings.server, settings.upstream
        service = server.service
        server.settings = settings
        service.settings = settings          # idle timeouts, query_timeout are read per use
        # (the Frontend hands them on to its managers)
        server.limits.total_limit = s.max_connections
        server.limits.per_address_limit = s.max_connections_per_address
        for window, limit in ((server.throttle.users, s.max_login_failures),
                              (server.throttle.addresses, s.max_login_failures_per_address)):
            window.limit, window.window = limit, s.login_failure_window
        sessions = service.session_manager
        sessions.session_limits.update(s.limit_connections_per_user,
                                       s.limit_connections_per_ipaddress,
                                       s.limit_connections_per_user_ipaddress)
        service.run_gate.update(s.max_running_operations, s.operation_queue_size,
                                s.operation_queue_timeout)
        sessions.slots.update(up.max_sessions, up.max_sessions_per_user, up.session_queue_size,
                              up.session_queue_timeout)
        for owner in (server, sessions):
            policy = getattr(owner, "impersonation", None)
            if policy is not None and hasattr(policy, "update"):
                policy.update(s.impersonation)
        service.observers.reopen()          # logrotate moved the audit log: write to the new file
        server.reconfigured()
    return apply
