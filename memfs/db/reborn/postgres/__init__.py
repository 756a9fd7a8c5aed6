"""IronClaw's Reborn layout on PostgreSQL: the rows (``rows``) under ``RebornStore``."""
