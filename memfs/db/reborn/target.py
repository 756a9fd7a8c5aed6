"""A Reborn workspace that legacy memory is copied into (``memfs migrate``).

Its own small pool (one connection: the copy is one document at a time), checked first to
hold IronClaw's Reborn tables: memfs never creates IronClaw's tables, IronClaw >= 1.1 does
at its first start.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Any, Self

import psycopg
from psycopg_pool import ConnectionPool

from memfs.db.interface import DocumentHistory, ImportOutcome
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.store import RebornStore
from memfs.db.search_path import pin_session
from memfs.errors import DatabaseError

#: The columns of ``root_filesystem_entries`` a copy writes beyond path and contents.
_REQUIRED_COLUMNS = ("kind", "indexed", "version", "is_dir", "content_type")


class ImportTarget(ABC):
    """A Reborn store ``memfs migrate`` copies into, closed when the copy ends (each
    database's target opens its store and says how it is closed)."""

    _store: RebornStore

    def import_history(self, doc: DocumentHistory, *, dry_run: bool = False) -> ImportOutcome:
        """One document with every version, in one transaction (``RebornStore``)."""
        return self._store.import_history(doc, dry_run=dry_run)

    @abstractmethod
    def close(self) -> None:
        """Release the store's database."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class RebornTarget(ImportTarget):
    """Where ``memfs migrate`` writes: ``scope`` of the database at ``url``."""

    def __init__(self, url: str, scope: RebornScope, *, timeout: float) -> None:
        self.scope = scope
        self._pool: ConnectionPool[Any] = ConnectionPool(
            url,
            min_size=1,
            max_size=1,
            open=False,
            kwargs={"autocommit": True, "prepare_threshold": None},  # see db._connect_kwargs
            # IronClaw's tables, not memfs's schema, even for a role named memfs.
            configure=pin_session,
        )
        try:
            self._pool.open(wait=True, timeout=timeout)
            with self._pool.connection() as conn:
                row = conn.execute(
                    "SELECT count(*) FROM information_schema.columns WHERE table_schema = "
                    "current_schema() AND table_name = 'root_filesystem_entries' "
                    "AND column_name = ANY(%s)",
                    (list(_REQUIRED_COLUMNS),),
                ).fetchone()
        except (psycopg.Error, OSError) as exc:
            self._pool.close()
            raise DatabaseError(f"the target database cannot be used: {exc}") from None
        if row is None or row[0] != len(_REQUIRED_COLUMNS):
            self._pool.close()
            raise DatabaseError(
                "the target database has no IronClaw Reborn tables (root_filesystem_entries "
                "with kind, indexed and version): start IronClaw >= 1.1 against it once, "
                "then migrate"
            )
        self._store = RebornStore(self._pool, scope)

    def close(self) -> None:
        self._pool.close()
