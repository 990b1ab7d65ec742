"""Datamaps in the proxy: the DDL, the catalog, keeping datamaps current, checking their
answers (freshness, audits), index datamaps, and the Router handlers that use them.

Which module holds which behaviour is ARCHITECTURE.md ("Where each behaviour lives"); the
wiring of one `serve` process is proxy/app.py.
"""
