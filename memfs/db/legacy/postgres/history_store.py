"""Whole legacy documents with their past versions, for copying a workspace elsewhere
(``memfs migrate``).  Read-only: nothing here writes, and the command opens the source
with read-only connections, so the server itself refuses any write."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from memfs.db.interface import DocumentHistory, PastVersion
from memfs.db.scoped import SCOPE, ScopedStore, fetch_all, pages

#: Documents read per round trip (their versions come in one more).
BATCH = 200


class HistoryStore(ScopedStore):
    """A legacy workspace's documents, each with every version IronClaw kept."""

    def _has_versions(self) -> bool:
        with self.pool.connection() as conn:
            row = conn.execute("SELECT to_regclass('memory_document_versions')").fetchone()
        return row is not None and row[0] is not None

    def count(self) -> int:
        """Documents in the workspace (a duplicated path counted once)."""
        with self.pool.connection() as conn:
            row = conn.execute(
                f"SELECT count(DISTINCT path) FROM memory_documents WHERE {SCOPE}", self._params()
            ).fetchone()
        return int(row[0]) if row else 0

    def paths(self) -> list[str]:
        """Every document's path (a duplicated path once), without contents."""
        rows = fetch_all(
            self.pool, f"SELECT DISTINCT path FROM memory_documents WHERE {SCOPE}", self._params()
        )
        return [r[0] for r in rows]

    def histories(self, batch: int = BATCH) -> Iterator[DocumentHistory]:
        """Every document by path, newest row where a path is duplicated (the others are
        counted in ``duplicates``), with its versions in order."""
        with_versions = self._has_versions()
        for docs in pages(
            self.pool,
            "SELECT DISTINCT ON (path) id, path, content, metadata, created_at, "
            "  updated_at, count(*) OVER (PARTITION BY path) - 1 "
            f"FROM memory_documents WHERE {SCOPE} AND path > %(after)s "
            "ORDER BY path, updated_at DESC LIMIT %(batch)s",
            self._params(batch=batch),
            key=1,
        ):
            versions: dict[Any, list[PastVersion]] = {}
            if with_versions:
                for doc_id, number, content, changed_by, created_at in fetch_all(
                    self.pool,
                    "SELECT document_id, version, content, changed_by, created_at "
                    "FROM memory_document_versions WHERE document_id = ANY(%s) "
                    "ORDER BY document_id, version",
                    ([d[0] for d in docs],),
                ):
                    versions.setdefault(doc_id, []).append(
                        PastVersion(number, content, changed_by, created_at)
                    )
            for doc_id, path, content, metadata, created, updated, duplicates in docs:
                yield DocumentHistory(
                    path, content, metadata if isinstance(metadata, dict) else {},
                    created, updated, tuple(versions.get(doc_id, ())), int(duplicates),
                )  # fmt: skip
