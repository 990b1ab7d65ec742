"""A real OpenLDAP slapd (Debian's /usr/sbin/slapd) for the tests, in a temp directory.

`start_slapd(workdir)` writes a slapd.conf (mdb database, suffix dc=example,dc=com), loads
DIRECTORY_LDIF with slapadd while the server is down, makes a self-signed certificate for
127.0.0.1 with openssl, and starts slapd in the foreground on two free loopback ports:
ldap:// (StartTLS offered) and ldaps://. Ready when both ports accept; `stop()` ends it,
`start()` brings the same directory back (the "directory down" tests use both).

People (password = name + "-pw"): alice and bob in group analysts, carol in admins, dave in
no group; the service account cn=reader,dc=example,dc=com (password reader-pw) may search.
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

SLAPD = Path("/usr/sbin/slapd")
SLAPADD = Path("/usr/sbin/slapadd")
SUFFIX = "dc=example,dc=com"
PEOPLE = f"ou=people,{SUFFIX}"
GROUPS = f"ou=groups,{SUFFIX}"
READER_DN = f"cn=reader,{SUFFIX}"
READER_PW = "reader-pw"
USERS = {"alice": "analysts", "bob": "analysts", "carol": "admins", "dave": None}


def available() -> bool:
    return SLAPD.exists() and SLAPADD.exists() and shutil.which("openssl") is not None


def password(user: str) -> str:
    return f"{user}-pw"


def _entries() -> str:
    out = [f"dn: {SUFFIX}\nobjectClass: dcObject\nobjectClass: organization\ndc: example\n"
           f"o: Example\n",
           f"dn: {PEOPLE}\nobjectClass: organizationalUnit\nou: people\n",
           f"dn: {GROUPS}\nobjectClass: organizationalUnit\nou: groups\n",
           f"dn: {READER_DN}\nobjectClass: person\ncn: reader\nsn: reader\n"
           f"userPassword: {READER_PW}\n"]
    for user in USERS:
        out.append(f"dn: uid={user},{PEOPLE}\nobjectClass: inetOrgPerson\nuid: {user}\n"
                   f"cn: {user}\nsn: {user}\nuserPassword: {password(user)}\n")
    for group in sorted({g for g in USERS.values() if g}):
        members = "".join(f"member: uid={u},{PEOPLE}\n" for u, g in USERS.items() if g == group)
        out.append(f"dn: cn={group},{GROUPS}\nobjectClass: groupOfNames\ncn: {group}\n{members}")
    return "\n".join(out)


DIRECTORY_LDIF = _entries()

_CONF = """\
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {dir}/slapd.pid
argsfile {dir}/slapd.args
TLSCertificateFile {dir}/cert.pem
TLSCertificateKeyFile {dir}/key.pem
database mdb
maxsize 16777216
suffix "{suffix}"
rootdn "cn=admin,{suffix}"
rootpw admin-pw
directory {dir}/db
access to attrs=userPassword by anonymous auth by * none
access to * by dn.exact="{reader}" read by self read by * none
"""


@dataclass
class Slapd:
    workdir: Path
    port: int
    ldaps_port: int
    ca_file: Path
    _proc: subprocess.Popen | None = field(default=None, repr=False)

    @property
    def url(self) -> str:
        return f"ldap://127.0.0.1:{self.port}"

    @property
    def ldaps_url(self) -> str:
        return f"ldaps://127.0.0.1:{self.ldaps_port}"

    def start(self, timeout: float = 15.0) -> None:
        log = open(self.workdir / "slapd.log", "ab")
        # -d keeps slapd in the foreground, so this Popen owns it (and its exit code).
        self._proc = subprocess.Popen(
            [str(SLAPD), "-f", str(self.workdir / "slapd.conf"), "-d", "256",
             "-h", f"{self.url}/ {self.ldaps_url}/"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while not (port_accepts("127.0.0.1", self.port)
                   and port_accepts("127.0.0.1", self.ldaps_port)):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"slapd did not start; log:\n"
                                   f"{log_tail(self.workdir / 'slapd.log')}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self._proc.pid, signal.SIGKILL)
                self._proc.wait(5)
        self._proc = None


def _self_signed(workdir: Path) -> None:
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(workdir / "key.pem"), "-out", str(workdir / "cert.pem")],
        check=True, capture_output=True)


def start_slapd(workdir: Path) -> Slapd:
    workdir = Path(workdir).resolve()
    (workdir / "db").mkdir(parents=True)
    _self_signed(workdir)
    conf = workdir / "slapd.conf"
    conf.write_text(_CONF.format(dir=workdir, suffix=SUFFIX, reader=READER_DN))
    ldif = workdir / "directory.ldif"
    ldif.write_text(DIRECTORY_LDIF)
    subprocess.run([str(SLAPADD), "-f", str(conf), "-l", str(ldif)], check=True,
                   capture_output=True)
    s = Slapd(workdir, free_port(), free_port(), workdir / "cert.pem")
    s.start()
    return s
