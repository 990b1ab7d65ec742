"""The datamap DDL: shared words, parser, legacy providers, runners, SHOW rows."""
