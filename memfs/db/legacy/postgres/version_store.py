"""``LegacyVersions`` on PostgreSQL.  Writes of versions stay with the document store (a
save keeps the content it replaces); a restore is such a save."""

from __future__ import annotations

from datetime import datetime

from memfs.db.interface import VersionInfo
from memfs.db.legacy.versions import LegacyVersions
from memfs.db.scoped import DOC_SCOPE, Pool, Scope, ScopedStore, fetch_all


class LegacyVersionStore(ScopedStore, LegacyVersions):
    """``LegacyVersions`` on PostgreSQL."""

    def __init__(self, pool: Pool, scope: Scope, *, available: bool) -> None:
        ScopedStore.__init__(self, pool, scope)
        LegacyVersions.__init__(self, available=available)

    _DOCUMENT = (
        f"(SELECT d.id FROM memory_documents d WHERE {DOC_SCOPE} AND d.path = %(path)s "
        "ORDER BY d.updated_at DESC LIMIT 1)"
    )

    def _listed(self, path: str) -> list[VersionInfo]:
        rows = fetch_all(
            self.pool,
            "SELECT version, created_at, changed_by, octet_length(content) "
            f"FROM memory_document_versions WHERE document_id = {self._DOCUMENT} "
            "ORDER BY version",
            self._params(path=path),
        )
        return [VersionInfo(*row) for row in rows]

    def _content(self, path: str, number: int) -> bytes | None:
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT content FROM memory_document_versions "
                f"WHERE document_id = {self._DOCUMENT} AND version = %(number)s",
                self._params(path=path, number=number),
            ).fetchone()
        return str(row[0]).encode("utf-8") if row else None

    def _since(self, at: datetime) -> tuple[list[str], list[tuple[str, VersionInfo]]]:
        """One statement: each document born or changed after ``at``, with its first
        version kept after it."""
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
        born = [path for path, after, *_ in rows if after]
        kept = [(path, VersionInfo(number, created, who, size))
                for path, _, number, created, who, size in rows if number is not None]  # fmt: skip
        return born, kept
