"""The query log: statement events as rows, their reason classes, the table."""
