"""The datamap catalog: definitions, segments, events, leases (SQLite or PostgreSQL)."""
