"""The version sidecars of a Reborn workspace's documents, for ``.versions/`` and
``memfs versions``: ``R.versions/<n>`` rows whose body is IronClaw's JSON
(``changed_by``, ``content``, ``content_hash``).  Where the rows are and what a body holds
is written here once; each database's store (``postgres.version_store``,
``libsql.stores``) says only how it reads them."""

from __future__ import annotations

import json
from datetime import datetime

from memfs.db.interface import AsOf, VersionInfo
from memfs.db.reborn.layout import RebornScope


def _parsed(body: bytes | None) -> dict[str, object] | None:
    if body is None:
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def version_text(body: bytes | None) -> bytes | None:
    """The content a version row's body keeps, as UTF-8 (None: no row, or a body that
    is not IronClaw's JSON)."""
    content = (_parsed(body) or {}).get("content")
    return content.encode("utf-8") if isinstance(content, str) else None


def version_info(number: int, created: datetime, body: bytes) -> VersionInfo | None:
    """A version row as ``VersionInfo``: who changed it and its content's size, from
    the body (None: the body is not IronClaw's JSON)."""
    parsed = _parsed(body)
    if parsed is None:
        return None
    content, who = parsed.get("content"), parsed.get("changed_by")
    size = len(content.encode("utf-8")) if isinstance(content, str) else 0
    return VersionInfo(number, created, who if isinstance(who, str) else None, size)


class RebornVersions:
    """One Reborn scope's versions, by document path."""

    available = True

    def __init__(self, scope: RebornScope) -> None:
        self.scope = scope

    def versions(self, path: str) -> list[VersionInfo]:
        return self._listed(self.scope.row(path) + ".versions")

    def version_content(self, path: str, number: int) -> bytes | None:
        return version_text(self._body(f"{self.scope.row(path)}.versions/{number}"))

    def as_of(self, at: datetime) -> AsOf:
        """Documents born after ``at``, and each changed one's first version kept after
        it (paths relative to the scope)."""
        return self._as_of(self.scope.prefix, at)

    # -- each database's reads ----------------------------------------------------------

    def _listed(self, below: str) -> list[VersionInfo]:
        """The version rows below ``below`` (a document's ``.versions``), oldest first."""
        raise NotImplementedError

    def _body(self, row: str) -> bytes | None:
        """The body of version row ``row`` (None: there is none)."""
        raise NotImplementedError

    def _as_of(self, prefix: str, at: datetime) -> AsOf:
        raise NotImplementedError
