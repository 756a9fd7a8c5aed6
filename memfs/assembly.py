"""A mount's parts, built from its settings and wired by their constructors.

``assemble`` is the one place where a mount is composed: the document store and the
narrow stores, the database call runner, the background workers (re-chunking,
embeddings), the synthetic trees (``.search``, ``.scopes``) and the filesystem model that
uses them all, then the objects that keep it in step with other writers and tidy.  Nothing
is attached to the filesystem after it is built.  ``memfs.daemon`` runs what this builds.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from uuid import UUID

from memfs.config import Settings, redacted
from memfs.db import Database, DocumentStore
from memfs.db.calls import DatabaseCalls
from memfs.db.workspace import Workspace
from memfs.embeddings import Embedder, EmbeddingSettings
from memfs.embeddings.worker import EmbeddingWorker
from memfs.kernel import KernelNotifier
from memfs.mount_status import MountStatus, render_text
from memfs.processes import RecentProcesses
from memfs.recovery import RecoveryArea
from memfs.reindex import Reindexer
from memfs.scratch import ScratchRules
from memfs.search import SearchConfig
from memfs.search.rankings import search_engine
from memfs.stats import MountStats
from memfs.vfs import (
    AtTree,
    Filesystem,
    Maintenance,
    OtherWriters,
    PromptFile,
    RecentTree,
    ScopesTree,
    SearchTree,
    StatusFiles,
    SyntheticTree,
    ToolFolders,
    VersionsTree,
)
from memfs.vfs.buffers import ScratchSpill

#: Deadline of the reindex and embedding workers' database calls (seconds): re-chunking a
#: 50 MB document legitimately takes longer than a request's deadline.
BACKGROUND_DEADLINE = 300.0


@dataclass
class MountParts:
    """Everything one mount runs; the daemon starts the workers and serves ``fs``."""

    store: DocumentStore
    #: The live statistics every part counts into (``memfs stats``, ``--metrics``).
    stats: MountStats
    calls: DatabaseCalls
    fs: Filesystem
    writers: OtherWriters
    maintenance: Maintenance
    #: None on a read-only mount (it writes nothing to re-chunk).
    reindexer: Reindexer | None
    embedder: Embedder | None
    #: None without a provider, or on a read-only mount.
    embeddings: EmbeddingWorker | None
    #: What ``.status`` and ``memfs status MNT`` report.
    status: MountStatus
    #: Whether the workspace writes (False: read-only, by choice or by the database).
    writes: bool
    #: IronClaw's search of this layout, after this workspace's re-chunking (what
    #: ``.search`` and the agent's tools ask).
    search: SearchTree


@dataclass(frozen=True)
class Opened:
    """An open database with the settings IronClaw keeps in it for this user: what a
    workspace is assembled from (``memfs.serving.open_served`` opens it)."""

    database: Database
    search_config: SearchConfig
    #: None: no embedding provider (search is full-text).
    embedding_settings: EmbeddingSettings | None


@dataclass(frozen=True)
class _Workers:
    """The background workers a workspace's writes feed."""

    embedder: Embedder | None
    embeddings: EmbeddingWorker | None
    reindexer: Reindexer | None
    #: Told of each document whose chunks changed (the embedding worker embeds them).
    changed: Callable[[UUID], None]


