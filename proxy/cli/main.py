"""Command line: `datamap-proxy serve | sync | advise | users add | doctor | docs`; each
command's flags and run are in its own module here (serve.py, sync.py, ...)."""
from __future__ import annotations

import argparse
import sys

from proxy.cli import advise, docs, doctor, serve, sync, users

# the modules with add_parser(sub) and run(namespace), in --help's order
COMMANDS = {"serve": serve, "users": users, "sync": sync, "advise": advise}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="datamap-proxy",
                                description="HiveServer2 proxy in front of Spark Thrift Server "
                                            "that answers BI queries from datamaps")
    sub = p.add_subparsers(dest="command", required=True)
    for command in COMMANDS.values():
        command.add_parser(sub)
    doctor.add_parser(sub)
    sub.add_parser("docs", help="print where the documentation pages are installed")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "doctor":       # doctor parses its own flags
        return doctor.run(argv[1:])
    a = build_parser().parse_args(argv)
    if a.command == "docs":
        return docs.main()
    return COMMANDS[a.command].run(a)


if __name__ == "__main__":
    sys.exit(main())
