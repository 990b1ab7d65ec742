"""A real PostgreSQL for tests: initdb in a temp directory, TCP on a free loopback port, the
unix socket in that directory, fsync off. PostgreSQL refuses to run as root, so as root
its programs run as the `postgres` system user (runuser) in a directory it owns (made
under the system temp directory: pytest's are private to root).

    pg = PostgresServer.start()
    url = pg.new_database()        # "postgresql://test:<pw>@127.0.0.1:<port>/<fresh db>"
    pg.terminate_connections(url)  # drop every client of that database (fault injection)
    pg.stop()
"""
from __future__ import annotations

import glob
import itertools
import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.ports import free_port, log_tail

USER = "test"


def bin_dir() -> str | None:
    """The newest installed PostgreSQL's bin directory (Debian layout), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                   key=lambda p: int(p.split("/")[4]) if p.split("/")[4].isdigit() else 0)
    return os.path.dirname(found[-1]) if found else None


class PostgresServer:
    def __init__(self, root: Path, bindir: str):
        self.root, self.bindir = root, bindir
        self.data, self.log = root / "data", root / "postgres.log"
        self.port = free_port()
        self.password = secrets.token_hex(8)
        self._names = itertools.count()
        self._as_postgres = os.geteuid() == 0

    @classmethod
    def start(cls, durable: bool = False) -> "PostgresServer":
        """durable: fsync on, as production runs it (benchmarks); tests run without."""
        bindir = bin_dir()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed (Debian package postgresql)")
        pg = cls(Path(tempfile.mkdtemp(prefix="pg-")), bindir)
        pg._start(durable)
        return pg

    def _run(self, *argv: str) -> None:
        cmd = [os.path.join(self.bindir, argv[0]), *argv[1:]]
        if self._as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def _start(self, durable: bool) -> None:
        if self._as_postgres:
            shutil.chown(self.root, "postgres", "postgres")
        pwfile = self.root / "pw"
        pwfile.write_text(self.password + "\n")
        if self._as_postgres:
            shutil.chown(pwfile, "postgres", "postgres")
        os.chmod(pwfile, 0o600)
        self._run("initdb", "-D", str(self.data), "-U", USER, "--pwfile", str(pwfile),
                  "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8",
                  "--no-sync")
        pwfile.unlink()
        opts = (f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
                "-c max_connections=200")
        if not durable:
            opts += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        try:
            self._run("pg_ctl", "start", "-w", "-t", "60", "-D", str(self.data),
                      "-l", str(self.log), "-o", opts)
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"PostgreSQL did not start: {exc.stderr!r}\n"
                               f"{log_tail(self.log)}") from None

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://{USER}:{self.password}@127.0.0.1:{self.port}/{db}"

    def _admin(self):
        import psycopg
        return psycopg.connect(self.url(), autocommit=True)

    def new_database(self) -> str:
        """A fresh empty database; its URL."""
        name = f"catalog_{os.getpid()}_{next(self._names)}"
        with self._admin() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def terminate_connections(self, url: str) -> int:
        """Cut every connection to the database of `url` (as a PostgreSQL restart would)."""
        db = url.rsplit("/", 1)[1]
        with self._admin() as conn:
            return len(conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                    "WHERE datname = %s AND pid <> pg_backend_pid()",
                                    (db,)).fetchall())

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "stop", "-m", "immediate", "-D", str(self.data))
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired):
            pass
        # Removed in the background: a session's few hundred databases are some 1.5 GB in
        # tens of thousands of files, and removing them on a box busy with disk writes took
        # up to a minute at the end of the run, with nothing left to wait for.
        subprocess.run(["sh", "-c", 'rm -rf -- "$1" </dev/null >/dev/null 2>&1 &', "sh",
                        str(self.root)], check=False, timeout=30)
