"""PLAIN authentication: who may open a session.

`Authenticator.check(user, password)` returns None when accepted, else a reason. It may be
slow (salted hashing), so the server calls it in a worker thread. An unknown user is
hashed against a decoy, so the time of a rejection does not say whether the name exists;
lockout after repeated failures is the server's (admission.LoginThrottle).

Users file format, one user per line (`#` comments allowed):
    name:scrypt$<n>$<r>$<p>$<salt hex>$<hash hex>
Written by `datamap-proxy users add NAME`. Re-read when the file's mtime changes.
"""
from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
from pathlib import Path

from proxy.gateway.auth.base import AuthError

SCRYPT_N, SCRYPT_R, SCRYPT_P = 2 ** 14, 8, 1


class DenyAll:
    """PLAIN when the server authenticates otherwise (auth=kerberos without a users file)."""

    def __init__(self, reason: str):
        self.reason = reason

    def check(self, user: str, password: str) -> str | None:
        return self.reason


def hash_password(password: str, salt: bytes | None = None,
                  n: int = SCRYPT_N, r: int = SCRYPT_R, p: int = SCRYPT_P) -> str:
    salt = salt or secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=32)
    return f"scrypt${n}${r}${p}${salt.hex()}${digest.hex()}"


def verify_password(password: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        got = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), n=int(n), r=int(r),
                             p=int(p), dklen=len(digest) // 2)
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got.hex(), digest)


def _valid_name(name: str) -> bool:
    return bool(name) and ":" not in name and not any(c.isspace() for c in name)


def parse_users(text: str, source: str = "users file") -> dict[str, str]:
    users: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, stored = line.partition(":")
        if not sep or not _valid_name(name) or not stored.startswith("scrypt$"):
            raise AuthError(f"{source} line {lineno}: expected name:scrypt$...")
        users[name] = stored
    return users


class UsersFile:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._lock = threading.Lock()
        self._mtime: float | None = None
        self._users: dict[str, str] = {}
        self._load()   # fail at start-up, not at first login

    def _load(self) -> None:
        try:
            st = self.path.stat()
            if st.st_mtime == self._mtime:
                return
            users = parse_users(self.path.read_text(), f"users file {self.path}")
        except OSError as e:
            raise AuthError(f"cannot read users file {self.path}: {e.strerror}") from None
        self._users, self._mtime = users, st.st_mtime

    def check(self, user: str, password: str) -> str | None:
        with self._lock:
            try:
                self._load()
            except AuthError:
                pass  # keep the last good copy; the server logs at start-up
            stored = self._users.get(user)
        # An unknown user costs the same scrypt work as a wrong password, so the time of a
        # rejection does not tell which names exist.
        ok = verify_password(password, stored or _decoy())
        if stored is None or not ok:
            return f"PLAIN authentication failed for user {user}"
        return None


_decoy_hash: str | None = None


def _decoy() -> str:
    """A stored-hash string no password matches (random salt and digest), with the
    parameters `users add` writes."""
    global _decoy_hash
    if _decoy_hash is None:
        _decoy_hash = (f"scrypt${SCRYPT_N}${SCRYPT_R}${SCRYPT_P}$"
                       f"{secrets.token_hex(16)}${secrets.token_hex(32)}")
    return _decoy_hash


def add_user(path: str | os.PathLike, name: str, password: str) -> None:
    """Add or replace `name` in the users file (created with mode 0600)."""
    if not _valid_name(name):
        raise AuthError(f"invalid user name {name!r}: no ':' or whitespace, not empty")
    if not password:
        raise AuthError(f"empty password for user {name}")
    path = Path(path)
    lines = path.read_text().splitlines() if path.exists() else []
    if path.exists():
        parse_users("\n".join(lines), f"users file {path}")   # refuse to rewrite a broken file
    lines = [ln for ln in lines if ln.partition(":")[0].strip() != name]
    lines.append(f"{name}:{hash_password(password)}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(tmp, path)
