"""Who may log in: the Authenticator protocol (base.py), the users file and PLAIN (plain.py),
LDAP (ldap.py), Kerberos (kerberos.py); `build_authenticator` chooses the PLAIN checker
the settings ask for."""
from __future__ import annotations

from proxy.gateway.auth.base import AllowAll, Authenticator, AuthError
from proxy.gateway.auth.plain import DenyAll, UsersFile


def build_authenticator(settings) -> Authenticator:
    """The PLAIN checker `[server]` asks for (Settings or ServerSettings); AuthError on a
    bad configuration, so that the server does not start."""
    s = getattr(settings, "server", settings)
    if s.auth == "ldap":
        if s.users_file:
            raise AuthError("[server] users_file and auth = ldap exclude each other: "
                            "passwords are checked by one of them")
        from proxy.gateway.auth.ldap import LdapAuthenticator     # ldap3 only when asked for
        checker = LdapAuthenticator(s)
        checker.probe()
        return checker
    if s.users_file:
        return UsersFile(s.users_file)
    if s.auth == "kerberos":
        return DenyAll("this server authenticates with Kerberos: PLAIN logins are refused")
    return AllowAll()
