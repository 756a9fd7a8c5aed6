"""The save path: a dirty buffer written through to the database, in one place.

Flush, fsync, close, a truncate by path, a rename carrying pending changes and unmount
all save through ``Commits.commit``: IronClaw's write (``Lookups.commit_document``), merged
with another writer's change where the merge owner (``memfs.vfs.merging``) finds one,
its writer's bytes kept by the safety net whenever what is stored is not them, and the
content kept (``memfs.vfs.unsaved``) when the database does not take it.

Lock order (``memfs.vfs.state``): the namespace lock first, then the buffer's.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Protocol

from memfs.cache import ContentCache
from memfs.db.interface import CommitResult, FileAttrs, SaveOptions
from memfs.db.records import Write
from memfs.errors import FsError, WriteRefused
from memfs.ironclaw.hashing import bytes_hash
from memfs.kernel import KernelNotifier
from memfs.merge import MERGE_LIMIT
from memfs.tree import FileNode, to_ns
from memfs.vfs.base import log
from memfs.vfs.buffers import FileBuffer
from memfs.vfs.committed import CommittedContent
from memfs.vfs.merging import Merges, SaverBase, stale_save
from memfs.vfs.roles import Caching, Committing, Describing, SaverTables, Stateful
from memfs.vfs.save_tables import SaverBases
from memfs.vfs.state import MountState
from memfs.vfs.unsaved import UnsavedFiles


@dataclass(frozen=True, slots=True)
class Saving:
    """One save on its way: the file, its buffer, where it goes and what its writer wrote
    (``ours``, of the buffer's ``generation``); ``final``: no descriptor writes after it."""

    node: FileNode
    buffer: FileBuffer
    path: str
    ours: str
    generation: int
    final: bool


class CommitLookups(Stateful, Caching, SaverTables, Committing, Describing, Protocol):
    """What commits ask of the lookups: IronClaw's write of a document, names for log
    lines, and the mount's state, caches and kernel."""


class Commits:
    """Commit a document's buffer; drop content that cannot be stored."""

    def __init__(
        self,
        lookups: CommitLookups,
        merges: Merges,
        committed: CommittedContent,
        unsaved: UnsavedFiles,
    ) -> None:
        #: IronClaw's write of a document, and names for log lines.
        self.lookups = lookups
        #: Every decision between a save and another writer's change.
        self.merges = merges
        #: The row's bytes, to show again after a refusal.
        self.committed = committed
        #: Where content the database did not take is kept.
        self.unsaved = unsaved
        self.state: MountState = lookups.state
        self.cache: ContentCache = lookups.cache
        self.bases: SaverBases = lookups.bases
        self.kernel: KernelNotifier = lookups.kernel

    async def commit_or_keep(self, node: FileNode) -> None:
        """Commit for close(2) or fsync(2); if the database does not take it, the content is
        on local disk before the caller hears EIO (release, which comes later and
        asynchronously, would retry and keep it too late for a caller that looks).  Content
        refused leaves the buffer as it is (the descriptor may go on writing) until the
        last close."""
        try:
            await self.commit(node, final=False)
        except FsError as exc:
            if exc.errno != errno.EILSEQ and not isinstance(exc, WriteRefused):
                self.unsaved.keep(node, exc.reason)
            raise

    async def commit(self, node: FileNode, *, final: bool = True) -> None:
        """Write a dirty document through to the database (flush, fsync, close, unmount).

        Content the database refuses is dropped (``_reject``) when ``final``; otherwise
        (flush, fsync: descriptors may still write) the buffer is kept unchanged for the
        next commit.  A file with no row yet (new, or unbound by another writer's delete)
        is placed by its path, under the namespace lock, taken before the buffer's (the
        lock order of ``memfs.vfs.state``; a rename holding it may call this)."""
        while True:
            buffer = self.state.buffers.get(node.ino)
            if not isinstance(buffer, FileBuffer) or not buffer.dirty or node.scratch:
                return
            if node.doc_id is None and not self.state.holding_ns_lock():
                async with self.state.ns_lock:  # then the buffer's, in this call
                    await self.commit(node, final=final)
                return
            async with buffer.lock:
                if node.doc_id is None and not self.state.holding_ns_lock():
                    continue  # unbound while this waited: the locks again, in order
                await self._commit_locked(node, buffer, final)
                return

    async def content_now(self, node: FileNode) -> bytes:
        """The file's content as it stands, its pending changes committed first (a file
        about to leave memory or take a scratch name)."""
        await self.commit(node)
        buffer = self.state.buffers.get(node.ino)
        if buffer is not None:
            return buffer.snapshot()
        if node.doc_id is not None:
            return await self.committed.read(node)
        return b""

    async def _commit_locked(self, node: FileNode, buffer: FileBuffer, final: bool) -> None:
        """``commit``'s work, under the buffer's lock (and the namespace lock if the file
        has no row)."""
        if not buffer.dirty:
            return
        if node.parent is None:
            buffer.dirty = False  # unlinked while open: nothing to keep
            self.unsaved.saved(node)
            return
        try:
            text, generation = buffer.commit_text()
        except FsError as exc:
            await self._refuse_content(node, exc, final)
            raise
        attrs = FileAttrs(node.custom_mode, node.client_mtime_ns)
        path = self.state.tree.path_of(node)
        ours = text
        try:
            text, result, merged = await self._save_text(node, buffer, path, text, attrs)
        except WriteRefused as exc:
            await self._refuse_content(node, exc, final)
            raise
        self._adopt(Saving(node, buffer, path, ours, generation, final), text, result, merged)

    async def _save_text(
        self, node: FileNode, buffer: FileBuffer, path: str, text: str, attrs: FileAttrs
    ) -> tuple[str, CommitResult, bool]:
        """IronClaw's write of ``text`` at ``path``: one engine call, merged under the row
        lock with another writer's change the buffer's writer had not seen where it can be
        (``memfs.vfs.merging``), the writer's bytes kept by the safety net if they are not
        what is stored.  The text stored, the commit's result, and whether it is a merge."""
        how = self._how_to_save(node, buffer, path, text)
        result = await self.lookups.commit_document(Write(node.doc_id, path, text), attrs, how)
        locked = await self.merges.committed_merge(path, text, result)
        if locked is not None and locked[0] != text:
            return locked[0], result, True
        return text, result, False

    def _how_to_save(self, node: FileNode, buffer: FileBuffer, path: str, ours: str) -> SaveOptions:
        """The save's guard and merge (``memfs.vfs.merging``): a file with no row yet
        (the namespace lock is held, ``commit``) whose writer found none there or only
        appends (``>>``) is merged after a document another writer made meanwhile; a
        conditional save (``FileBuffer.only_at``) is never merged (rule 4): refused where
        the mount has heard of another writer's change since that version, and by the
        engine, under the row lock, where the row has one it has not."""
        if node.doc_id is None:
            from_nothing = buffer.appends_only or buffer.absent_path == path
            merge = self.merges.merge_function(path, b"", ours) if from_nothing else None
            return SaveOptions(merge=merge, stale_base=merge is not None)
        if buffer.only_at is not None:
            if buffer.others_changed or node.updated_at != buffer.only_at:
                raise stale_save(path)
            return SaveOptions(expected=node.updated_at, merge=self.merges.refuse_changed(path))
        base = SaverBase(buffer.base, buffer.base_digest, buffer.base_version, node.updated_at,
                         buffer.others_changed)  # fmt: skip
        merge, stale = self.merges.save_merge(node.doc_id, path, base, ours)
        return SaveOptions(expected=node.updated_at, merge=merge,
                           stale_base=stale and merge is not None)  # fmt: skip

    def _adopt(self, save: Saving, stored: str, result: CommitResult, merged: bool) -> None:
        """The file is the row the commit left (another writer's change kept aside, or
        merged in), and is bound to it last."""
        node, path = save.node, save.path
        if result.conflict:
            log.warning(
                "%r changed in the database after it was opened here; the other change "
                "is kept as %s and this save is the current content",
                path,
                result.conflict,
            )
        if result.changed and node.updated_at is not None and self.bases.tracks(result.doc_id):
            self.bases.superseded(result.doc_id, node.updated_at,
                                  self.cache.get(result.doc_id, node.updated_at))  # fmt: skip
        node.updated_at = result.updated_at
        if merged and not result.conflict:
            self._saved_merged(save, stored, result)
        else:
            self._saved_as_written(save, result)
        if node.parent is not None:
            self.state.tree.bind_document(node, result.doc_id)
        else:
            node.doc_id = result.doc_id

    def _saved_merged(self, save: Saving, merged: str, result: CommitResult) -> None:
        """The row holds a merge: the writer's base is what it wrote (no row holds it)."""
        buffer = save.buffer
        self.bases.saw(save.path, buffer.writer, result.doc_id, None, save.ours.encode("utf-8"))
        self._show_merged(save, merged, result)
        buffer.mark_clean(save.generation)
        if not buffer.dirty:
            self.unsaved.saved(save.node)
        log.debug("committed %r (%s): merged, previous content versioned", save.path,
                  result.doc_id)  # fmt: skip

    def _saved_as_written(self, save: Saving, result: CommitResult) -> None:
        """The row holds the writer's bytes (``ours``): they are its base, the cache's entry
        and what the kernel holds; the buffer is clean unless written since."""
        node, buffer, path, generation = save.node, save.buffer, save.path, save.generation
        # One copy of the committed bytes serves as the writers' base and the cache entry.
        same = buffer.generation == generation
        committed = buffer.snapshot() if same else save.ours.encode("utf-8")
        buffer.base = committed if len(committed) <= MERGE_LIMIT else None
        buffer.base_version, buffer.base_digest = result.updated_at, None
        buffer.others_changed, buffer.unshown_merge = False, None
        self.bases.saw(path, buffer.writer, result.doc_id, result.updated_at,
                       digest=bytes_hash(committed) if buffer.writer > 0 else None)  # fmt: skip
        if same and self.cache.accepts(len(committed)):
            self.cache.put(result.doc_id, result.updated_at, committed)
        else:
            self.cache.drop(result.doc_id)
        node.kernel_version = result.updated_at
        if node.client_mtime_ns is None and result.changed:
            node.mtime_ns = node.ctime_ns = to_ns(result.updated_at)
        buffer.mark_clean(generation)
        if not buffer.dirty:
            self.unsaved.saved(node)
        log.debug(
            "committed %r (%s): %s%s",
            path,
            result.doc_id,
            "created" if result.created else ("updated" if result.changed else "unchanged"),
            ", previous content versioned" if result.versioned else "",
        )

    @staticmethod
    def _base_of(text: str) -> bytes | None:
        data = text.encode("utf-8")
        return data if len(data) <= MERGE_LIMIT else None

    def _show_merged(self, save: Saving, merged: str, result: CommitResult) -> None:
        """After a merged save: the mount shows the merged row once no descriptor writes
        to the file any more; until then its writers keep their own bytes, which the next
        save merges again (their base is what they wrote, no row holds it)."""
        node, buffer, version = save.node, save.buffer, result.updated_at
        data = merged.encode("utf-8")
        if self.cache.accepts(len(data)):
            self.cache.put(result.doc_id, version, data)
        if (
            save.final
            and buffer.generation == save.generation
            and not self.state.open_for_writing(node)
        ):
            shown = FileBuffer.of_row(data, version)
            self.state.take_others_content(node, shown)
            node.size = len(data)
        else:
            buffer.base, buffer.base_version = self._base_of(save.ours), None
            buffer.base_digest = None
            buffer.unshown_merge = version
        buffer.others_changed = False
        node.kernel_version = None
        self.kernel.attributes(node.ino)
        self.kernel.inode(node.ino)

    async def _refuse_content(self, node: FileNode, exc: FsError, final: bool) -> None:
        if final:
            await self.reject(node, exc)
        else:
            log.error("not saving %s: %s; the database keeps its previous content (the file "
                      "shows what was written until its last close)",
                      self.lookups.describe_node(node), exc.reason)  # fmt: skip

    async def reject(self, node: FileNode, exc: FsError) -> None:
        """Content that cannot be stored: drop every uncommitted change of the file.

        The database keeps its previous content and the mount shows that content again; a
        file that never reached the database disappears.  The caller reports ``exc``.
        """
        what = self.lookups.describe_node(node)
        log.error("not saving %s: %s; the database keeps its previous content", what, exc.reason)
        buffer = self.state.buffers.pop(node.ino, None)
        if isinstance(buffer, FileBuffer):
            buffer.dirty = False
        self.unsaved.saved(node)
        if node.doc_id is None:
            # Never reached the database: the file disappears rather than exist empty, and
            # the kernel forgets its cached entry (or later writes would reach a dead inode).
            # Its open handles fail from now on, and until the kernel's entry is gone a
            # stat through the old name gets ESTALE (looked up again: ENOENT).
            for handle in self.state.handles.values():
                if handle.node is node and handle.failed is None:
                    handle.failed = exc
            async with self.state.ns_locked():
                parent = node.parent
                if parent is not None:
                    name = node.name
                    self.state.tree.detach(node)
                    self.kernel.entry(parent.ino, name)
            return
        # Back to the committed content, so the mount shows what the database holds (a
        # change another writer made meanwhile included: the save it waited for is gone).
        stale = exc.errno == errno.ESTALE  # a conditional save found the row changed
        changed = stale or (isinstance(buffer, FileBuffer) and buffer.others_changed)
        try:
            data = await self.committed.read(node, latest=changed)
        except FsError:
            data = b""
        node.size = len(data)
        restored = FileBuffer.of_row(data, node.updated_at)
        for handle in self.state.handles.values():
            if handle.node is node:
                handle.buffer, handle.unloaded = restored, False
        if node.open_count > 0:
            self.state.buffers[node.ino] = restored
        node.kernel_version = None

    async def commit_all(self) -> None:
        """Commit every dirty buffer (at unmount); what fails is kept for recovery."""
        nodes = {h.node.ino: h.node for h in self.state.handles.values()}
        nodes.update(self.state.unsaved)
        for ino, buffer in list(self.state.buffers.items()):
            if buffer.dirty and ino in self.state.tree.inodes:
                node = self.state.tree.inodes[ino]
                if isinstance(node, FileNode):
                    nodes[ino] = node
        for node in nodes.values():
            try:
                await self.commit(node)
            except FsError as exc:
                if exc.errno != errno.EILSEQ and not isinstance(exc, WriteRefused):
                    self.unsaved.keep(node, f"could not save at unmount: {exc.reason}")