def assemble(
    settings: Settings,
    opened: Opened,
    *,
    kernel: KernelNotifier,
    recovery: RecoveryArea,
    watching: str = "polling every second",
) -> MountParts:
    """Build a workspace's parts (call inside the trio run: the workers make trio
    objects).

    One path for every layout: the workspace's stores say what it has (``None`` where it
    has none: Reborn re-chunks within each save, keeps no vectors and shows no
    ``.prompt``), and each part is built only where its store exists."""
    database = opened.database
    stats = MountStats()
    calls = DatabaseCalls(
        concurrency=settings.pool_size, deadline=settings.call_deadline, probe=database.ping,
        reconnect=database.pool.check, stats=stats,
    )  # fmt: skip
    workspace = database.workspace(settings, origin=uuid.uuid4().hex)
    writes = not settings.read_only
    workers = _workers(workspace, opened.embedding_settings, calls, writes=writes)
    search = _search_tree(settings, opened.search_config, workspace, calls, workers)
    status = MountStatus(
        server=redacted(database.url), layout=database.schema.describe(), watching=watching,
        ping=database.ping, counts=lambda: _status_counts(database, settings), calls=calls,
        stats=stats, recovery=recovery, reindexer=workers.reindexer,
        embeddings=workers.embeddings, deferred=workspace.documents.changes_queued,
        lock_held_since=database.lock_held_since,
        provider=_provider(workers.embedder, opened.embedding_settings),
    )  # fmt: skip
    fs = Filesystem(
        workspace.documents,
        calls=calls,
        recovery=recovery,
        cache_bytes=settings.cache_bytes,
        uid=settings.uid,
        gid=settings.gid,
        umask=settings.umask,
        rules=ScratchRules.with_extra(settings.scratch_patterns, settings.tool_folders),
        spill=ScratchSpill(settings.runtime_dir / f"scratch-{os.getpid()}"),
        read_only=settings.read_only,
        kernel=kernel,
        reindexer=workers.reindexer,
        extensions=_extensions(workspace, calls, search),
        on_changed=workers.changed,
        tools=ToolFolders(workspace.tool_files, calls),
        root_files=_root_files(workspace, calls, status),
        stats=stats,
        process_of=RecentProcesses(),
        kept=workspace.kept if writes else None,
    )
    _watch(stats, fs, workers.reindexer, workers.embeddings)
    kept = None  # a read-only workspace purges nothing
    if writes and workspace.kept is not None:
        kept = (workspace.kept, timedelta(days=settings.keep_deleted_days))
    return MountParts(
        store=workspace.documents,
        stats=stats,
        calls=calls,
        fs=fs,
        writers=OtherWriters(fs),
        maintenance=Maintenance(fs, calls, workspace.statistics, kept=kept),
        reindexer=workers.reindexer,
        embedder=workers.embedder,
        embeddings=workers.embeddings,
        status=status,
        writes=writes,
        search=search,
    )


def _workers(
    workspace: Workspace,
    embedding_settings: EmbeddingSettings | None,
    calls: DatabaseCalls,
    *,
    writes: bool,
) -> _Workers:
    """The re-chunking and embedding workers, where the store has them and writes."""
    background = calls.with_deadline(BACKGROUND_DEADLINE)
    keeps_vectors = embedding_settings is not None and workspace.embeddings is not None
    embedder = Embedder(embedding_settings) if keeps_vectors and embedding_settings else None
    embeddings = (
        EmbeddingWorker(workspace.embeddings, embedder, background)
        if embedder is not None and workspace.embeddings is not None and writes
        else None
    )

    def changed(doc_id: UUID) -> None:
        if embeddings is not None:
            embeddings.notify(doc_id)

    reindexer = None
    if workspace.reindex is not None and writes:
        reindexer = Reindexer(workspace.reindex, background, changed)
    return _Workers(embedder, embeddings, reindexer, changed)


def _search_tree(
    settings: Settings,
    config: SearchConfig,
    workspace: Workspace,
    calls: DatabaseCalls,
    workers: _Workers,
) -> SearchTree:
    """``.search/``: IronClaw's ranking of the workspace's store, over the read scopes."""
    engine = search_engine(
        workspace.ranking, calls, embedder=workers.embedder, config=config,
        read_scopes=settings.read_scopes,
    )  # fmt: skip
    settled = workers.reindexer.settled if workers.reindexer is not None else None
    return SearchTree(
        engine, ttl=settings.search_ttl, deadline=settings.search_timeout, settled=settled
    )


