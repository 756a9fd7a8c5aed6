"""What every store of one workspace shares: its scope, its pool, and the SQL fragments
written once (the scope predicate, the attribute join, the folder ``.config`` join).

A workspace is IronClaw's ``user_id`` plus an optional ``agent_id``; a NULL agent matches
only NULL rows (``IS NOT DISTINCT FROM``), as IronClaw's own queries do.  Every query of
every store carries the predicate, so no name or id reaches another user's rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, LiteralString
from uuid import UUID

import psycopg
from psycopg_pool import ConnectionPool

Conn = psycopg.Connection[tuple[Any, ...]]
Cursor = psycopg.Cursor[tuple[Any, ...]]
Pool = ConnectionPool[Conn]

#: The workspace's rows of ``memory_documents`` (unqualified).
SCOPE = "user_id = %(user)s AND agent_id IS NOT DISTINCT FROM %(agent)s"
#: The same filter on ``memory_documents d`` in joins.
DOC_SCOPE = "d.user_id = %(user)s AND d.agent_id IS NOT DISTINCT FROM %(agent)s"
#: Several workspaces of one agent searched together (IronClaw's read scopes, ``d``).
SCOPES = "d.user_id = ANY(%(users)s) AND d.agent_id IS NOT DISTINCT FROM %(agent)s"
#: A document's client attributes, where they were set against its current version.
ATTRS_JOIN = "LEFT JOIN memfs.file_attrs a ON a.document_id = d.id AND a.set_against = d.updated_at"
#: The nearest folder ``.config`` of document ``d`` as ``f`` (its candidates: %(configs)s).
FOLDER_JOIN = (
    "LEFT JOIN LATERAL (SELECT c.metadata FROM memory_documents c "
    "  WHERE c.user_id = d.user_id AND c.agent_id IS NOT DISTINCT FROM d.agent_id "
    "    AND c.path = ANY(%(configs)s) ORDER BY length(c.path) DESC LIMIT 1) f ON true"
)
#: Queue a document for re-chunking; one queued again while queued (or while being
#: re-chunked) gets a new stamp, so the re-chunk that read the older content leaves its
#: entry in the queue.
REQUEUE = "ON CONFLICT (document_id) DO UPDATE SET queued_at = clock_timestamp()"
#: The scope's documents waiting in the reindex queue (``d`` and ``q``).
QUEUED = (
    f"FROM memory_documents d JOIN memfs.reindex_queue q ON q.document_id = d.id WHERE {DOC_SCOPE}"
)


@dataclass(frozen=True)
class Scope:
    """One workspace: IronClaw's owner id plus an optional agent id (NULL for IronClaw rows)."""

    user_id: str
    agent_id: UUID | None = None

    def params(self) -> dict[str, Any]:
        return {"user": self.user_id, "agent": self.agent_id}

    def describe(self) -> str:
        return f"user {self.user_id!r}, agent {str(self.agent_id) if self.agent_id else 'none'!r}"


def folder_config_paths(path: str) -> list[str]:
    """The ``.config`` documents whose metadata a document inherits, nearest first."""
    parts = path.split("/")[:-1]
    candidates = ["/".join([*parts[:i], ".config"]) for i in range(len(parts), 0, -1)]
    candidates.append(".config")
    return candidates


def fetch_all(
    pool: Pool, sql: LiteralString, params: Any = None, *, binary: bool = False
) -> list[tuple[Any, ...]]:
    """The rows of one statement, on a connection of ``pool`` held for that statement."""
    with pool.connection() as conn:
        return conn.execute(sql, params, binary=binary).fetchall()


def pages(
    pool: Pool, sql: LiteralString, params: dict[str, Any], key: int
) -> Iterator[list[tuple[Any, ...]]]:
    """The rows of a statement read page by page in key order (keyset pagination), each
    page on a connection of its own: ``sql`` takes the last key read as ``%(after)s``
    ("" at first) and orders and limits by it; column ``key`` of a row is its key."""
    after = ""
    while True:
        rows = fetch_all(pool, sql, {**params, "after": after})
        if not rows:
            return
        yield rows
        after = rows[-1][key]


def count(cur: Cursor) -> int:
    row = cur.fetchone()
    return int(row[0]) if row else 0


class ScopedStore:
    """A pool and a scope: the base of each store (queries by one consumer each)."""

    def __init__(self, pool: Pool, scope: Scope) -> None:
        self.pool = pool
        self.scope = scope

    def _params(self, **extra: Any) -> dict[str, Any]:
        params = self.scope.params()
        params.update(extra)
        return params
