"""The HiveServer2 protocol service: the TCLIService calls, the client sessions and their
operations, each session backed by one upstream Spark session (ARCHITECTURE.md)."""
