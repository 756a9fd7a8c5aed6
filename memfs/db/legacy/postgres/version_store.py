"""The versions IronClaw (v0.25 to v1.0) keeps in ``memory_document_versions``, read for
``.versions/`` and ``memfs versions``.  Writes of versions stay with the document store
(a save keeps the content it replaces); a restore is such a save."""

from __future__ import annotations

from datetime import datetime

from memfs.db.interface import AsOf, VersionInfo
from memfs.db.scoped import DOC_SCOPE, Pool, Scope, ScopedStore, fetch_all


class LegacyVersionStore(ScopedStore):
    """A legacy workspace's versions, by document path (the newest row of a duplicated
    path, as everywhere)."""

    def __init__(self, pool: Pool, scope: Scope, *, available: bool) -> None:
        super().__init__(pool, scope)
        self.available = available

    _DOCUMENT = (
        f"(SELECT d.id FROM memory_documents d WHERE {DOC_SCOPE} AND d.path = %(path)s "
        "ORDER BY d.updated_at DESC LIMIT 1)"
    )

    def versions(self, path: str) -> list[VersionInfo]:
        if not self.available:
            return []
        rows = fetch_all(
            self.pool,
            "SELECT version, created_at, changed_by, octet_length(content) "
            f"FROM memory_document_versions WHERE document_id = {self._DOCUMENT} "
            "ORDER BY version",
            self._params(path=path),
        )
        return [VersionInfo(*row) for row in rows]

    def version_content(self, path: str, number: int) -> bytes | None:
        if not self.available:
            return None
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT content FROM memory_document_versions "
                f"WHERE document_id = {self._DOCUMENT} AND version = %(number)s",
                self._params(path=path, number=number),
            ).fetchone()
        return str(row[0]).encode("utf-8") if row else None

    def as_of(self, at: datetime) -> AsOf:
        with self.pool.connection() as conn:
            if not self.available:
                rows = conn.execute(
                    f"SELECT d.path, true, NULL, NULL, NULL, NULL FROM memory_documents d "
                    f"WHERE {DOC_SCOPE} AND d.created_at > %(at)s",
                    self._params(at=at),
                ).fetchall()
            else:
                rows = conn.execute(
                    "SELECT d.path, d.created_at > %(at)s, v.version, v.created_at, "
                    "  v.changed_by, octet_length(v.content) FROM memory_documents d "
                    "LEFT JOIN LATERAL (SELECT version, created_at, changed_by, content "
                    "  FROM memory_document_versions WHERE document_id = d.id "
                    "  AND created_at > %(at)s ORDER BY version LIMIT 1) v ON true "
                    f"WHERE {DOC_SCOPE} AND (d.created_at > %(at)s OR d.updated_at > %(at)s)",
                    self._params(at=at),
                ).fetchall()
        born = frozenset(path for path, after, *_ in rows if after)
        earliest = {
            path: VersionInfo(number, created, who, size)
            for path, _, number, created, who, size in rows
            if number is not None
        }
        return AsOf(born, earliest)
