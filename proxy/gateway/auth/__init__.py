"""Who may log in: the Authenticator protocol (base.py), the users file and PLAIN (plain.py),
LDAP (ldap.py), Kerberos (kerberos.py)."""
