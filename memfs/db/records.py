"""The values a save takes and answers: a document's client attributes and what one
write-through transaction did.  Below both the storage interface and the transaction
shell (``memfs.db.deferred``), which name them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from uuid import UUID

from memfs.ironclaw.hashing import content_hash

__all__ = [
    "NO_ATTRS",
    "PLAIN_SAVE",
    "ByHash",
    "CommitResult",
    "FileAttrs",
    "MergeWith",
    "Overwritten",
    "Rename",
    "Replacement",
    "SaveOptions",
    "Write",
]

#: The document's bytes by IronClaw's hash of them (its row or a version of it), read in
#: the save's transaction: a merge's base known by its hash alone.
ByHash = Callable[[str], "bytes | None"]

#: A save's merge with another writer's change, run by the engine inside the save's
#: transaction with the row locked: given the row's bytes as they stand (and a reader of
#: the document's earlier contents by hash, in the same transaction), the text to write
#: instead of the save's (None: the save's own, the other change kept aside).  The rule is
#: above the engines (``memfs.vfs.merging``); the engine only runs it where no third
#: writer can land between the read it merges and the write.
MergeWith = Callable[[bytes, ByHash], "str | None"]


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
class Write:
    """What one save writes: its row (None: the row at ``path``, if any), its path and
    its content."""

    doc_id: UUID | None
    path: str
    content: str

    @cached_property
    def new_hash(self) -> str:
        """IronClaw's hash of the content."""
        return content_hash(self.content)


@dataclass(frozen=True)
class SaveOptions:
    """How a save treats the row it finds (``DocumentStore.commit_document``)."""

    #: The row version the content was based on (None: none, or a new document).  A row
    #: changed since is kept (a version, or a conflict copy) before this content wins.
    expected: datetime | None = None
    #: Chunks written in the save's transaction (else queued for the indexer right after).
    index_now: bool = True
    #: The caller sees no ``.config`` above the path (a guess the server checks), so a
    #: new document's first save in a folder can be one round trip.
    unconfigured: bool = False
    #: The merge with a row changed since ``expected``, run under the row lock.
    merge: MergeWith | None = None
    #: The save's base is older than the row whatever its version (its writer found no
    #: document at the path, or read nothing and extends an earlier content): a row found
    #: is another writer's change, kept or merged with (``merge``) as one made since
    #: ``expected`` is.
    stale_base: bool = False


#: A save with no options: based on nothing, indexed in its transaction.
PLAIN_SAVE = SaveOptions()


@dataclass(frozen=True)
class Replacement:
    """A document renamed over another (``DocumentStore.replace_document``): the target
    row takes the source's content, then the source row goes."""

    source_id: UUID
    target_id: UUID
    path: str
    #: The content to write (None: the source row's, as it stands).
    content: str | None
    attrs: FileAttrs = NO_ATTRS
    keep_dirs: Sequence[str] = ()
    #: The source row's version the mount showed: a source changed since stays.
    source_at: datetime | None = None


@dataclass(frozen=True)
class Rename:
    """A document moved to ``new_path`` (``DocumentStore.rename_document``)."""

    doc_id: UUID
    new_path: str
    #: Where the mount shows it now (None: wherever the row is).
    old_path: str | None = None
    #: Folders the move leaves empty that stay (the mount shows them).
    keep_dirs: Sequence[str] = ()


@dataclass(frozen=True)
class Overwritten:
    """The document a rename replaces, deleted only at ``seen``, the version the mount
    showed (else EEXIST and nothing is done)."""

    doc_id: UUID
    seen: datetime | None = None


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
