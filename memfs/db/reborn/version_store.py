"""The versions of a Reborn workspace's documents: ``R.versions/<n>`` rows whose body is
IronClaw's JSON (``changed_by``, ``content``, ``content_hash``), read for ``.versions/``
and ``memfs versions``."""

from __future__ import annotations

import json

from memfs.db.interface import VersionInfo
from memfs.db.reborn.layout import RebornScope
from memfs.db.scoped import Pool

_TABLE = "root_filesystem_entries"
_UNDER = "(path >= %(p)s || '/' AND path < %(p)s || '0') AND kind = 'memory_document_version'"


class RebornVersionStore:
    """One Reborn scope's version sidecars, by document path."""

    available = True

    def __init__(self, pool: Pool, scope: RebornScope) -> None:
        self.pool = pool
        self.scope = scope

    def versions(self, path: str) -> list[VersionInfo]:
        with self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT (indexed ->> 'version')::bigint, created_at, "
                "  convert_from(contents, 'UTF8')::jsonb ->> 'changed_by', "
                "  octet_length(convert_to(convert_from(contents, 'UTF8')::jsonb ->> 'content', "
                f"    'UTF8')) FROM {_TABLE} WHERE {_UNDER} ORDER BY 1",
                {"p": self.scope.row(path) + ".versions"},
            ).fetchall()
        return [VersionInfo(int(n), at, who, int(size or 0)) for n, at, who, size in rows]

    def version_content(self, path: str, number: int) -> bytes | None:
        with self.pool.connection() as conn:
            row = conn.execute(
                f"SELECT contents FROM {_TABLE} WHERE path = %(p)s "
                "AND kind = 'memory_document_version'",
                {"p": f"{self.scope.row(path)}.versions/{number}"},
                binary=True,
            ).fetchone()
        if row is None:
            return None
        content = json.loads(bytes(row[0])).get("content")
        return content.encode("utf-8") if isinstance(content, str) else None
