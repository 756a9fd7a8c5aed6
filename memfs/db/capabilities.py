"""What the parts above ``memfs.db`` need of a workspace's stores besides its documents:
each capability as a protocol, with the rows it answers.

The search engines, the re-chunk and embedding workers, the maintenance task and the
tool folders are written against these, and ``Database.workspace`` hands out whichever
engine's implementation is live (``None`` where a layout has none).  No module outside
``memfs.db`` imports an engine (the import contract in ``pyproject.toml``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, NamedTuple, Protocol
from uuid import UUID

from pgvector import Vector

from memfs.db.interface import DocumentHistory, PastVersion
from memfs.db.scoped import Scope

if TYPE_CHECKING:
    from memfs.db.reborn.layout import RebornScope

# -- search ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ChunkHit:
    """One chunk a search leg found, in rank order."""

    chunk_id: UUID
    document_id: UUID
    path: str
    chunk_index: int
    content: str
    user_id: str


class ChunkSearch(Protocol):
    """IronClaw v1.0's two search legs over chunks, in one scope or several together."""

    @property
    def scope(self) -> Scope: ...

    def search_fts(
        self, query: str, limit: int, users: Sequence[str] | None = None
    ) -> list[ChunkHit]: ...

    def search_vector(
        self, embedding: Vector, limit: int, users: Sequence[str] | None = None
    ) -> list[ChunkHit]: ...


@dataclass(frozen=True)
class RankedRow:
    """One row a full-text query ranked (1-based), as IronClaw Reborn reads it."""

    rank: int
    path: str
    kind: str | None
    relative: str | None
    chunk_index: int | None
    content: str


class FullTextSearch(Protocol):
    """IronClaw v1.3 Reborn's one search leg: rows matching any term, best first."""

    def search(self, terms: Sequence[str], candidates: int) -> list[RankedRow]: ...


# -- background work -------------------------------------------------------------------


@dataclass(frozen=True)
class ReindexBatch:
    """What one ``reindex_queued`` call did: documents re-chunked, and how many still wait."""

    done: list[UUID]
    waiting: int


class ReindexQueue(Protocol):
    """Documents whose chunks a save left to the background (``memfs.reindex``)."""

    def reindex_queued(self, limit: int = 64) -> ReindexBatch: ...

    def drop_orphaned_reindex_entries(self) -> int: ...


class MissingPage(NamedTuple):
    """Which chunks still without a vector the embedding worker asks for next: of these
    documents (None: all), at most ``limit``, none over ``max_bytes``, none of ``exclude``
    (chunks the embedding server refused)."""

    document_ids: Sequence[UUID] | None
    limit: int
    max_bytes: int
    exclude: Sequence[UUID] = ()


class EmbeddingKeeper(Protocol):
    """Chunks still without a vector, and writing vectors (``memfs.embeddings.worker``)."""

    def chunks_missing_embeddings(self, page: MissingPage) -> list[tuple[UUID, str]]:
        """(chunk id, text) of the page's chunks, in document and chunk order."""

    def write_embeddings(self, items: Sequence[tuple[UUID, str, Vector]]) -> int: ...

    def embedding_dimensions(self) -> list[int]: ...


class StatisticsKeeper(Protocol):
    """The planner's statistics, refreshed when missing or stale (``Maintenance``)."""

    def refresh(self, min_changes: int = 500) -> list[str] | None: ...


# -- tool folders ----------------------------------------------------------------------


@dataclass(frozen=True)
class ToolFile:
    """A file (or, with ``is_dir``, a folder) of a tool folder, by its mount path."""

    path: str
    is_dir: bool
    content: bytes
    mode: int
    mtime_ns: int


#: A tool-folder compare-and-swap's expectation: path -> MD5 of the content its caller
#: last knew (None: absent).
KnownDigests = dict[str, "str | None"]
#: Its answer: the paths another mount wrote meanwhile, left as they are -> that file and
#: its MD5.
WrittenMeanwhile = dict[str, tuple[ToolFile, str]]


class ToolFiles(Protocol):
    """One workspace's editor tool folders (``.obsidian``, ``.vscode`` ...)."""

    def load(self) -> list[ToolFile]: ...

    def fingerprint(self) -> tuple[int, object]: ...

    def digests(self) -> dict[str, tuple[bool, int, int, str]]: ...

    def contents(self, paths: Sequence[str]) -> dict[str, bytes]: ...

    def apply_checked(
        self, upserts: Sequence[ToolFile], removed: Sequence[str], expected: KnownDigests
    ) -> WrittenMeanwhile: ...

    def apply(self, upserts: Sequence[ToolFile], removed: Sequence[str]) -> None: ...


