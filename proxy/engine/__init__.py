"""Spark as the proxy runs it: the embedded engine, the pipeline session, the time zones."""
