"""Command line: `datamap-proxy serve | sync | advise | users add | doctor | docs`
(proxy/cli/main.py). The console script `proxy.cli:main` and `python -m proxy` start here."""
from proxy.cli.main import _flags, _format_rows, _has_failed, _quote_table, build_parser, main

__all__ = ["_flags", "_format_rows", "_has_failed", "_quote_table", "build_parser", "main"]
