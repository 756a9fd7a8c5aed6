"""What memfs keeps of a workspace beside IronClaw's PostgreSQL tables: deleted documents
with their versions (``memfs.deleted_documents``), every move (``memfs.path_history``) and
when documents were empty (``memfs.empty_spells``), for ``memfs undelete`` and ``.at/``.
The rows are written by the deleting, moving or filling transaction itself (a mount's, or
SQL's through memfs's trigger); this reads them."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from psycopg import sql

from memfs.db.capabilities import Deletion, EmptySpell, KeptDocument, Move, SaverCopy
from memfs.db.interface import PastVersion
from memfs.db.scoped import Pool, fetch_all

#: memfs's own kept history, table by table, and the column that dates each row: what
#: ``purge`` forgets once older than its cut, on every engine.  Deletions come first:
#: their count is the purge's answer.
AGED_BY = {
    "deleted_documents": "deleted_at",
    "path_history": "moved_at",
    "empty_spells": "filled_at",
    "saver_copies": "kept_at",
}

_DELETION = "id, path, created_at, updated_at, deleted_at, deleted_by, octet_length(content)"


def legacy_workspace(user_id: str, agent_id: object) -> str:
    """The key of a legacy workspace in memfs's tables (SQL: ``memfs.legacy_workspace``)."""
    return f"legacy/{user_id}/{agent_id or '-'}"


def past_versions(raw: Any) -> tuple[PastVersion, ...]:
    """The versions a kept document carries (a JSON array)."""
    items = json.loads(raw) if isinstance(raw, str | bytes) else raw or []
    return tuple(
        PastVersion(
            int(v["version"]), str(v.get("content") or ""), v.get("changed_by"),
            datetime.fromisoformat(str(v["created_at"])),
        )
        for v in sorted(items, key=lambda v: int(v["version"]))
    )  # fmt: skip


def _deletion(row: tuple[Any, ...]) -> Deletion:
    return Deletion(int(row[0]), row[1], row[2], row[3], row[4], row[5], int(row[6] or 0))


class KeptStore:
    """One workspace's kept deletions and moves on PostgreSQL."""

    def __init__(self, pool: Pool, workspace: str) -> None:
        self.pool = pool
        self.workspace = workspace

    def start(self) -> datetime:
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO memfs.history_start (workspace) VALUES (%s) ON CONFLICT DO NOTHING",
                (self.workspace,),
            )
            row = conn.execute(
                "SELECT started_at FROM memfs.history_start WHERE workspace = %s",
                (self.workspace,),
            ).fetchone()
        assert row is not None
        started: datetime = row[0]
        return started

    def deletions(self, path: str | None = None) -> list[Deletion]:
        rows = fetch_all(
            self.pool,
            f"SELECT {_DELETION} FROM memfs.deleted_documents WHERE workspace = %(w)s "
            "AND (%(p)s::text IS NULL OR path = %(p)s) ORDER BY deleted_at, id",
            {"w": self.workspace, "p": path},
        )
        return [_deletion(row) for row in rows]

    def kept_document(self, deletion_id: int) -> KeptDocument | None:
        with self.pool.connection() as conn:
            row = conn.execute(
                f"SELECT {_DELETION}, content, versions FROM memfs.deleted_documents "
                "WHERE workspace = %s AND id = %s",
                (self.workspace, deletion_id),
            ).fetchone()
        if row is None:
            return None
        return KeptDocument(_deletion(row[:7]), row[7], past_versions(row[8]))

    def forget(self, deletion_id: int) -> None:
        with self.pool.connection() as conn:
            conn.execute(
                "DELETE FROM memfs.deleted_documents WHERE workspace = %s AND id = %s",
                (self.workspace, deletion_id),
            )

    def moves(self, after: datetime) -> list[Move]:
        rows = fetch_all(
            self.pool,
            "SELECT old_path, new_path, folder, moved_at FROM memfs.path_history "
            "WHERE workspace = %s AND moved_at > %s ORDER BY moved_at, id",
            (self.workspace, after),
        )
        return [Move(*row) for row in rows]

    def empty_spells(self, at: datetime) -> list[EmptySpell]:
        rows = fetch_all(
            self.pool,
            "SELECT path, emptied_at, filled_at FROM memfs.empty_spells "
            "WHERE workspace = %s AND filled_at > %s AND emptied_at <= %s "
            "ORDER BY filled_at, id",
            (self.workspace, at, at),
        )
        return [EmptySpell(*row) for row in rows]

    def keep_saver_copy(self, path: str, data: bytes, reason: str) -> None:
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO memfs.saver_copies (workspace, path, reason, content) "
                "VALUES (%s, %s, %s, %s)",
                (self.workspace, path, reason, data),
            )

    def saver_copies(self, path: str) -> list[SaverCopy]:
        rows = fetch_all(
            self.pool,
            "SELECT id, path, kept_at, reason, octet_length(content) "
            "FROM memfs.saver_copies WHERE workspace = %s AND path = %s "
            "ORDER BY kept_at, id",
            (self.workspace, path),
        )
        return [SaverCopy(int(r[0]), r[1], r[2], r[3], int(r[4])) for r in rows]

    def saver_copy(self, copy_id: int) -> bytes | None:
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT content FROM memfs.saver_copies WHERE workspace = %s AND id = %s",
                (self.workspace, copy_id),
            ).fetchone()
        return bytes(row[0]) if row is not None else None

    def purge(self, before: datetime) -> int:
        with self.pool.connection() as conn, conn.transaction():
            counts = [
                conn.execute(
                    sql.SQL("DELETE FROM memfs.{} WHERE workspace = %s AND {} < %s").format(
                        sql.Identifier(table), sql.Identifier(column)
                    ),
                    (self.workspace, before),
                ).rowcount
                for table, column in AGED_BY.items()
            ]
        return counts[0]
