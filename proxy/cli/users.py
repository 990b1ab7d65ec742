"""`datamap-proxy users add`: a user of the PLAIN users file."""
from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from proxy import config as cfg
from proxy.gateway.auth.base import AuthError


def add_parser(sub) -> None:
    u = sub.add_parser("users", help="manage the PLAIN users file")
    usub = u.add_subparsers(dest="users_command", required=True)
    ua = usub.add_parser("add", help="add or replace a user (password from stdin or prompt)")
    ua.add_argument("name")
    ua.add_argument("--users-file", metavar="FILE", help="default: [server] users_file or <state dir>/users")
    ua.add_argument("--config", metavar="FILE")


def run(a: argparse.Namespace) -> int:
    from proxy.gateway.auth.plain import add_user
    settings = cfg.load(a.config)
    path = a.users_file or settings.server.users_file or str(Path(settings.state.dir) / "users")
    if sys.stdin.isatty():
        pw = getpass.getpass(f"Password for {a.name}: ")
        if getpass.getpass("Again: ") != pw:
            print("error: passwords differ", file=sys.stderr)
            return 1
    else:
        pw = sys.stdin.readline().rstrip("\r\n")
    try:
        add_user(path, a.name, pw)
    except AuthError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"user {a.name} written to {path}", file=sys.stderr)
    return 0