def _extensions(
    workspace: Workspace, calls: DatabaseCalls, search: SearchTree
) -> list[SyntheticTree]:
    """The synthetic trees: ``.search``, ``.versions``, ``.recent``, ``.at`` and, with
    read scopes, ``.scopes``."""
    store = workspace.documents
    extensions: list[SyntheticTree] = [
        search,
        VersionsTree(workspace.versions, store, calls, workspace.kept),
        RecentTree(store, workspace.versions, calls),
        AtTree(store, workspace.versions, workspace.kept, calls),
    ]
    if workspace.readers:
        extensions.append(ScopesTree(workspace.readers, calls))
    return extensions


def _root_files(
    workspace: Workspace, calls: DatabaseCalls, status: MountStatus
) -> list[PromptFile | StatusFiles]:
    """The root's generated files: ``.prompt`` (where the layout tells the agent one)
    and ``.status``."""
    files: list[PromptFile | StatusFiles] = []
    if workspace.onboarded is not None:
        lent = _lent_by(workspace.readers)
        files.append(
            PromptFile(workspace.documents, calls, onboarded=workspace.onboarded, shared=lent)
        )
    files.append(StatusFiles(status, render_text))
    return files


def _provider(embedder: Embedder | None, settings: EmbeddingSettings | None) -> str | None:
    """The embedding provider ``.status`` names (None: none)."""
    if embedder is None or settings is None:
        return None
    return f"{embedder.provider.model} ({settings.provider})"


def _watch(
    stats: MountStats,
    fs: Filesystem,
    reindexer: Reindexer | None,
    embeddings: EmbeddingWorker | None,
) -> None:
    """Report the values the mount's parts keep themselves."""
    cache = fs.lookups.cache
    stats.watch("memfs_cache_hits", "reads served from the content cache",
                lambda: cache.hits, "counter")  # fmt: skip
    stats.watch("memfs_cache_misses", "reads that fetched content from the database",
                lambda: cache.misses, "counter")  # fmt: skip
    stats.watch("memfs_cache_bytes", "bytes of document content cached", lambda: cache.used)
    stats.watch("memfs_open_files", "open file handles", lambda: len(fs.state.handles))
    stats.watch("memfs_unsaved_files", "files whose changes the database refused or could "
                "not take yet (kept in memory and the recovery area)",
                lambda: len(fs.state.unsaved))  # fmt: skip
    stats.watch("memfs_deferred_changes", "removals and folder moves not committed yet",
                fs.store.changes_queued)  # fmt: skip
    stats.watch("memfs_database_unresponsive", "1 while the database is not answering",
                lambda: float(fs.lookups.calls.unresponsive_since is not None))  # fmt: skip
    if reindexer is not None:
        stats.watch("memfs_documents_rechunked", "documents re-chunked after a write",
                    lambda: reindexer.indexed, "counter")  # fmt: skip
    if embeddings is not None:
        stats.watch("memfs_chunks_embedded", "chunk embeddings written",
                    lambda: embeddings.written, "counter")  # fmt: skip


def _status_counts(database: Database, settings: Settings) -> dict[str, object]:
    """The workspace's counts for ``.status``, with the documents queued for re-chunking
    by every mount (the legacy layout's queue; Reborn re-chunks in each save)."""
    counts: dict[str, object] = dict(database.workspace_summary(settings))
    waiting = database.waiting_work(settings)
    counts["documents_queued"] = waiting[0] if waiting is not None else 0
    return counts


def _lent_by(readers: Sequence[DocumentStore]) -> Callable[[Sequence[str]], dict[str, str]] | None:
    """For ``.prompt``: documents the read scopes have, first scope first (None: none)."""
    if not readers:
        return None

    def lent(paths: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for store in readers:
            for path in paths:
                if path not in found and (document := store.find_document(path)) is not None:
                    found[path] = document.content
        return found

    return lent
