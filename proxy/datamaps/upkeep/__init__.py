"""Keeping datamaps current: refresh, compaction, the live view, stacked builds."""
