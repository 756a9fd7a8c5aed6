"""The values a save takes and answers: a document's client attributes and what one
write-through transaction did.  Below both the storage interface and the transaction
shell (``memfs.db.deferred``), which name them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

__all__ = ["NO_ATTRS", "CommitResult", "FileAttrs", "MergeWith"]

#: A save's merge with another writer's change, run by the engine inside the save's
#: transaction with the row locked: given the row's bytes as they stand, the text to
#: write instead of the save's (None: the save's own, the other change kept aside).  The
#: rule is above the engines (``memfs.vfs.merging``); the engine only runs it where no
#: third writer can land between the read it merges and the write.
MergeWith = Callable[[bytes], "str | None"]


@dataclass(frozen=True)
class FileAttrs:
    """Client-set attributes to persist beside a document (None = IronClaw's default)."""

    mode: int | None = None
    mtime_ns: int | None = None

    @property
    def empty(self) -> bool:
        return self.mode is None and self.mtime_ns is None


#: The attributes of a document no client set (most of them): one shared value, so a
#: mount's load of 100,000 rows makes none.
NO_ATTRS = FileAttrs()


@dataclass(frozen=True)
class CommitResult:
    """What one write-through transaction did."""

    doc_id: UUID
    updated_at: datetime
    created: bool
    changed: bool
    chunks: int
    versioned: bool
    #: How a concurrent change was kept ("version 3", "copy MEMORY.md.conflict-….md").
    conflict: str | None = None
    #: IronClaw's hash of the content the save replaced, at least where it was not the
    #: version the save was based on (None: none, or the same): when that was another
    #: writer's change the mount had not heard of, a merge can still fetch and fold it in.
    replaced_hash: str | None = None
    #: The text written, where the save's ``merge`` made it (the row had changed since
    #: ``expected``): the other writer's content is then in it, not kept aside.
    merged: str | None = None
