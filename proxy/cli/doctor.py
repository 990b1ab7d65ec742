"""`datamap-proxy doctor`: the installation check (proxy/doctor/, also `python -m
proxy.doctor`), with its own flags: the command line hands it the rest of argv."""
from __future__ import annotations

import sys


def add_parser(sub) -> None:
    sub.add_parser("doctor", help="check the installation", add_help=False)


def run(argv: list[str]) -> int:
    try:
        from proxy.doctor import main as doctor_main
    except ImportError as e:
        print(f"error: doctor is not available in this build ({e})", file=sys.stderr)
        return 2
    return doctor_main(argv) or 0
