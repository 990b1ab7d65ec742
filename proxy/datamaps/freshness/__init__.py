"""Datamap answers checked against the base files on disk, and syncs."""
