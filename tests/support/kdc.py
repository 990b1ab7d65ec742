"""A real MIT Kerberos KDC (Debian krb5-kdc) in a temp directory, for tests.

    kdc = start_kdc(tmp_path / "kdc")    # realm DMP.TEST, KDC on a free 127.0.0.1 port (TCP)
    kdc.env                              # KRB5_CONFIG, KRB5_KDC_PROFILE, KRB5CCNAME, KRB5RCACHETYPE
    kdc.kinit("alice")                   # a ticket for alice in kdc.ccache (or another ccache)
    kdc.stop()

The realm has the proxy's service principals `hive/localhost` and `HTTP/localhost` in
`kdc.keytab`, and users alice and bob whose password is `<name>-pw`. The krb5.conf turns
off every DNS lookup (`rdns`, `dns_canonicalize_hostname`, `dns_lookup_kdc`) so the realm
works on a machine with no resolver for `localhost`'s reverse name; the replay cache is
off (`KRB5RCACHETYPE=none`), so nothing is written outside the temp directory; and the
allowed clock skew is 2 s instead of 5 min (one clock on loopback), so a test can see a
ticket expire.

`kdc.env` must be in the environment of every process that uses the realm: the proxy, a
Python client (set it in os.environ before the first GSSAPI call: MIT reads KRB5_CONFIG
once per process context), and the JVM (`java_opts()`).
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.ports import free_port, log_tail, port_accepts

REALM = "DMP.TEST"
USERS = ("alice", "bob")
SERVICES = ("hive/localhost", "HTTP/localhost")
MASTER_PASSWORD = "kdc-master-not-a-secret"
START_TIMEOUT_S = 20.0
_SBIN = ("/usr/sbin", "/usr/bin")


class KdcStartError(RuntimeError):
    """The KDC could not be set up or did not come up; the message says which step."""


def _tool(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for d in _SBIN:
        p = Path(d) / name
        if p.exists():
            return str(p)
    return None


def available() -> str | None:
    """None when the MIT KDC tools are installed, else what is missing (a skip reason)."""
    missing = [t for t in ("kdb5_util", "kadmin.local", "krb5kdc", "kinit") if _tool(t) is None]
    if missing:
        return f"MIT Kerberos tools not installed ({', '.join(missing)}): apt-get install krb5-kdc krb5-admin-server krb5-user"
    return None


def password(user: str) -> str:
    return f"{user}-pw"


@dataclass
class Kdc:
    realm: str
    port: int
    workdir: Path
    krb5_conf: Path
    keytab: Path
    ccache: Path
    _proc: subprocess.Popen = field(repr=False)

    @property
    def env(self) -> dict[str, str]:
        return {"KRB5_CONFIG": str(self.krb5_conf),
                "KRB5_KDC_PROFILE": str(self.workdir / "kdc.conf"),
                "KRB5CCNAME": f"FILE:{self.ccache}",
                "KRB5RCACHETYPE": "none"}

    def principal(self, name: str) -> str:
        return f"{name}@{self.realm}"

    def kinit(self, user: str, ccache: Path | None = None, lifetime: str | None = None) -> Path:
        """Get a TGT for `user` into `ccache` (default kdc.ccache), valid for `lifetime`
        (kinit's -l: "2s", "10m") or the realm's hour."""
        ccache = ccache or self.ccache
        env = {**os.environ, **self.env, "KRB5CCNAME": f"FILE:{ccache}"}
        argv = [_tool("kinit")] + (["-l", lifetime] if lifetime else []) + [self.principal(user)]
        r = subprocess.run(argv, input=password(user) + "\n",
                           env=env, capture_output=True, text=True, timeout=20)
        if r.returncode != 0:
            raise KdcStartError(f"kinit {user} failed: {r.stderr.strip()}")
        return ccache

    def kadmin(self, query: str) -> str:
        return _run([_tool("kadmin.local"), "-r", self.realm, "-q", query], self.env, "kadmin.local")

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)

    def java_opts(self) -> str:
        """JVM options for a Java client (beeline, Hive JDBC) of this realm: the JVM does not
        read KRB5_CONFIG, and it takes the ticket from the cache (KRB5CCNAME) only when not
        limited to a JAAS Subject's credentials."""
        return (f"-Djava.security.krb5.conf={self.krb5_conf} "
                f"-Djavax.security.auth.useSubjectCredsOnly=false")


def _run(argv: list[str], env: dict[str, str], what: str) -> str:
    r = subprocess.run(argv, env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise KdcStartError(f"{what} failed (exit {r.returncode}): {r.stderr.strip() or r.stdout.strip()}")
    return r.stdout


def _write_config(workdir: Path, port: int, realm: str) -> None:
    (workdir / "krb5.conf").write_text(f"""[libdefaults]
    default_realm = {realm}
    dns_lookup_kdc = false
    dns_lookup_realm = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = 1h
    clockskew = 2
    forwardable = true

[realms]
    {realm} = {{
        kdc = 127.0.0.1:{port}
        admin_server = 127.0.0.1:{free_port()}
    }}

[domain_realm]
    localhost = {realm}
""")
    (workdir / "kdc.conf").write_text(f"""[kdcdefaults]
    kdc_listen = {free_port()}
    kdc_tcp_listen = {port}

[realms]
    {realm} = {{
        database_name = {workdir}/principal
        key_stash_file = {workdir}/stash
        acl_file = {workdir}/kadm5.acl
        kdc_listen = 127.0.0.1:{free_port()}
        kdc_tcp_listen = 127.0.0.1:{port}
        max_life = 1h
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{workdir}/kdc.log
""")
    (workdir / "kadm5.acl").write_text("")


def start_kdc(workdir: Path, realm: str = REALM) -> Kdc:
    """Create the realm (database, principals, keytab) under `workdir` and start krb5kdc on
    a free loopback TCP port. Raises KdcStartError naming the failed step."""
    missing = available()
    if missing:
        raise KdcStartError(missing)
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    _write_config(workdir, port, realm)
    env = {"KRB5_CONFIG": str(workdir / "krb5.conf"), "KRB5_KDC_PROFILE": str(workdir / "kdc.conf")}
    _run([_tool("kdb5_util"), "create", "-s", "-r", realm, "-P", MASTER_PASSWORD], env, "kdb5_util create")
    keytab = workdir / "proxy.keytab"
    admin = [_tool("kadmin.local"), "-r", realm, "-q"]
    for user in USERS:
        _run(admin + [f"addprinc -pw {password(user)} {user}@{realm}"], env, f"addprinc {user}")
    for svc in SERVICES:
        _run(admin + [f"addprinc -randkey {svc}@{realm}"], env, f"addprinc {svc}")
        _run(admin + [f"ktadd -k {keytab} {svc}@{realm}"], env, f"ktadd {svc}")
    log = open(workdir / "krb5kdc.out", "wb")
    proc = subprocess.Popen([_tool("krb5kdc"), "-n", "-r", realm], env={**os.environ, **env},
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)
    log.close()
    kdc = Kdc(realm, port, workdir, workdir / "krb5.conf", keytab, workdir / "ccache", proc)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not port_accepts("127.0.0.1", port):
        if proc.poll() is not None or time.monotonic() > deadline:
            kdc.stop()
            raise KdcStartError(f"krb5kdc did not listen on 127.0.0.1:{port}:\n"
                                f"{log_tail(workdir / 'krb5kdc.out')}\n{log_tail(workdir / 'kdc.log')}")
        time.sleep(0.05)
    return kdc


def kerberos_env(kdc) -> dict[str, str]:
    """The environment of a proxy with auth = kerberos on the realm's keytab. The principals
    are spelled out: the tests listen on 127.0.0.1, for which _HOST would be this machine's
    FQDN, not the localhost the realm knows."""
    return {**kdc.env, "DATAMAP_PROXY_SERVER_KERBEROS_KEYTAB": str(kdc.keytab),
            "DATAMAP_PROXY_SERVER_KERBEROS_PRINCIPAL": "hive/localhost@DMP.TEST",
            "DATAMAP_PROXY_SERVER_KERBEROS_SPNEGO_PRINCIPAL": "HTTP/localhost@DMP.TEST"}
