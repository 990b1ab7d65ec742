"""Who a session runs as.

The authenticated user (SASL PLAIN/GSSAPI authcid, HTTP Basic/cookie/SPNEGO; under NOSASL
the OpenSession username, the only thing there is) is the identity: OpenSession's own
`username` field is ignored, as HiveServer2 does. A client may ask to act as someone else
with `hive.server2.proxy.user` in the OpenSession configuration (Superset, Hue, Hive JDBC
`;hive.server2.proxy.user=u`); that is honoured only when `[server] impersonation` has a
rule for it, and refused otherwise (SQLSTATE 28000, naming both users): a silent fallback
to the real user would run the statements under an identity the client did not ask for.

Rules, one string each: "actor:target,target" (actor may act as the listed users) or
"actor:*" (as anyone), parsed by proxy/config.py's `parse_rules` (which checks them when the
settings load). Several rules for one actor add up. The policy object is shared by
every session; `update(rules)` swaps the rules in one assignment (SIGHUP reload), and a
session keeps the identity it was opened with.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from proxy.config import ANY, parse_rules
from proxy.errors import ClientError

PROXY_USER_KEY = "hive.server2.proxy.user"


class ImpersonationRefused(ClientError):
    def __init__(self, actor: str, target: str):
        super().__init__(f"User {actor} is not allowed to impersonate {target} "
                         f"({PROXY_USER_KEY}); see [server] impersonation", "28000")


@dataclass(frozen=True)
class Identity:
    user: str                       # whom the session's statements run as
    real_user: str | None           # the authenticated user, when it impersonates `user`
    configuration: dict[str, str]   # the OpenSession configuration minus the proxy-user key


class ImpersonationPolicy:
    def __init__(self, rules: Iterable[str] = ()):
        self._rules = parse_rules(rules)

    def update(self, rules: Iterable[str]) -> None:
        self._rules = parse_rules(rules)     # parse first: a bad rule leaves the old ones

    def allows(self, actor: str, target: str) -> bool:
        if actor == target:
            return True
        targets = self._rules.get(actor, frozenset())
        return ANY in targets or target in targets

    def resolve(self, authenticated: str, configuration: Mapping[str, str] | None) -> Identity:
        conf = dict(configuration or {})
        target = (conf.pop(PROXY_USER_KEY, None) or "").strip()
        if not target or target == authenticated:
            return Identity(authenticated, None, conf)
        if not self.allows(authenticated, target):
            raise ImpersonationRefused(authenticated, target)
        return Identity(target, authenticated, conf)
