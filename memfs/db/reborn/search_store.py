"""IronClaw v1.3's full-text query over a Reborn workspace's chunk rows
(docs/ironclaw/reborn.md §5.2)."""

from __future__ import annotations

from collections.abc import Sequence

from memfs.db.capabilities import RankedRow
from memfs.db.reborn.layout import RebornScope
from memfs.db.scoped import Pool

#: The tsvector IronClaw searches (and its per-scope GIN index covers, reborn.md §5.4).
_TSV = "to_tsvector('english', coalesce(indexed ->> 'content', ''))"


class RebornSearchStore:
    """Candidates for one query: rows of the scope matching any term, by ``ts_rank``."""

    def __init__(self, pool: Pool, scope: RebornScope) -> None:
        self.pool = pool
        self.scope = scope

    def search(self, terms: Sequence[str], candidates: int) -> list[RankedRow]:
        """Rows whose ``indexed.content`` matches any of ``terms``, best ``ts_rank``
        first, then path; no terms, no query."""
        if not terms:
            return []
        query = " | ".join(terms)
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT path, kind, indexed ->> 'doc_relative_path', "
                "  (indexed ->> 'chunk_index')::bigint, coalesce(indexed ->> 'content', '') "
                "FROM root_filesystem_entries, to_tsquery('english', %(q)s) AS q "
                "WHERE (path = %(p)s OR (path >= %(p)s || '/' AND path < %(p)s || '0')) "
                f"  AND NOT is_dir AND {_TSV} @@ q "
                f"ORDER BY ts_rank({_TSV}, q) DESC, path LIMIT %(limit)s",
                {"q": query, "p": self.scope.prefix, "limit": candidates},
            ).fetchall()
        return [RankedRow(i, *row) for i, row in enumerate(rows, 1)]
