"""IronClaw's legacy layout on PostgreSQL: the document engine (``store``) and the narrow
stores of the capabilities only it has (re-chunk queue, embeddings, planner statistics,
version history)."""
