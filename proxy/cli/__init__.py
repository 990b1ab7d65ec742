"""Command line: `datamap-proxy serve | sync | advise | users add | doctor | docs`
(proxy/cli/main.py). The console script `proxy.cli:main` and `python -m proxy` start here."""
from proxy.cli.main import main

__all__ = ["main"]
