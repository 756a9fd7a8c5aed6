"""The versions IronClaw (v0.25 to v1.0) keeps in ``memory_document_versions``, read for
``.versions/`` and ``memfs versions``: by document path (the newest row of a duplicated
path, as everywhere), and only where IronClaw made the table (an older database has no
versions: none are listed, none read).  Written once for both databases of the legacy
layout; each store (``postgres.version_store``, ``libsql.stores``) says how it reads."""

from __future__ import annotations

from datetime import datetime

from memfs.db.interface import AsOf, VersionInfo


class LegacyVersions:
    """One legacy workspace's versions, by document path."""

    def __init__(self, *, available: bool) -> None:
        #: Whether IronClaw made ``memory_document_versions`` here.
        self.available = available

    def versions(self, path: str) -> list[VersionInfo]:
        return self._listed(path) if self.available else []

    def version_content(self, path: str, number: int) -> bytes | None:
        return self._content(path, number) if self.available else None

    def as_of(self, at: datetime) -> AsOf:
        """Documents born after ``at``, and each changed one's first version kept after
        it (none where the table is not)."""
        born, kept = self._since(at)
        earliest: dict[str, VersionInfo] = {}
        for path, info in kept:
            earliest.setdefault(path, info)
        return AsOf(frozenset(born), earliest)

    # -- each database's reads ----------------------------------------------------------

    def _listed(self, path: str) -> list[VersionInfo]:
        """The document's versions, oldest first."""
        raise NotImplementedError

    def _content(self, path: str, number: int) -> bytes | None:
        raise NotImplementedError

    def _since(self, at: datetime) -> tuple[list[str], list[tuple[str, VersionInfo]]]:
        """Paths born after ``at``, and (path, version) kept after it, each path's
        versions oldest first (none asked for where the table is not)."""
        raise NotImplementedError
