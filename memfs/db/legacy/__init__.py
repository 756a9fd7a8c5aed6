"""IronClaw's legacy memory (v0.25 – v1.0: ``memory_documents``, ``memory_chunks``): on
PostgreSQL (``postgres``) and in a libSQL file (``libsql``), with what both share (the
rename over a document, ``rename_over``; the health checks, ``health``).  Reached only
through ``memfs.db`` (``Database.workspace``)."""
