"""IronClaw's Reborn memory (v1.1+): documents as rows of ``root_filesystem_entries``.

``RebornStore`` (``store``) holds the layout's rules once over the rows of one database:
PostgreSQL (``postgres``) or a libSQL file (``libsql``)."""
