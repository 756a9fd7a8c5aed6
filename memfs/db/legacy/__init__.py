"""IronClaw's legacy memory (v0.25 – v1.0: ``memory_documents``, ``memory_chunks``) on
PostgreSQL: the document engine (``store``) and the narrow stores of the capabilities only
this layout has (re-chunk queue, embeddings, planner statistics, version history).
Reached only through ``memfs.db`` (``Database.workspace``)."""
