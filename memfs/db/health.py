"""What ``memfs doctor`` asks of a workspace (``WorkspaceHealth``, both layouts answer
it), and the index checks every PostgreSQL engine shares.

Each layout's answer reads unless a method's name says it changes something
(``separate_duplicates``, ``drop_orphans``, ``rebuild_index``); ``memfs doctor`` calls
those only with ``--repair``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol
from uuid import UUID

from psycopg import sql

from memfs.db.scoped import Pool

#: Documents read per round trip while their chunks are compared.
BATCH = 500


@dataclass(frozen=True)
class Duplicate:
    """Several rows at one path (IronClaw's unique index does not hold while agent_id is
    NULL): the newest is the document, the others are hidden from IronClaw's reads."""

    path: str
    newest: UUID
    older: list[UUID]


class WorkspaceHealth(Protocol):
    """What ``memfs doctor`` asks of a layout."""

    def duplicate_paths(self) -> list[Duplicate]: ...

    def separate_duplicates(self) -> list[str]: ...

    def stale_chunks(self) -> list[str]: ...

    def orphans(self) -> dict[str, int]: ...

    def drop_orphans(self) -> dict[str, int]: ...

    def invalid_indexes(self) -> list[str]: ...

    def rebuild_index(self, name: str) -> None: ...


def invalid_indexes(pool: Pool, tables: list[str]) -> list[str]:
    """Indexes of ``tables`` PostgreSQL does not use (a CREATE INDEX CONCURRENTLY that
    failed leaves one behind, and it still slows every write)."""
    with pool.connection() as conn:
        rows = conn.execute(
            "SELECT i.indexrelid::regclass::text FROM pg_index i "
            "WHERE i.indrelid = ANY(SELECT to_regclass(t) FROM unnest(%s::text[]) AS t) "
            "AND NOT (i.indisvalid AND i.indisready) ORDER BY 1",
            (tables,),
        ).fetchall()
    return [r[0] for r in rows]


def rebuild_index(pool: Pool, name: str) -> None:
    """REINDEX one index (named as ``invalid_indexes`` found it)."""
    with pool.connection() as conn:
        conn.execute(sql.SQL("REINDEX INDEX {}").format(sql.Identifier(*name.split("."))))
