"""A document renamed over another on IronClaw's legacy layout: the steps written once,
each legacy engine (PostgreSQL ``MetaStore``, libSQL ``LegacyLibsqlWriter``) giving its
statements.

IronClaw v1.0 has no rename.  memfs makes a rename over a document IronClaw's write of the
target's path with the source's content (the target keeps its id, created_at and metadata;
its content becomes a version), then IronClaw's delete of the source, with memfs's history
rules between (docs/semantics/persistence.md, "A file renamed over another keeps its
history"):

1. the source is kept as deleted with its versions (``memfs undelete``), before any goes;
2. the target's own content is one of its versions even when the rename leaves it as it is
   (a merge holding both), so its history up to the rename stays its own;
3. the write (``plan_save``; another writer's change since the mount read the target is
   kept first);
4. the source's versions carry over to the target, numbered after its own (IronClaw's
   delete would cascade them away);
5. a source another writer changed after the mount read it keeps that content as a version
   of the target;
6. IronClaw's delete of the source (not kept a second time).

Steps 2, 4 and 5 only where the file has IronClaw's versions table.  All in the caller's
transaction: the engine's transaction shell makes it one commit.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple, Protocol, TypeVar
from uuid import UUID


class Written(Protocol):
    """What an engine's write of the target answers (its row id is known at once)."""

    @property
    def doc_id(self) -> UUID: ...


W = TypeVar("W", bound=Written)


class Source(NamedTuple):
    """The document renamed: its row, and its version the mount read (None: any)."""

    doc_id: UUID
    seen: datetime | None


class LegacyRenameOver(ABC):
    """The rename-over steps (``_rename_over``) over the hooks a legacy engine gives."""

    def _rename_over(
        self,
        conn: Any,
        source: Source,
        target_id: UUID,
        content: str,
        write: Callable[[], W],
    ) -> W:
        """Steps 1-6 in ``conn``'s transaction; ``write`` is the engine's step 3 (its save of
        the target with ``content``), answering the row written."""
        source_id, source_at = source
        versions = self._keeps_versions()
        self._keep_source(conn, source_id)
        if versions:
            self._version_if_kept(conn, target_id, content)
        written = write()
        if written.doc_id == source_id:  # the row is its own target: nothing leaves
            return written
        if versions:
            self._carry_versions(conn, source_id, written.doc_id)
            if source_at is not None:
                self._version_if_changed(conn, source_id, source_at, written.doc_id)
        self._delete_source(conn, source_id)
        return written

    @abstractmethod
    def _keeps_versions(self) -> bool:
        """Whether the file has IronClaw's versions table."""

    @abstractmethod
    def _keep_source(self, conn: Any, source_id: UUID) -> None:
        """Step 1: the source kept as deleted with its versions (nothing if it is gone)."""

    @abstractmethod
    def _version_if_kept(self, conn: Any, target_id: UUID, content: str) -> None:
        """Step 2: the target's content a version if it is ``content`` (not empty, and not
        a second time if its newest version holds it already: IronClaw's rule)."""

    @abstractmethod
    def _carry_versions(self, conn: Any, source_id: UUID, target_id: UUID) -> None:
        """Step 4: the source's versions the target's, numbered after its own."""

    @abstractmethod
    def _version_if_changed(
        self, conn: Any, source_id: UUID, source_at: datetime, target_id: UUID
    ) -> None:
        """Step 5: the source's content a version of the target if its row is no longer
        at ``source_at`` (the version the mount read)."""

    @abstractmethod
    def _delete_source(self, conn: Any, source_id: UUID) -> None:
        """Step 6: IronClaw's delete of the source (chunks, row; not kept again)."""
