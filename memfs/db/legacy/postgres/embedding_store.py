"""The embedding worker's queries: chunks still without a vector, and writing vectors."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from pgvector import Vector

from memfs.db.capabilities import MissingPage
from memfs.db.scoped import DOC_SCOPE, ScopedStore, fetch_all


class EmbeddingStore(ScopedStore):
    """Chunk embeddings of one workspace."""

    def chunks_missing_embeddings(self, page: MissingPage) -> list[tuple[UUID, str]]:
        """(chunk id, text) of chunks of the workspace (or of some documents) still without
        an embedding."""
        document_ids, limit, max_bytes, exclude = page
        only = "AND c.document_id = ANY(%(docs)s) " if document_ids is not None else ""
        if exclude:
            only += "AND NOT (c.id = ANY(%(exclude)s)) "
        rows = fetch_all(
            self.pool,
            "SELECT c.id, c.content FROM memory_chunks c "
            "JOIN memory_documents d ON d.id = c.document_id "
            f"WHERE {DOC_SCOPE} "
            f"  AND c.embedding IS NULL AND octet_length(c.content) <= %(max)s {only}"
            "ORDER BY c.document_id, c.chunk_index LIMIT %(limit)s",
            self._params(
                docs=list(document_ids or []),
                limit=limit,
                max=max_bytes,
                exclude=list(exclude),
            ),
        )
        return [(r[0], r[1]) for r in rows]

    def write_embeddings(self, items: Sequence[tuple[UUID, str, Vector]]) -> int:
        """Store embeddings for chunks that still exist with the text that was embedded."""
        if not items:
            return 0
        written = 0
        with self.pool.connection() as conn, conn.transaction():
            for chunk_id, text, vector in items:
                cur = conn.execute(
                    "UPDATE memory_chunks c SET embedding = %(vec)s FROM memory_documents d "
                    "WHERE c.id = %(id)s AND c.embedding IS NULL AND c.content = %(text)s "
                    f"  AND d.id = c.document_id AND {DOC_SCOPE}",
                    self._params(vec=vector, id=chunk_id, text=text),
                )
                written += cur.rowcount
        return written

    def embedding_dimensions(self) -> list[int]:
        """The embedding dimensions already present in the workspace."""
        rows = fetch_all(
            self.pool,
            "SELECT DISTINCT vector_dims(c.embedding) FROM memory_chunks c "
            "JOIN memory_documents d ON d.id = c.document_id "
            f"WHERE {DOC_SCOPE} "
            "  AND c.embedding IS NOT NULL ORDER BY 1",
            self._params(),
        )
        return [int(r[0]) for r in rows]

    def count_chunks(self) -> tuple[int, int]:
        """(chunks, chunks without an embedding) of the workspace."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE c.embedding IS NULL) "
                "FROM memory_chunks c JOIN memory_documents d ON d.id = c.document_id "
                f"WHERE {DOC_SCOPE}",
                self._params(),
            ).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)
