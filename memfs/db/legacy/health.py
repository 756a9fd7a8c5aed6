"""What ``memfs doctor`` reads and mends in a legacy workspace (``memory_documents``)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from memfs.db.health import BATCH, Duplicate, invalid_indexes, rebuild_index
from memfs.db.legacy.postgres.chunks import chunks_for
from memfs.db.scoped import (
    DOC_SCOPE,
    SCOPE,
    Pool,
    Scope,
    ScopedStore,
    folder_config_paths,
    pages,
)
from memfs.ironclaw.chunker import DEFAULT_CONFIG, ChunkConfig
from memfs.ironclaw.write_rules import effective_metadata


def stale_documents(
    rows: Iterable[tuple[str, str, Any, list[str] | None, list[int] | None]],
    folders: Mapping[str, Any],
    config: ChunkConfig,
) -> Iterator[str]:
    """The paths among ``rows`` (path, content, own metadata, stored chunk texts and their
    indexes in order) whose chunks are not what IronClaw's chunker makes of the content
    under its effective metadata (``folders``: each ``.config`` path's metadata), rows
    0..n-1.  The rule every legacy engine's doctor applies to its rows."""
    for path, content, own, stored, indexes in rows:
        nearest = next((folders[c] for c in folder_config_paths(path) if c in folders), None)
        expected = chunks_for(config, path, content, effective_metadata(own, nearest))
        if (stored or []) != expected or (indexes or []) != list(range(len(expected))):
            yield path


class LegacyHealth(ScopedStore):
    """Checks of one legacy workspace."""

    def __init__(
        self, pool: Pool, scope: Scope, *, has_sidecars: bool,
        chunk_config: ChunkConfig = DEFAULT_CONFIG,
    ) -> None:  # fmt: skip
        super().__init__(pool, scope)
        #: Whether memfs's own schema (attributes, reindex queue) exists to be checked.
        self.has_sidecars = has_sidecars
        self.chunk_config = chunk_config

    def duplicate_paths(self) -> list[Duplicate]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT path, array_agg(id ORDER BY updated_at DESC, id) FROM memory_documents "
                f"WHERE {SCOPE} GROUP BY path HAVING count(*) > 1 ORDER BY path",
                self._params(),
            ).fetchall()
        return [Duplicate(path, ids[0], list(ids[1:])) for path, ids in rows]

    def separate_duplicates(self) -> list[str]:
        """Give each older row of a duplicated path a name of its own
        (``notes.duplicate-1a2b3c4d.md``): every row stays, and IronClaw shows each."""
        renamed = []
        with self.pool.connection() as conn, conn.transaction():
            for duplicate in self.duplicate_paths():
                stem, dot, ext = duplicate.path.rpartition(".")
                for doc_id in duplicate.older:
                    tag = f"duplicate-{doc_id.hex[:8]}"
                    new = f"{stem}.{tag}.{ext}" if dot and "/" not in ext else f"{ext}.{tag}"
                    conn.execute(
                        f"UPDATE memory_documents SET path = %(new)s WHERE id = %(id)s AND {SCOPE}",
                        self._params(new=new, id=doc_id),
                    )
                    renamed.append(new)
        return renamed

    def stale_chunks(self) -> list[str]:
        """Paths whose chunk rows are not what IronClaw's chunker makes of the content
        under its effective metadata (``skip_indexing``: none), rows 0..n-1."""
        with self.pool.connection() as conn:
            folders: dict[str, Any] = dict(
                conn.execute(
                    "SELECT path, metadata FROM memory_documents "
                    f"WHERE {SCOPE} AND (path = '.config' OR path LIKE '%%/.config') "
                    "ORDER BY updated_at",
                    self._params(),
                ).fetchall()
            )
        return [path for path in self._compare(folders)]

    def _compare(self, folders: dict[str, Any]) -> Iterator[str]:
        for rows in pages(
            self.pool,
            "SELECT d.path, d.content, d.metadata, "
            "  (SELECT array_agg(c.content ORDER BY c.chunk_index) "
            "     FROM memory_chunks c WHERE c.document_id = d.id), "
            "  (SELECT array_agg(c.chunk_index ORDER BY c.chunk_index) "
            "     FROM memory_chunks c WHERE c.document_id = d.id) "
            f"FROM memory_documents d WHERE {DOC_SCOPE} AND d.path > %(after)s "
            "ORDER BY d.path LIMIT %(limit)s",
            self._params(limit=BATCH),
            key=0,
        ):
            yield from stale_documents(rows, folders, self.chunk_config)

    def orphans(self) -> dict[str, int]:
        """memfs's rows about documents that are gone (attributes, queue entries)."""
        if not self.has_sidecars:
            return {}
        with self.pool.connection() as conn:
            attrs = conn.execute(
                "SELECT count(*) FROM memfs.file_attrs a WHERE NOT EXISTS "
                "(SELECT 1 FROM memory_documents d WHERE d.id = a.document_id)"
            ).fetchone()
            queued = conn.execute(
                "SELECT count(*) FROM memfs.reindex_queue q WHERE NOT EXISTS "
                "(SELECT 1 FROM memory_documents d WHERE d.id = q.document_id)"
            ).fetchone()
        return {"file_attrs": int(attrs[0]) if attrs else 0,
                "reindex_queue": int(queued[0]) if queued else 0}  # fmt: skip

    def drop_orphans(self) -> dict[str, int]:
        if not self.has_sidecars:
            return {}
        with self.pool.connection() as conn, conn.transaction():
            attrs = conn.execute(
                "DELETE FROM memfs.file_attrs a WHERE NOT EXISTS "
                "(SELECT 1 FROM memory_documents d WHERE d.id = a.document_id)"
            ).rowcount
            queued = conn.execute(
                "DELETE FROM memfs.reindex_queue q WHERE NOT EXISTS "
                "(SELECT 1 FROM memory_documents d WHERE d.id = q.document_id)"
            ).rowcount
        return {"file_attrs": attrs, "reindex_queue": queued}

    def invalid_indexes(self) -> list[str]:
        return invalid_indexes(self.pool, ["memory_documents", "memory_chunks",
                                           "memory_document_versions"])  # fmt: skip

    def rebuild_index(self, name: str) -> None:
        rebuild_index(self.pool, name)
