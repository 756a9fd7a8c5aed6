"""The versions of a Reborn workspace's documents: ``R.versions/<n>`` rows whose body is
IronClaw's JSON (``changed_by``, ``content``, ``content_hash``), read for ``.versions/``
and ``memfs versions``."""

from __future__ import annotations

import json
from datetime import datetime

from memfs.db.interface import AsOf, VersionInfo
from memfs.db.reborn.layout import RebornScope
from memfs.db.scoped import Pool, fetch_all

_TABLE = "root_filesystem_entries"
_UNDER = "(path >= %(p)s || '/' AND path < %(p)s || '0') AND kind = 'memory_document_version'"


class RebornVersionStore:
    """One Reborn scope's version sidecars, by document path."""

    available = True

    def __init__(self, pool: Pool, scope: RebornScope) -> None:
        self.pool = pool
        self.scope = scope

    def versions(self, path: str) -> list[VersionInfo]:
        rows = fetch_all(
            self.pool,
            "SELECT (indexed ->> 'version')::bigint, created_at, "
            "  convert_from(contents, 'UTF8')::jsonb ->> 'changed_by', "
            "  octet_length(convert_to(convert_from(contents, 'UTF8')::jsonb ->> 'content', "
            f"    'UTF8')) FROM {_TABLE} WHERE {_UNDER} ORDER BY 1",
            {"p": self.scope.row(path) + ".versions"},
        )
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

    def as_of(self, at: datetime) -> AsOf:
        prefix = self.scope.prefix + "/"
        with self.pool.connection() as conn:
            born = conn.execute(
                f"SELECT path FROM {_TABLE} WHERE path >= %(p)s AND path < %(end)s "
                "AND kind = 'memory_document' AND created_at > %(at)s",
                {"p": prefix, "end": self.scope.prefix + "0", "at": at},
            ).fetchall()
            kept = conn.execute(
                "SELECT DISTINCT ON (doc) doc, number, created_at, who, size FROM ("
                "  SELECT left(path, length(path) - strpos(reverse(path), '/') - 9) AS doc, "
                "    (indexed ->> 'version')::bigint AS number, created_at, "
                "    convert_from(contents, 'UTF8')::jsonb ->> 'changed_by' AS who, "
                "    octet_length(convert_to(convert_from(contents, 'UTF8')::jsonb "
                "      ->> 'content', 'UTF8')) AS size "
                f"  FROM {_TABLE} WHERE path >= %(p)s AND path < %(end)s "
                "  AND kind = 'memory_document_version' AND created_at > %(at)s) AS v "
                "ORDER BY doc, number",
                {"p": prefix, "end": self.scope.prefix + "0", "at": at},
            ).fetchall()
        cut = len(prefix)
        return AsOf(
            frozenset(path[cut:] for (path,) in born),
            {doc[cut:]: VersionInfo(int(n), when, who, int(size or 0))
             for doc, n, when, who, size in kept},
        )  # fmt: skip
