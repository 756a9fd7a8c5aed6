"""Reads of the workspace commands (``memfs status``, ``log``, ``export``, ``reindex``) and
of ``memfs sync``: whole documents by path, every row at once.  Their writes go through
the document store, as a mount's do."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from memfs.db.interface import ExportRow, StoredDocument
from memfs.db.scoped import ATTRS_JOIN, DOC_SCOPE, SCOPE, ScopedStore, fetch_all

__all__ = ["ExportRow", "StoredDocument", "WholeDocumentStore"]


class WholeDocumentStore(ScopedStore):
    """Whole-document reads of one workspace."""

    def find_document(self, path: str) -> StoredDocument | None:
        """The document at ``path``, newest if duplicated."""
        with self.pool.connection() as conn:
            row = conn.execute(
                f"SELECT id, content, updated_at FROM memory_documents WHERE {SCOPE} "
                "AND path = %(path)s ORDER BY updated_at DESC LIMIT 1",
                self._params(path=path),
            ).fetchone()
        return StoredDocument(row[0], row[1], row[2]) if row else None

    def export_rows(self) -> list[ExportRow]:
        """Every document with its content, by path (a duplicated path: newest first)."""
        rows = fetch_all(
            self.pool,
            "SELECT d.path, d.content, d.updated_at, a.mtime_ns, d.id "
            f"FROM memory_documents d {ATTRS_JOIN} "
            f"WHERE {DOC_SCOPE} "
            "ORDER BY d.path, d.updated_at DESC",
            self._params(),
        )
        return [ExportRow(*row) for row in rows]

    def document_ids(self, paths: Sequence[str] | None = None) -> list[tuple[UUID, str]]:
        """(id, path) of every document, or of those at ``paths``, by path."""
        only = "AND path = ANY(%(paths)s) " if paths is not None else ""
        rows = fetch_all(
            self.pool,
            f"SELECT id, path FROM memory_documents WHERE {SCOPE} {only}ORDER BY path",
            self._params(paths=list(paths or [])),
        )
        return [(r[0], r[1]) for r in rows]

    def count_documents(self) -> int:
        with self.pool.connection() as conn:
            row = conn.execute(
                f"SELECT count(*) FROM memory_documents WHERE {SCOPE}", self._params()
            ).fetchone()
        return int(row[0]) if row else 0
