"""The roles the model's parts ask of the mount's lookups (``memfs.vfs.base.Lookups``),
each a few members: a part's constructor takes a protocol made of the roles it uses
(``merging.MergeLookups``, ``commits.CommitLookups``, …), so what a part may call is
written where the part is, and checked."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol
from uuid import UUID

from memfs.cache import ContentCache
from memfs.db.interface import PLAIN_SAVE, CommitResult, DocumentStore, FileAttrs, SaveOptions
from memfs.db.records import Write
from memfs.kernel import KernelNotifier
from memfs.tree import Node
from memfs.vfs.database_access import DatabaseAccess
from memfs.vfs.save_tables import EditorSaves, SaverBases
from memfs.vfs.state import MountState


class StoreAccess(Protocol):
    """The workspace's store, and the bounded calls that reach it."""

    store: DocumentStore
    db: DatabaseAccess


class Committing(Protocol):
    """IronClaw's write of a document (chunks now or from the reindexer, listeners told)."""

    async def commit_document(
        self, write: Write, attrs: FileAttrs, how: SaveOptions = PLAIN_SAVE
    ) -> CommitResult: ...


class Describing(Protocol):
    """Names of nodes for log lines."""

    def describe_node(self, node: Node) -> str: ...


class Caching(Protocol):
    """Committed contents by version."""

    cache: ContentCache


class SaverTables(Protocol):
    """What each process read or wrote (merge bases), and the editors' saves under way."""

    bases: SaverBases
    saves: EditorSaves


class Stateful(Protocol):
    """The mount's state (tree, buffers, handles, namespace lock) and the kernel's caches."""

    state: MountState
    kernel: KernelNotifier


class Clocked(Protocol):
    """The wall clock (nanoseconds) and the monotonic one (seconds)."""

    clock: Callable[[], int]
    monotonic: Callable[[], float]


class Telling(Protocol):
    """What a commit tells: the mount's counts, the listeners, the reindexer."""

    def announce(self, doc_id: UUID) -> None: ...

    def count_commit(self, result: CommitResult) -> None: ...

    def request_reindex(self, *doc_ids: UUID) -> None: ...