@dataclass(frozen=True)
class Deletion:
    """A document deleted from memory and kept by memfs (``memfs undelete``, ``.at/``)."""

    id: int
    path: str
    created_at: datetime | None
    #: Its last change before the delete.
    updated_at: datetime | None
    deleted_at: datetime
    #: ``mount`` (a mount's rm, rm -rf, a move into a tool folder) or ``sql``.
    deleted_by: str
    size: int


@dataclass(frozen=True)
class KeptDocument:
    """A deleted document's content and every version IronClaw had kept of it."""

    deletion: Deletion
    content: str
    versions: tuple[PastVersion, ...]


@dataclass(frozen=True)
class Move:
    """A document (or, with ``folder``, a folder and all below it) moved."""

    old_path: str
    new_path: str
    folder: bool
    moved_at: datetime


@dataclass(frozen=True)
class EmptySpell:
    """A document held an empty content from ``emptied_at`` until a save filled it at
    ``filled_at``, at ``path`` (its path then).  IronClaw keeps no version of an empty
    content: this is how ``.at/`` knows the document was empty in between."""

    path: str
    emptied_at: datetime
    filled_at: datetime


@dataclass(frozen=True)
class SaverCopy:
    """A writer's bytes exactly as saved, kept because the stored content is not them (a
    merge with another writer's change): the safety net under the merge."""

    id: int
    path: str
    kept_at: datetime
    reason: str
    size: int


class KeptHistory(Protocol):
    """What memfs keeps beside IronClaw's tables of one workspace: deleted documents with
    their versions, every move, and when documents were empty, from the first mount that
    kept them."""

    def start(self) -> datetime:
        """Since when this workspace's moves and deletions are kept (recorded now if not
        yet)."""

    def deletions(self, path: str | None = None) -> list[Deletion]:
        """Kept deleted documents (at ``path`` only, if given), oldest deletion first."""

    def kept_document(self, deletion_id: int) -> KeptDocument | None: ...

    def forget(self, deletion_id: int) -> None:
        """Drop one kept document (restored)."""

    def moves(self, after: datetime) -> list[Move]:
        """Moves after ``after``, oldest first."""

    def empty_spells(self, at: datetime) -> list[EmptySpell]:
        """The spells of emptiness that ``at`` falls in (emptied at or before it, filled
        after it)."""

    def keep_saver_copy(self, path: str, data: bytes, reason: str) -> None:
        """Keep a writer's bytes as saved at ``path`` (``reason``: why the document does
        not hold them), committed before this returns."""

    def saver_copies(self, path: str) -> list[SaverCopy]:
        """The copies kept of saves at ``path``, oldest first."""

    def saver_copy(self, copy_id: int) -> bytes | None:
        """One kept copy's bytes (None: no such copy in this workspace)."""

    def purge(self, before: datetime) -> int:
        """Drop deletions, moves, empty spells and saver copies older than ``before``;
        how many deletions went."""


__all__ = [
    "ChunkHit",
    "ChunkSearch",
    "Deletion",
    "EmbeddingKeeper",
    "EmptySpell",
    "FullTextSearch",
    "KeptDocument",
    "KeptHistory",
    "Move",
    "RankedRow",
    "ReindexBatch",
    "ReindexQueue",
    "SaverCopy",
    "StatisticsKeeper",
    "ToolFile",
    "ToolFiles",
]


class WorkspaceCounts(Protocol):
    """A workspace's size as ``memfs status`` reports it, on every engine."""

    def counts(self) -> tuple[int, int]:
        """(documents IronClaw lists, chunk rows) of the workspace; reads only."""


class HistorySource(Protocol):
    """A workspace read whole, each document with its versions, to copy into Reborn
    (``memfs migrate``): IronClaw's legacy rows, or a Reborn workspace."""

    def count(self) -> int:
        """How many documents ``histories`` gives (a duplicated path once)."""

    def paths(self) -> list[str]:
        """Every document's path, without contents (checked before anything is copied)."""

    def histories(self) -> Iterator[DocumentHistory]:
        """Every document by path with its versions in order."""


class MigrationSource(NamedTuple):
    """What ``memfs migrate`` copies from a database, as the database's engine finds it."""

    history: HistorySource
    #: Where it is, for the report ("memory_documents, user 'alice'").
    described: str
    #: The Reborn workspace's scope when the source is one (the target's by default),
    #: None for legacy rows.
    reborn: RebornScope | None
    #: The source's user (a target scope names the same user unless told otherwise).
    user_id: str


def legacy_described(scope: Scope) -> str:
    """A legacy workspace as ``memfs migrate``'s report names its source."""
    agent = f", agent {scope.agent_id}" if scope.agent_id else ""
    return f"memory_documents, user {scope.user_id!r}{agent}"


def reborn_described(scope: RebornScope, url: str) -> str:
    """A Reborn workspace as ``memfs migrate``'s report names its source (the database's
    address without its credentials)."""
    return f"{scope.prefix} of {url.rsplit('@', maxsplit=1)[-1]}"
