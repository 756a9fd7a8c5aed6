"""Chunk rows: what IronClaw would store for a document, and writing them.

Shared by saves that index at once and the reindex worker.  Writers of one document's
chunks exclude each other with an advisory lock of their own, not the document's row lock.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from uuid import UUID

from memfs.db.scoped import Conn
from memfs.ironclaw.chunker import ChunkConfig, chunk_document
from memfs.ironclaw.write_rules import DocumentMetadata, is_engine_runtime_path

#: The advisory lock key of a document's chunks (``id`` is the document id column).
CHUNK_LOCK = "hashtextextended('memfs-chunks ' || id::text, 0)"


def lock_chunks(conn: Conn, doc_ids: Sequence[UUID]) -> None:
    """Wait for the right to rewrite these documents' chunks (held to transaction end)."""
    conn.execute(
        f"SELECT pg_advisory_xact_lock({CHUNK_LOCK}) FROM unnest(%s::uuid[]) AS id ORDER BY id",
        (list(doc_ids),),
    )


def chunks_for(config: ChunkConfig, path: str, content: str, meta: DocumentMetadata) -> list[str]:
    """The chunks IronClaw would store: none under effective ``skip_indexing`` or at an
    engine runtime path."""
    if not meta.indexed or is_engine_runtime_path(path):
        return []
    return chunk_document(content, config)


def replace_chunks(
    conn: Conn, chunks_by_doc: dict[UUID, list[str]], *, fresh: bool = False
) -> None:
    """Make each document's chunks exactly its list, at indexes 0..n-1.

    Writers of one document's chunks exclude each other with an advisory lock of their
    own (``lock_chunks``), not the document's row lock, so the reindex worker never
    holds up a save.  The end state is IronClaw's (delete all,
    insert 0..n-1) row for row in (document_id, chunk_index, content); only chunks whose
    text changed are rewritten, so an append to a long document touches its last chunks
    instead of re-generating every tsvector, and unchanged chunks keep their embedding.
    A changed chunk's embedding is cleared (NULL, for the embedding backfill).  Whatever
    the number of documents, this is one query and up to three pipelined batches.
    """
    lock_chunks(conn, list(chunks_by_doc))
    existing = {} if fresh else _stored_digests(conn, list(chunks_by_doc))
    count: dict[UUID, int] = {}  # chunks each document has now
    for doc_id, index in existing:
        count[doc_id] = max(count.get(doc_id, 0), index + 1)
    stale: list[tuple[UUID, int]] = []
    changed: list[tuple[str, UUID, int]] = []
    added: list[tuple[UUID, int, str]] = []
    for doc_id, chunks in chunks_by_doc.items():
        if count.get(doc_id, 0) > len(chunks):
            stale.append((doc_id, len(chunks)))
        for i, text in enumerate(chunks):
            digest = existing.get((doc_id, i))
            if digest is None:
                added.append((doc_id, i, text))
            elif digest != hashlib.md5(text.encode()).hexdigest():
                changed.append((text, doc_id, i))
    _write_chunk_changes(conn, stale, changed, added)


def _stored_digests(conn: Conn, doc_ids: list[UUID]) -> dict[tuple[UUID, int], str]:
    """The MD5 of each stored chunk of ``doc_ids``, by (document, index)."""
    return {
        (doc_id, index): digest
        for doc_id, index, digest in conn.execute(
            "SELECT document_id, chunk_index, md5(content) FROM memory_chunks "
            "WHERE document_id = ANY(%s)",
            (doc_ids,),
        ).fetchall()
    }


def _write_chunk_changes(
    conn: Conn,
    stale: list[tuple[UUID, int]],
    changed: list[tuple[str, UUID, int]],
    added: list[tuple[UUID, int, str]],
) -> None:
    """Up to three pipelined batches: chunks past the new end, changed texts, new ones."""
    with conn.cursor() as cur:
        if stale:
            cur.executemany(
                "DELETE FROM memory_chunks WHERE document_id = %s AND chunk_index >= %s",
                stale,
            )
        if changed:
            cur.executemany(
                "UPDATE memory_chunks SET content = %s, embedding = NULL "
                "WHERE document_id = %s AND chunk_index = %s",
                changed,
            )
        if added:
            cur.executemany(
                "INSERT INTO memory_chunks (document_id, chunk_index, content) VALUES (%s, %s, %s)",
                added,
            )
