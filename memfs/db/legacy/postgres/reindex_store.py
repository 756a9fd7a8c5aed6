"""The reindex queue: documents whose chunks a save left for the background worker (or
whose indexing rules a move may have changed), re-chunked as IronClaw's write would."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from memfs.db.capabilities import ReindexBatch
from memfs.db.legacy.postgres.chunks import CHUNK_LOCK, chunks_for, replace_chunks
from memfs.db.scoped import (
    FOLDER_JOIN,
    QUEUED,
    SCOPE,
    Pool,
    Scope,
    ScopedStore,
    count,
    folder_config_paths,
)
from memfs.ironclaw.chunker import DEFAULT_CONFIG, ChunkConfig
from memfs.ironclaw.write_rules import effective_metadata


class ReindexStore(ScopedStore):
    """Re-chunking of one workspace's documents."""

    def __init__(self, pool: Pool, scope: Scope, chunk_config: ChunkConfig = DEFAULT_CONFIG):
        super().__init__(pool, scope)
        self.chunk_config = chunk_config

    def reindex_queued(self, limit: int = 64) -> ReindexBatch:
        """Re-chunk up to ``limit`` queued documents of this scope.

        The content is read without locking the rows and chunked outside any transaction,
        so re-chunking a 50 MB document never keeps a save waiting for its row lock.  The
        chunks are then written in one transaction that first takes each document's chunk
        lock (skipping documents another mount is re-chunking) and checks that the content
        is still what was chunked; a document changed meanwhile keeps its queue entry, as
        does one queued again since it was read (its ``queued_at`` moved on).
        """
        with self.pool.connection() as conn:
            with conn.pipeline():
                rows = conn.execute(
                    f"SELECT d.id, d.path, d.content, d.metadata, q.queued_at, md5(d.content) "
                    f"{QUEUED} "
                    "ORDER BY q.queued_at, d.id LIMIT %(limit)s",
                    self._params(limit=limit),
                ).fetchall()
            if not rows:
                return ReindexBatch([], 0)
            configs = sorted({c for r in rows for c in folder_config_paths(r[1])})
            folders: dict[str, Any] = dict(
                conn.execute(
                    f"SELECT path, metadata FROM memory_documents WHERE {SCOPE} "
                    "AND path = ANY(%(configs)s) ORDER BY updated_at",
                    self._params(configs=configs),
                ).fetchall()
            )
            chunks_by_doc: dict[UUID, list[str]] = {}
            digests: dict[UUID, str] = {}
            stamps: dict[UUID, datetime] = {}
            while rows:  # consumed as chunked, so only one document's text is held twice
                doc_id, path, content, own, queued_at, digest = rows.pop()
                nearest = next(
                    (folders[c] for c in folder_config_paths(path) if c in folders), None
                )
                meta = effective_metadata(own, nearest)
                chunks_by_doc[doc_id] = chunks_for(self.chunk_config, path, content, meta)
                digests[doc_id] = digest
                stamps[doc_id] = queued_at
                del content
            with conn.pipeline(), conn.transaction():
                current = conn.execute(
                    # KEY SHARE: no delete between this check and the chunk inserts (saves
                    # take NO KEY UPDATE, which does not conflict); a row being deleted is
                    # skipped, its queue entry goes with it.
                    "SELECT id, md5(content) FROM memory_documents "
                    "WHERE id = ANY(%s) AND pg_try_advisory_xact_lock(" + CHUNK_LOCK + ") "
                    "FOR KEY SHARE SKIP LOCKED",
                    (list(chunks_by_doc),),
                ).fetchall()
                done = [doc_id for doc_id, digest in current if digests.get(doc_id) == digest]
                replace_chunks(conn, {d: chunks_by_doc[d] for d in done})
                conn.execute(
                    "DELETE FROM memfs.reindex_queue q USING unnest(%s::uuid[], "
                    "%s::timestamptz[]) AS r(id, at) WHERE q.document_id = r.id "
                    "AND q.queued_at = r.at",
                    (done, [stamps[d] for d in done]),
                )
                left = conn.execute(f"SELECT count(*) {QUEUED}", self._params())
            return ReindexBatch(done, count(left))

    def reindex_document(self, doc_id: UUID) -> int:
        """Re-chunk one document now, as a write would (honouring ``skip_indexing``);
        returns its number of chunks."""
        with self.pool.connection() as conn, conn.transaction():
            found = conn.execute(
                f"SELECT path FROM memory_documents WHERE id = %(id)s AND {SCOPE}",
                self._params(id=doc_id),
            ).fetchone()
            if found is None:
                return 0
            path = found[0]
            row = conn.execute(
                "SELECT d.content, d.metadata, f.metadata "
                f"FROM memory_documents d {FOLDER_JOIN} WHERE d.id = %(id)s "
                "FOR NO KEY UPDATE OF d",
                self._params(id=doc_id, configs=folder_config_paths(path)),
            ).fetchone()
            if row is None:
                return 0
            content, own, folder = row
            chunks = chunks_for(self.chunk_config, path, content, effective_metadata(own, folder))
            replace_chunks(conn, {doc_id: chunks})
            conn.execute("DELETE FROM memfs.reindex_queue WHERE document_id = %s", (doc_id,))
            return len(chunks)

    def queued_for_reindex(self) -> int:
        """Documents of this scope waiting in the reindex queue."""
        with self.pool.connection() as conn:
            return count(conn.execute(f"SELECT count(*) {QUEUED}", self._params()))

    def drop_orphaned_reindex_entries(self) -> int:
        """Forget queue entries whose document is gone (deleted by IronClaw, say)."""
        with self.pool.connection() as conn:
            cur = conn.execute(
                "DELETE FROM memfs.reindex_queue q WHERE NOT EXISTS "
                "(SELECT 1 FROM memory_documents d WHERE d.id = q.document_id)"
            )
            return cur.rowcount
