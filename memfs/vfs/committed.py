"""A document's committed content: from the content cache, or the database with the
neighbours a reader is likely to open next (``CommittedContent.read``)."""

from __future__ import annotations

from typing import Protocol
from uuid import UUID

from memfs.cache import ContentCache
from memfs.errors import DocumentGone
from memfs.kernel import KernelNotifier
from memfs.tree import FileNode, to_ns
from memfs.vfs.roles import StoreAccess
from memfs.vfs.state import MountState

#: Read-ahead on a cold open: at most this many neighbours, and this many bytes.
READ_AHEAD_DOCUMENTS = 512
READ_AHEAD_BYTES = 8 * 1024 * 1024


class ReadLookups(StoreAccess, Protocol):
    """What committed reads ask of the lookups: the store, and marking a node another
    writer changed."""

    def mark_node_contended(self, node: FileNode) -> None: ...


class CommittedContent:
    """Reads of what the database holds, through the content cache."""

    def __init__(
        self, lookups: ReadLookups, state: MountState, cache: ContentCache, kernel: KernelNotifier
    ) -> None:
        #: Database access, and marking a node another writer changed.
        self.lookups = lookups
        self.state = state
        self.cache = cache
        self.kernel = kernel

    async def read(self, node: FileNode, *, latest: bool = False) -> bytes:
        """The document's committed content, from the cache or the database; ``latest``:
        from the database, the node brought to the row's version (another writer's change
        the node has not taken yet, e.g. one heard of while a refused save held it)."""
        while True:
            assert node.doc_id is not None
            data = None if latest else self.cache.get(node.doc_id, node.updated_at)
            latest = False
            if data is not None:
                return data
            doc_id, shown = node.doc_id, node.updated_at
            neighbours = self._uncached_neighbours(node)
            near = self.state.tree.path_of(node) if node.parent is not None else None
            rows = await self.lookups.db.run_db(
                self.lookups.store.read_contents, [doc_id, *neighbours], near
            )
            for other, (other_data, other_version) in rows.items():
                # keyed by version, so never served stale
                self.cache.put(other, other_version, other_data)
            if node.doc_id != doc_id or node.updated_at == shown:
                break
            # Saved or renamed here while the row was on its way: it may be older than what
            # the node shows now, so the node's own version is looked up again.
        row = rows.get(doc_id)
        if row is None:
            raise DocumentGone(doc_id)
        data, version = row
        if node.doc_id == doc_id and version != node.updated_at:
            # Another writer's change, read before its change-feed event arrived: the
            # event will find nothing new, so the kernel's cached size and pages are
            # dropped here (queued; the notifier thread does it outside this request).
            node.updated_at = version
            node.size = len(data)
            if node.client_mtime_ns is None:
                node.mtime_ns = to_ns(version)
            node.kernel_version = None
            self.lookups.mark_node_contended(node)
            self.kernel.attributes(node.ino)  # safe inside a request: no kernel lock
            self.kernel.inode(node.ino)
        return data

    def _uncached_neighbours(self, node: FileNode) -> list[UUID]:
        """Documents beside ``node`` worth reading in the same round trip.

        A reader that opens one file of a directory (``grep -r``, ``cat *``, rsync, tar)
        usually opens the others next: their contents come along, up to a quarter of the
        cache, so a cold tree costs a round trip per directory instead of one per file.
        """
        if node.parent is None:
            return []
        budget = min(self.cache.capacity // 4, READ_AHEAD_BYTES)
        chosen: list[UUID] = []
        for other in node.parent.children.values():
            if (
                type(other) is not FileNode
                or other is node
                or other.doc_id is None
                or other.scratch
                or other.ino in self.state.buffers
                or other.size > budget
                or self.cache.holds(other.doc_id, other.updated_at)
            ):
                continue
            budget -= other.size
            chosen.append(other.doc_id)
            if len(chosen) >= READ_AHEAD_DOCUMENTS or budget <= 0:
                break
        return chosen
