"""The search legs' queries: IronClaw's full-text and vector searches over chunks."""

from __future__ import annotations

from collections.abc import Sequence

from pgvector import Vector

from memfs.db.capabilities import ChunkHit
from memfs.db.scoped import SCOPES, ScopedStore, fetch_all


class SearchStore(ScopedStore):
    """Chunks ranked for a query, in this scope or several scopes searched together."""

    def search_fts(
        self, query: str, limit: int, users: Sequence[str] | None = None
    ) -> list[ChunkHit]:
        """IronClaw's full-text leg: ``plainto_tsquery('english')`` ranked by ``ts_rank_cd``.

        ``users`` are the scopes searched together (IronClaw's ``user_id = ANY(...)``;
        default: this store's).  Ties are ordered by path and chunk index (IronClaw leaves
        them unordered).
        """
        rows = fetch_all(
            self.pool,
            "SELECT c.id, c.document_id, d.path, c.chunk_index, c.content, d.user_id "
            "FROM memory_chunks c JOIN memory_documents d ON d.id = c.document_id, "
            "  plainto_tsquery('english', %(q)s) AS q "
            f"WHERE {SCOPES} "
            "  AND c.content_tsv @@ q "
            "ORDER BY ts_rank_cd(c.content_tsv, q) DESC, d.path, c.chunk_index "
            "LIMIT %(limit)s",
            self._params(q=query, limit=limit, users=self._users(users)),
        )
        return [ChunkHit(*row) for row in rows]

    def search_vector(
        self, embedding: Vector, limit: int, users: Sequence[str] | None = None
    ) -> list[ChunkHit]:
        """IronClaw's vector leg: exact cosine distance over chunks that have an embedding.

        Only embeddings of the query's dimension are compared, so one foreign-dimension
        chunk cannot make the whole search fail as it does in IronClaw.
        """
        rows = fetch_all(
            self.pool,
            "SELECT c.id, c.document_id, d.path, c.chunk_index, c.content, d.user_id "
            "FROM memory_chunks c JOIN memory_documents d ON d.id = c.document_id "
            f"WHERE {SCOPES} "
            "  AND c.embedding IS NOT NULL AND vector_dims(c.embedding) = %(dims)s "
            "ORDER BY c.embedding <=> %(vec)s, d.path, c.chunk_index "
            "LIMIT %(limit)s",
            self._params(
                vec=embedding,
                dims=len(embedding.to_list()),
                limit=limit,
                users=self._users(users),
            ),
        )
        return [ChunkHit(*row) for row in rows]

    def _users(self, users: Sequence[str] | None) -> list[str]:
        return list(users) if users else [self.scope.user_id]
