"""The storage interface of the filesystem model: what ``memfs.vfs`` needs from an engine.

A workspace is a set of documents (UTF-8 text at slash-separated paths) plus directories
kept empty.  The model asks in filesystem terms (load the tree, read content, commit a
document, delete, rename a file or a folder, keep a directory, set attributes) and hears of
other writers through the change-feed hooks.  The engines stand in a grid, layout by
database: ``memfs.db.legacy.{postgres,libsql}`` (IronClaw's ``memory_documents``) and
``memfs.db.reborn.{postgres,libsql}`` (``root_filesystem_entries``); an engine keeps
IronClaw's write rules (versioning, indexing, conflict keeping) behind these calls.

Every method is synchronous and runs in a worker thread (``memfs.db.calls``); errors are
``memfs.errors`` types or driver errors the call runner turns into them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, Protocol
from uuid import UUID

from memfs.db.deferred import Change, Delete, DropDir, KeepDir, Moved, MoveDir
from memfs.db.records import (
    NO_ATTRS,
    PLAIN_SAVE,
    ByHash,
    CommitResult,
    FileAttrs,
    MergeWith,
    Overwritten,
    Rename,
    Replacement,
    SaveOptions,
    Write,
)
from memfs.errors import WriteRefused

__all__ = [
    "NO_ATTRS",
    "PLAIN_SAVE",
    "ByHash",
    "Change",
    "CommitResult",
    "Content",
    "Delete",
    "DocRow",
    "DocumentStore",
    "DropDir",
    "ExportRow",
    "FileAttrs",
    "KeepDir",
    "MergeWith",
    "MoveDir",
    "Moved",
    "Overwritten",
    "Rename",
    "Replacement",
    "SaveOptions",
    "StoredDocument",
    "WorkspaceScope",
    "Write",
    "attrs_of",
]


class DocRow(NamedTuple):
    """A document as loaded at mount: no content, only what attributes need (a tuple: a
    mount's load makes one per document)."""

    id: UUID
    path: str
    size: int
    created_at: datetime
    updated_at: datetime
    attrs: FileAttrs


class Content(NamedTuple):
    """A document's content as UTF-8 bytes, and the row version it was read at."""

    data: bytes
    version: datetime


@dataclass(frozen=True)
class PastVersion:
    """A content a document had, as IronClaw kept it when it was replaced."""

    number: int
    content: str
    changed_by: str | None
    created_at: datetime


@dataclass(frozen=True)
class DocumentHistory:
    """A whole document to copy between engines: content, metadata, times, versions."""

    path: str
    content: str
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    versions: tuple[PastVersion, ...]
    #: Other rows at the same path (a legacy duplicate; the newest is this one).
    duplicates: int = 0


@dataclass(frozen=True)
class ImportOutcome:
    """What copying one ``DocumentHistory`` did (or, in a dry run, would do).

    ``action``: ``copied``; ``present`` (the same content and as many versions are there
    already: a re-run); ``differs`` (another document is there: left as it is); ``refused``
    (the target cannot hold this path; ``reason`` says why).
    """

    action: str
    versions: int = 0
    chunks: int = 0
    meta: bool = False
    reason: str = ""


@dataclass(frozen=True)
class VersionInfo:
    """One kept content of a document, without the content."""

    number: int
    created_at: datetime
    changed_by: str | None
    #: The content's length in bytes (UTF-8).
    size: int


@dataclass(frozen=True)
class AsOf:
    """What changed in a workspace after a moment, for ``.at/``: every content replaced
    after it is the first version kept after it (IronClaw keeps the content a save
    replaces, stamped with the time of that save)."""

    #: Documents created after the moment (not there then), by path.
    born_after: frozenset[str]
    #: For each document changed after the moment, the first version kept after it.
    earliest: dict[str, VersionInfo]


class VersionStore(Protocol):
    """The versions IronClaw keeps of a workspace's documents (either layout)."""

    #: Whether this database keeps versions at all (IronClaw < 0.25 did not).
    available: bool

    def versions(self, path: str) -> list[VersionInfo]:
        """The document's kept versions, oldest first (none if it has none, or is gone)."""

    def version_content(self, path: str, number: int) -> bytes | None:
        """One version's content (None: there is no such version)."""

    def as_of(self, at: datetime) -> AsOf:
        """What changed after ``at`` (one query per table, whatever the workspace's size)."""


class WorkspaceScope(Protocol):
    """Whose workspace a store holds (legacy: user and agent; Reborn: and tenant, project)."""

    @property
    def user_id(self) -> str: ...

    def describe(self) -> str:
        """The workspace in words (which user, agent ...), for messages."""


class StoredDocument(NamedTuple):
    """A whole document as stored (newest row if its path is duplicated)."""

    id: UUID
    content: str
    updated_at: datetime


@dataclass(frozen=True)
class ExportRow:
    """A document for export or sync: its client mtime is what a file's mtime restores."""

    path: str
    content: str
    updated_at: datetime
    mtime_ns: int | None
    id: UUID


class DocumentStore(Protocol):
    """One workspace's documents, as the filesystem model uses them."""

    @property
    def scope(self) -> WorkspaceScope:
        """The workspace."""

    #: Tags this mount's writes, so its change feed can skip their echoes (None: untagged).
    origin: str | None

    #: The longest path (UTF-8 bytes) every index the path enters can take (longer ones
    #: are refused up front with ENAMETOOLONG; see ``db.limits``).
    max_path_bytes: int

    def path_problem(self, path: str) -> str | None:
        """Why the engine cannot store a document (or folder) at ``path``, beyond the
        rules every engine shares (``memfs.paths``); None: it can."""

    def content_problem(self, path: str, text: str) -> WriteRefused | None:
        """What IronClaw's write would refuse in ``text`` at ``path``, decided without the
        database (a blank protected file, a prompt injection); None: nothing."""

    # -- the tree --------------------------------------------------------------------------

    def load_documents(self) -> list[DocRow]:
        """Path and attributes of every document (no content), by path, newest first
        where two rows share a path."""

    def load_directories(self) -> list[str]:
        """Directories kept without documents in them (mkdir, emptied folders)."""

    def read_content(self, doc_id: UUID) -> Content | None:
        """One document's content, or None if it is gone."""

    def read_contents(
        self, doc_ids: Sequence[UUID], near: str | None = None
    ) -> dict[UUID, Content]:
        """Several documents' content in one round trip (those that exist); ``near`` is a
        path in their folder, whose indexing rules come along for later saves."""

    def content_by_hash(self, doc_id: UUID, digest: str) -> bytes | None:
        """The content with IronClaw's hash ``digest`` (``sha256:<hex>``) that the document
        holds now or kept as a version, or None: a merge base the cache no longer holds."""

    # -- whole documents (the workspace commands: seed, import, sync, reindex) -----------

    def find_document(self, path: str) -> StoredDocument | None:
        """The document at ``path`` with its text (the newest row where two share it)."""

    def export_rows(self) -> list[ExportRow]:
        """Every document with its text and client mtime, by path (a duplicated path:
        newest first).  Bytes that are not UTF-8 (possible on Reborn) are kept as
        surrogate escapes, so ``encode("utf-8", "surrogateescape")`` gives them back."""

    def reindex_targets(self, paths: Sequence[str] | None) -> list[tuple[UUID, str]]:
        """(id, path) of every document, or of those at ``paths``, by path."""

    def reindex(self, doc_id: UUID, path: str) -> int:
        """One document's chunks rebuilt from its content as IronClaw's indexer does; the
        number written (0: gone, or not indexed)."""

    # -- writes (each one transaction, carrying the deferred changes first) ------------------

    def commit_document(
        self, write: Write, attrs: FileAttrs, how: SaveOptions = PLAIN_SAVE
    ) -> CommitResult:
        """Save a document (create it when ``doc_id`` is None).  A row changed since
        ``how.expected`` is kept (as a version, or a conflict copy) before this content
        wins; with ``how.merge``, that row's bytes are first given to it, in the
        transaction with the row locked, and a text it returns is written instead
        (``CommitResult.merged``) as IronClaw writes any content over the row (the
        replaced one versioned)."""

    def commit_documents(
        self,
        items: Sequence[tuple[UUID | None, str, str, FileAttrs]],
        keep_dirs: Sequence[str] = (),
    ) -> list[CommitResult]:
        """Several saves in one transaction (a directory renamed into place)."""

    def replace_document(self, replacement: Replacement, how: SaveOptions) -> CommitResult | None:
        """A document renamed over another: the target row takes the source's content
        (``replacement.content``, or the source row's), then the source row is deleted.
        A target changed since ``how.expected`` is merged with it by ``how.merge``, as
        ``commit_document``."""

    def rename_document(
        self, rename: Rename, attrs: FileAttrs, replaced: Overwritten | None = None
    ) -> Moved | None:
        """Move a document (deleting ``replaced`` first, only at the version the mount
        showed: else EEXIST, nothing done); None if it is gone."""

    def rename_directory(
        self, old_path: str, new_path: str, replaced_dir: str | None, keep_dirs: Sequence[str] = ()
    ) -> dict[UUID, Moved]:
        """Move every document and kept directory below ``old_path``."""

    def delete_document(
        self, doc_id: UUID, keep_dirs: Sequence[str] = (), seen: datetime | None = None
    ) -> bool:
        """Delete a document (its chunks and versions go with it), only while it is at
        ``seen`` (None: any version); False if it was gone or changed."""

    def merge_metadata(self, doc_id: UUID, path: str, overlay: Mapping[str, Any]) -> bool:
        """IronClaw's metadata merge of a tool's write: ``overlay``'s top-level keys over
        the document's own metadata (a column, or Reborn's ``.meta`` sidecar); the row's
        version is left as it is (the save that follows sets it).  False if it is gone."""

    def set_attrs(self, doc_id: UUID, attrs: FileAttrs) -> bool:
        """Persist mode and mtime against the row's current version; False if gone."""

    def create_directory(self, path: str) -> None:
        """Keep an empty directory."""

    def delete_directory(self, path: str, keep_dirs: Sequence[str] = ()) -> None:
        """Stop keeping a directory (keeping ``keep_dirs``, emptied by the removal)."""

    # -- changes left for the next transaction (``memfs.db.deferred``) ---------------------

    def defer(self, *changes: Change) -> None:
        """Make ``changes`` with the next transaction; reads show them made already."""

    def flush_changes(self) -> bool:
        """Send the deferred changes now; False if none waited."""

    def moving(self) -> bool:
        """Whether a deferred directory move is unsent, or its answer not taken."""

    def take_moved(self) -> dict[UUID, Moved]:
        """The versions of the documents moved by directory moves sent so far."""

    def changes_waiting(self) -> bool:
        """Whether deferred changes wait to be sent."""

    def changes_queued(self) -> int:
        """How many deferred changes are not committed yet (waiting or in flight)."""

    def take_skipped(self) -> list[tuple[Change, str]]:
        """Deferred changes not made (their condition failed, or the database refused
        them), with why, since the last call: the mount reloads its tree."""

    # -- other writers (change-feed hooks) -------------------------------------------------

    def changed_documents(self, events: Sequence[Mapping[str, object]]) -> dict[UUID, bool]:
        """The documents of this workspace that change-feed events name, in order, True
        for those gone (this store's own writes, by their origin tag, left out)."""

    def document_rows(self, doc_ids: Sequence[UUID]) -> dict[UUID, DocRow]:
        """The current rows of documents a change-feed batch named (those that exist)."""

    def fingerprint(self) -> tuple[int, str]:
        """A value that changes whenever any document of the workspace does (polling)."""

    def document_versions(self) -> list[tuple[UUID, str, datetime]] | None:
        """(id, path, updated_at) of every document ``load_documents`` lists, cheaper to
        read than the whole list; None where it is not (the engine has a change feed)."""


def attrs_of(mode: int | None, mtime_ns: int | None) -> FileAttrs:
    """The attributes of a row: the shared ``NO_ATTRS`` when no client set any."""
    return NO_ATTRS if mode is None and mtime_ns is None else FileAttrs(mode, mtime_ns)
