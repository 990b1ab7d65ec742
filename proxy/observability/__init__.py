"""What the proxy saw, recorded: statement events, the audit log, metrics, the query log."""
