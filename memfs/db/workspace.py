"""A workspace as its engine offers it: one store per capability (``Database.workspace``).

This is where memfs chooses, once, which stores a layout has.  Above ``memfs.db`` nothing
asks which engine it runs on: it asks for a capability and finds ``None`` where the layout
has none.  IronClaw v1.3's Reborn memory re-chunks within each save and writes no
vectors, so it has no re-chunk queue, no embeddings and no planner statistics to keep;
its system prompt is assembled from files memfs does not show, so it has no ``.prompt``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from uuid import UUID

from memfs.db.capabilities import (
    ChunkSearch,
    EmbeddingKeeper,
    FullTextSearch,
    KeptHistory,
    ReindexQueue,
    StatisticsKeeper,
    ToolFiles,
)
from memfs.db.interface import DocumentStore, VersionStore


@dataclass(frozen=True)
class HybridRanking:
    """IronClaw v1.0's search: full-text and vector matches of chunks, fused
    (``memfs.search.engine``)."""

    store: ChunkSearch


@dataclass(frozen=True)
class FullTextRanking:
    """IronClaw v1.3 Reborn's search: full-text matches of whole documents by
    ``ts_rank`` (``memfs.search.reborn``); it keeps no vectors."""

    store: FullTextSearch
    #: The id the mount knows a document path by (its tree keys documents by id).
    document_id: Callable[[str], UUID]


#: The layout's ranking rule, with the store it reads; ``memfs.search`` builds its engine.
Ranking = HybridRanking | FullTextRanking


@dataclass(frozen=True)
class Workspace:
    """The stores of the workspace the settings name, on the live layout."""

    #: Documents: the filesystem model's engine, and every write.
    documents: DocumentStore
    #: How ``.search`` and ``memfs search`` rank, and what they read.
    ranking: Ranking
    #: The versions kept of every document (``.versions``).
    versions: VersionStore
    #: Editors' tool folders (``.obsidian``, ``.vscode`` ...), kept beside the memory.
    tool_files: ToolFiles
    #: The documents of each read scope, in the order given (``.scopes``, ``.prompt``).
    readers: list[DocumentStore]
    #: Documents waiting to be re-chunked (None: each save re-chunks in its transaction).
    reindex: ReindexQueue | None = None
    #: Chunks' embeddings (None: the layout keeps no vectors).
    embeddings: EmbeddingKeeper | None = None
    #: The planner's statistics the maintenance task refreshes (None: nothing to keep).
    statistics: StatisticsKeeper | None = None
    #: Whether IronClaw's onboarding is done, for ``.prompt`` (None: no ``.prompt``).
    onboarded: Callable[[], bool] | None = None
    #: Deleted documents and moves memfs keeps (``memfs undelete``, ``.at/``; None: none,
    #: a read-only mount of a database memfs never set up).
    kept: KeptHistory | None = None


__all__ = ["FullTextRanking", "HybridRanking", "Ranking", "Workspace"]
