"""``RebornVersions`` on PostgreSQL: the version rows of a Reborn workspace, their
bodies' fields read by the server."""

from __future__ import annotations

from datetime import datetime

from memfs.db.interface import AsOf, VersionInfo
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.versions import RebornVersions
from memfs.db.scoped import Pool, fetch_all

_TABLE = "root_filesystem_entries"
_VERSION_ROW = "kind = 'memory_document_version'"
_UNDER = f"(path >= %(p)s || '/' AND path < %(p)s || '0') AND {_VERSION_ROW}"


class RebornVersionStore(RebornVersions):
    """``RebornVersions`` on PostgreSQL (the body's fields read by the server, so a
    listing carries no contents)."""

    def __init__(self, pool: Pool, scope: RebornScope) -> None:
        super().__init__(scope)
        self.pool = pool

    def _listed(self, below: str) -> list[VersionInfo]:
        rows = fetch_all(
            self.pool,
            "SELECT (indexed ->> 'version')::bigint, created_at, "
            "  convert_from(contents, 'UTF8')::jsonb ->> 'changed_by', "
            "  octet_length(convert_to(convert_from(contents, 'UTF8')::jsonb ->> 'content', "
            f"    'UTF8')) FROM {_TABLE} WHERE {_UNDER} ORDER BY 1",
            {"p": below},
        )
        return [VersionInfo(int(n), at, who, int(size or 0)) for n, at, who, size in rows]

    def _body(self, row: str) -> bytes | None:
        sql = f"SELECT contents FROM {_TABLE} WHERE path = %(p)s AND {_VERSION_ROW}"
        found = fetch_all(self.pool, sql, {"p": row}, binary=True)
        return bytes(found[0][0]) if found else None

    def _as_of(self, scope_prefix: str, at: datetime) -> AsOf:
        prefix = scope_prefix + "/"
        with self.pool.connection() as conn:
            born = conn.execute(
                f"SELECT path FROM {_TABLE} WHERE path >= %(p)s AND path < %(end)s "
                "AND kind = 'memory_document' AND created_at > %(at)s",
                {"p": prefix, "end": scope_prefix + "0", "at": at},
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
                {"p": prefix, "end": scope_prefix + "0", "at": at},
            ).fetchall()
        cut = len(prefix)
        return AsOf(
            frozenset(path[cut:] for (path,) in born),
            {doc[cut:]: VersionInfo(int(n), when, who, int(size or 0))
             for doc, n, when, who, size in kept},
        )  # fmt: skip
