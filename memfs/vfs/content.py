"""File content: open handles, buffers, reads and writes, and commits to the database.

Documents are buffered per inode (all handles share one ``FileBuffer``) and committed on
flush, fsync and release when dirty.  Scratch files have a ``ScratchBuffer`` that is never
committed and lives as long as the file does.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import stat
from pathlib import Path
from typing import Any
from uuid import UUID

from memfs.buffers import FileBuffer, ScratchBuffer
from memfs.db.interface import CommitResult, FileAttrs
from memfs.errors import DocumentGone, FsError, WriteRefused
from memfs.ironclaw.hashing import bytes_hash
from memfs.merge import MERGE_LIMIT, mergeable
from memfs.private import write_private
from memfs.tree import SYNTHETIC, FileNode, Node, ScopedFile, SyntheticFile, to_ns
from memfs.vfs.base import Attributes, Lookups, ModelPart, log, refuse_stale
from memfs.vfs.extensions import RootFile
from memfs.vfs.merging import Merges, RowMerge
from memfs.vfs.save_tables import Base
from memfs.vfs.state import CONTENDED_SECONDS, Buffer, Handle

#: The largest document a mount saves (EFBIG at the write that would pass it; the bytes
#: received are kept in the recovery area).  Every engine commits a document of this size,
#: chunks and full-text index included, well within a call's deadline (12 s); IronClaw's
#: own memory documents are kilobytes.  ``MEMFS_MAX_DOCUMENT_BYTES`` changes it.
DOCUMENT_MAX_BYTES = int(os.environ.get("MEMFS_MAX_DOCUMENT_BYTES", str(8 << 20)))

#: Read-ahead on a cold open: at most this many neighbours, and this many bytes.
READ_AHEAD_DOCUMENTS = 512
READ_AHEAD_BYTES = 8 * 1024 * 1024


class Contents(ModelPart):
    """Open, read, write, truncate and commit."""

    def __init__(self, lookups: Lookups, merges: Merges) -> None:
        super().__init__(lookups)
        #: Every decision between a save and another writer's change (``memfs.vfs.merging``).
        self.merges = merges
        #: The path each unsaved inode's copy is kept under in the recovery area.
        self._kept: dict[int, str] = {}
        #: Unsaved files whose content ``drain`` wrote to a folder the user named.
        self.drained: dict[int, str] = {}

    def describe_node(self, node: Node) -> str:
        """The node's path for a log line or a report (``Lookups.describe_node``)."""
        return self.lookups.describe_node(node)

    def open_handle(self, node: FileNode, buffer: Buffer, writable: bool, flags: int = 0) -> int:
        fh = self.state.new_fh()
        self.state.handles[fh] = Handle(node, buffer, writable, append=bool(flags & os.O_APPEND))
        node.open_count += 1
        self.saves.opened(node.ino)
        return fh

    def _handle(self, fh: int) -> Handle:
        try:
            return self.state.handles[fh]
        except KeyError:
            raise FsError(errno.EBADF) from None

    async def committed_bytes(self, node: FileNode) -> bytes:
        """The document's committed content, from the cache or the database."""
        while True:
            assert node.doc_id is not None
            data = self.cache.get(node.doc_id, node.updated_at)
            if data is not None:
                return data
            doc_id, shown = node.doc_id, node.updated_at
            neighbours = self._uncached_neighbours(node)
            near = self.state.tree.path_of(node) if node.parent is not None else None
            rows = await self.lookups.run_db(self.store.read_contents, [doc_id, *neighbours], near)
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

    async def content_now(self, node: FileNode) -> bytes:
        """The file's content as it stands, its pending changes committed first (a file
        about to leave memory or take a scratch name)."""
        await self.commit(node)
        buffer = self.state.buffers.get(node.ino)
        if buffer is not None:
            return buffer.snapshot()
        if node.doc_id is not None:
            return await self.committed_bytes(node)
        return b""

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

    async def _buffer(self, node: FileNode, *, load: bool = True) -> Buffer:
        """The node's shared buffer, loading committed content from cache or database."""
        buffer = self.state.buffers.get(node.ino)
        if buffer is not None:
            return buffer
        if isinstance(node, ScopedFile):
            buffer = FileBuffer(await self.lookups.synthetic_content(node))
            node.size = len(buffer)
        elif isinstance(node, SyntheticFile):
            buffer = FileBuffer(node.data)
        elif node.scratch:
            buffer = ScratchBuffer(self.spill)
        elif node.doc_id is None:
            buffer = FileBuffer(b"", dirty=True)
        elif not load:
            buffer = FileBuffer(b"", dirty=node.size != 0, truncated=True)
        else:
            data = await self.committed_bytes(node)
            existing = self.state.buffers.get(node.ino)
            if existing is not None:  # another open loaded it while we waited
                return existing
            if node.size != len(data):  # never a size the bytes do not fill, or exceed
                log.warning("%s: its size was %d, its content %d bytes; the content's size is "
                            "shown", self.lookups.describe_node(node), node.size,
                            len(data))  # fmt: skip
                node.size = len(data)
                self.kernel.attributes(node.ino)
            buffer = FileBuffer.of_row(data, node.updated_at)
        self.state.buffers[node.ino] = buffer
        return buffer

    async def open(self, ino: int, flags: int, pid: int = 0) -> tuple[int, bool]:
        """Open a file for process ``pid`` (0: unknown); returns (fh, keep_cache)."""
        node = self.state.tree.get_file(ino)
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        self._check_openable(node, writable)
        files = self.lookups.root_file_of(node)  # every open asks: no await unless it is one
        if files is not None:
            made = await self._made_at_open(node, files)
            if made is not None:
                return made
        if not writable and self._kernel_holds(node):
            unloaded = self._open_unloaded(node, pid)
            if unloaded is not None:
                return unloaded, True
        truncate = writable and bool(flags & os.O_TRUNC)
        buffer = await self._open_buffer(node, truncate)
        if not (writable and flags & os.O_APPEND):  # an append's base is what it loaded
            self._note_base(node, buffer, pid, writable=writable, truncate=truncate)
            if writable and isinstance(buffer, FileBuffer):
                buffer.appends_only = False
        if truncate:
            self._emptied_at_open(node, buffer)
        fh = self.open_handle(node, buffer, writable, flags)
        if self.state.contended and node.parent is not None:
            self._snapshot_if_contended(node, self.state.handles[fh], writable)
        keep_cache = self._tell_kernel(node, buffer, writable=writable, truncate=truncate)
        if log.isEnabledFor(logging.DEBUG) and type(node) is FileNode:
            # What the kernel is told at each open: the trail of a stale read.
            log.debug("open %r by %d (flags %o): version %s, kernel cache %s, %d bytes%s%s",
                      node.name, pid, flags, node.updated_at, "kept" if keep_cache else
                      "dropped", len(buffer), " (not saved yet)" if buffer.dirty else "",
                      " (older bytes served until the next stat)" if ino in self.state.served
                      else "")  # fmt: skip
        return fh, keep_cache

    def _emptied_at_open(self, node: FileNode, buffer: Buffer) -> None:
        """``O_TRUNC``: the file is empty from this open on (saved at its close)."""
        if len(buffer) > 0:
            buffer.truncate(0)
        node.size = 0
        node.client_mtime_ns = None
        node.mtime_ns = node.ctime_ns = self.clock()

    def _check_openable(self, node: FileNode, writable: bool) -> None:
        """ESTALE for a file no name leads to any more; EROFS for a write to a read-only
        mount or a synthetic file."""
        if node.parent is None or self.lookups.drop_displaced(node):
            refuse_stale(node)
        if writable:
            self.lookups.refuse_if_read_only()
        if writable and isinstance(node, SyntheticFile):
            raise FsError(errno.EROFS, "search results are read-only")

    async def _open_buffer(self, node: FileNode, truncate: bool) -> Buffer:
        """The buffer an open serves (loaded unless the open truncates); ESTALE if
        another writer's removal came first."""
        try:
            buffer = await self._buffer(node, load=not truncate)
        except DocumentGone as gone:
            # What the removal's event will say, under the namespace lock as the event is
            # applied: a rename awaiting the database holds it, and its target may be this.
            async with self.state.ns_lock:
                self.lookups.apply_deletion(gone.doc_id)
            what = self.lookups.describe_node(node)
            raise FsError(errno.ESTALE, f"{what} was deleted elsewhere") from gone
        if node.parent is None:
            # Another writer's removal arrived while the content loaded: the kernel looks
            # the name up again, so an O_CREAT open creates the file anew (on one disk the
            # open came after the removal) instead of writing where no name leads.
            self._drop_idle_buffer(node)
            refuse_stale(node)
        return buffer

    def _snapshot_if_contended(self, node: FileNode, handle: Handle, writable: bool) -> None:
        """A reader of a file another writer changed moments ago reads a snapshot (the
        bytes of this open), whatever that writer does next (``mark_contended``)."""
        path = self.state.tree.path_of(node)
        changed = self.state.contended.get(path)
        if changed is not None and self.monotonic() - changed > CONTENDED_SECONDS:
            del self.state.contended[path]
        elif changed is not None and not writable and type(node) is FileNode:
            handle.snapshot = True

    def _tell_kernel(
        self, node: FileNode, buffer: Buffer, *, writable: bool, truncate: bool
    ) -> bool:
        """Whether the kernel may keep the pages it holds of the file (the version it was
        last told is the version shown); the size it holds is corrected if need be."""
        version = node.updated_at
        keep_cache = not truncate and version is not None and node.kernel_version == version
        node.kernel_version = version
        if not writable and version is not None and isinstance(buffer, FileBuffer):
            self._remember_kernel_digest(node, version, buffer)
        if not keep_cache and not truncate and node.told_size != len(buffer):
            # The kernel may cache another size than the content this open serves (a
            # cold open of what it was told the size of asks nothing: ``grep -r`` saves a
            # getattr per file).
            self.kernel.attributes(node.ino)
        return keep_cache

    def _kernel_holds(self, node: FileNode) -> bool:
        """Whether a reader's open may leave the content unloaded: the kernel holds the
        pages of the version shown (it asks for a read only if it dropped them), nothing
        here holds other bytes of the file, and no other writer changed it moments ago (its
        reader gets a snapshot).  A warm ``grep -r`` then costs the daemon one request per
        file and no database read, whatever the content cache holds."""
        if type(node) is not FileNode or node.scratch or node.doc_id is None:
            return False
        if node.parent is None or node.ino in self.state.buffers or node.ino in self.state.served:
            return False
        version = node.updated_at
        if version is None or node.kernel_version != version:
            return False
        return not self.state.contended or self.state.tree.path_of(node) not in self.state.contended

    def _remember_kernel_digest(self, node: FileNode, version: Any, buffer: FileBuffer) -> None:
        """The hash of the version a reader's open gives the kernel, for later readers'
        unloaded opens (their saves' base must be known by its bytes)."""
        if type(node) is not FileNode or buffer.dirty or buffer.unshown_merge is not None:
            return
        if node.digest_version == version:
            return
        data = buffer.base if buffer.base_version == version else None
        if data is None and node.doc_id is not None:
            data = self.cache.get(node.doc_id, version)
        if data is not None:
            node.digest_version, node.kernel_digest = version, hashlib.sha256(data).digest()

    def _open_unloaded(self, node: FileNode, pid: int) -> int | None:
        """A reader's handle whose content is loaded at its first read (``read``); its
        base for a later save is the version shown, by the hash of the bytes the kernel
        was given (``_note_base`` of a loaded one).  None when that hash is not known."""
        doc_id, version = node.doc_id, node.updated_at
        known = node.kernel_digest
        if known is None or node.digest_version != version:
            return None
        fh = self.open_handle(node, FileBuffer(b""), False)
        self.state.handles[fh].unloaded = True
        digest = "sha256:" + known.hex()
        self.bases.read(self.state.tree.path_of(node), pid, doc_id, version, lambda: digest)
        return fh

    async def _made_at_open(self, node: FileNode, files: RootFile) -> tuple[int, bool] | None:
        """A root file whose bytes are made for each open (``.status``): served from a
        buffer of their own, with direct I/O (None: its bytes are the node's own)."""
        assert isinstance(node, SyntheticFile)
        data = await files.content_at_open(node, self)
        if data is None:
            return None
        fh = self.open_handle(node, FileBuffer(data), False)
        self.state.handles[fh].snapshot = True
        self.kernel.attributes(node.ino)
        return fh, False

    def direct_io(self, fh: int) -> bool:
        """Whether the kernel must send every read of ``fh`` here (no page cache)."""
        return self._handle(fh).snapshot

    def flushes(self, fh: int) -> bool:
        """Whether a close of ``fh`` must wait for ``flush`` here: a writer's does (its
        save, and its error); a reader's close reports nothing (``flush``), so the kernel
        need not ask (``FOPEN_NOFLUSH``) and the reader's close costs no request."""
        return self._handle(fh).writable

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        handle = self._handle(fh)
        if handle.unloaded:
            await self._load_unloaded(handle)
        if handle.snapshot:
            return handle.buffer.read(offset, size)
        return self.state.served.get(handle.node.ino, handle.buffer).read(offset, size)

    async def _load_unloaded(self, handle: Handle) -> None:
        """The content of a reader's handle opened unloaded: the kernel dropped its pages
        (or the file changed since, and the kernel was told to drop them)."""
        node = handle.node
        try:
            buffer = await self._buffer(node)
        except DocumentGone as gone:
            async with self.state.ns_lock:
                self.lookups.apply_deletion(gone.doc_id)
            what = self.lookups.describe_node(node)
            raise FsError(errno.ESTALE, f"{what} was deleted elsewhere") from gone
        if handle.unloaded:  # not given a buffer meanwhile (another writer's content)
            handle.buffer, handle.unloaded = buffer, False

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        handle = self._handle(fh)
        if not handle.writable:
            raise FsError(errno.EBADF)
        if handle.failed is not None:
            raise handle.failed
        node = handle.node
        if handle.append:
            offset = len(handle.buffer)
        if offset + len(data) > DOCUMENT_MAX_BYTES and not node.scratch:  # a document
            await self._refuse_too_large(handle, offset + len(data))
        try:
            written = handle.buffer.write(offset, data)
        except FsError as exc:
            handle.failed = exc
            await self._reject(node, exc)
            raise
        node.size = len(handle.buffer)
        node.client_mtime_ns = None
        node.mtime_ns = node.ctime_ns = self.clock()
        self.state.served.pop(node.ino, None)  # written here: this content is the one to read
        return written

    @staticmethod
    def _too_large(size: int) -> FsError:
        """EFBIG for a document of ``size`` bytes (scratch and tool-folder files are not
        documents: they are scratch)."""
        return FsError(
            errno.EFBIG,
            f"a document may hold at most {DOCUMENT_MAX_BYTES} bytes "
            f"(MEMFS_MAX_DOCUMENT_BYTES); this change would make it {size}",
        )

    async def _refuse_too_large(self, handle: Handle, size: int) -> None:
        """EFBIG for a write past ``DOCUMENT_MAX_BYTES``, before it is made: the bytes
        received so far go to the recovery area, the database keeps its content, and the
        handle fails from now on (no prefix is ever saved as the document)."""
        node = handle.node
        exc = self._too_large(size)
        received = handle.buffer.snapshot() if isinstance(handle.buffer, FileBuffer) else None
        if self.recovery is not None and received and node.parent is not None:
            with contextlib.suppress(OSError):
                stored = self.recovery.keep(self.state.tree.path_of(node), received, exc.reason)
                log.error("%s: the %d bytes written before the refusal are kept in %s",
                          self.lookups.describe_node(node), len(received), stored)  # fmt: skip
        handle.failed = exc
        await self._reject(node, exc)
        raise exc

    async def flush(self, fh: int) -> None:
        """Commit at close(2) so errors reach the caller.

        A new file nothing was written to yet is left for ``release``: shells send a flush
        before the first write (``>`` dup2s and closes the original descriptor), and
        committing then would insert an empty row and update it a moment later.
        """
        handle = self._handle(fh)
        if handle.failed is not None:
            raise handle.failed
        if not handle.writable:
            return  # a reader's close reports nothing about other handles' unsaved changes
        node = handle.node
        if node.doc_id is None and len(handle.buffer) == 0:
            return
        buffer = handle.buffer
        if isinstance(buffer, FileBuffer) and buffer.dirty and buffer.truncated_only:
            # A shell's ``>`` truncates, dup2s and closes before it writes: what it writes
            # is one IronClaw write, at the next flush after data or at release.
            self._refuse_lone_truncation(node, buffer)
            return
        await self._commit_or_keep(node)

    def _refuse_lone_truncation(self, node: FileNode, buffer: FileBuffer) -> None:
        """A close whose only change is emptying a file IronClaw may not empty fails
        (EINVAL); the buffer stays truncated, so what a redirect writes next lands in it."""
        if node.doc_id is None or node.parent is None:
            return
        try:
            text, _ = buffer.commit_text()
        except FsError:
            return  # release decides
        refused = self.store.content_problem(self.state.tree.path_of(node), text)
        if refused is not None:
            log.error("not saving %s as truncated: %s; unless more is written before its last "
                      "close, the database keeps its previous content",
                      self.lookups.describe_node(node), refused.reason)  # fmt: skip
            raise refused

    async def fsync(self, fh: int) -> None:
        handle = self._handle(fh)
        if handle.failed is not None:
            raise handle.failed
        if self._held_by_a_writer(handle):
            return  # as at a reader's close: a writer's half-written buffer is not a save
        await self._commit_or_keep(handle.node)

    def _held_by_a_writer(self, handle: Handle) -> bool:
        """A reader's close or fsync commits nothing a writer still holds open (nano's
        in-place rewrite, half written): that writer's close commits it whole; with no
        writer left it retries what a close could not save.  The open handles are looked
        through only when there is a change to commit (a clean close is most closes)."""
        if handle.writable:
            return False
        buffer = self.state.buffers.get(handle.node.ino)
        if not isinstance(buffer, FileBuffer) or not buffer.dirty:
            return False
        return self.state.open_for_writing(handle.node)

    async def _commit_or_keep(self, node: FileNode) -> None:
        """Commit for close(2) or fsync(2); if the database does not take it, the content is
        on local disk before the caller hears EIO (release, which comes later and
        asynchronously, would retry and keep it too late for a caller that looks).  Content
        refused leaves the buffer as it is (the descriptor may go on writing) until the
        last close."""
        try:
            await self.commit(node, final=False)
        except FsError as exc:
            if exc.errno != errno.EILSEQ and not isinstance(exc, WriteRefused):
                self._keep_unsaved(node, exc.reason)
            raise

    async def release(self, fh: int) -> None:
        handle = self.state.handles.pop(fh, None)
        if handle is None:
            return
        node = handle.node
        try:
            if not self._held_by_a_writer(handle):
                await self.commit(node)
        except FsError as exc:
            if exc.errno != errno.EILSEQ and not isinstance(exc, WriteRefused):
                self._keep_unsaved(node, exc.reason)
        finally:
            self.state.tree.release_handle(node)
            if handle.writable:
                await self._show_unshown_merge(node)
            if node.open_count == 0:
                self.saves.closed(node.ino)
                self._drop_if_deleted_elsewhere(node)
            self._drop_idle_buffer(node)
            self.lookups.drop_if_freed(node.ino)

    async def _show_unshown_merge(self, node: FileNode) -> None:
        """The last writer closed a file whose row is a merge its writers did not see
        (``_show_merged``): the mount shows the row now, at the row's size (the buffer's
        size with the row's bytes would serve a truncated merge)."""
        buffer = self.state.buffers.get(node.ino)
        if not isinstance(buffer, FileBuffer) or buffer.unshown_merge is None:
            return
        if buffer.dirty or self.state.open_for_writing(node):
            return  # the next commit merges again, or the last close shows it
        version, buffer.unshown_merge = buffer.unshown_merge, None
        if node.doc_id is None or version != node.updated_at:
            return
        try:
            data = await self.committed_bytes(node)
        except FsError:
            return  # gone meanwhile: the removal's event updates the file
        if self.state.buffers.get(node.ino) is not buffer or buffer.dirty:
            return  # opened and written again while the row was read
        shown = FileBuffer.of_row(data, node.updated_at)
        self.take_others_content(node, shown)
        node.size = len(data)
        node.kernel_version = None
        self.kernel.attributes(node.ino)
        self.kernel.inode(node.ino)

    def _drop_if_deleted_elsewhere(self, node: FileNode) -> None:
        """The last close of a file another writer deleted while it was open for writing
        here: gone now, unless something written to it was saved anew."""
        if node.ino not in self.state.deleted_while_open:
            return
        self.state.deleted_while_open.discard(node.ino)
        buffer = self.state.buffers.get(node.ino)
        if (
            node.doc_id is None
            and node.parent is not None
            and not (isinstance(buffer, FileBuffer) and buffer.dirty)
        ):
            self.state.buffers.pop(node.ino, None)
            self.lookups.remove_deleted(node)

    def _keep_unsaved(self, node: FileNode, reason: str) -> None:
        """A commit failed: keep the content in memory (retried) and on local disk (so a
        crash or an unmount that still cannot commit loses nothing)."""
        self.state.unsaved[node.ino] = node
        buffer = self.state.buffers.get(node.ino)
        self.keep_copy(node, buffer.snapshot() if isinstance(buffer, FileBuffer) else None, reason)

    def keep_copy(self, node: FileNode, data: bytes | None, reason: str) -> None:
        """Copy content the database did not take to the recovery area (``memfs recover``)."""
        what = self.lookups.describe_node(node)
        if self.recovery is None or data is None or node.parent is None:
            log.error("changes to %s stay in memory until the database is back: %s", what, reason)
            return
        path = self.state.tree.path_of(node)
        try:
            stored = self.recovery.keep(path, data, reason)
        except OSError as exc:
            log.error("changes to %s stay in memory only (%s): %s", what, exc, reason)
            return
        if self._kept.get(node.ino, path) != path:
            self.recovery.forget(self._kept[node.ino])  # renamed since: one copy, latest name
        self._kept[node.ino] = path
        log.error(
            "changes to %s stay in memory until the database is back, and are kept in %s: %s",
            what,
            stored,
            reason,
        )

    def saved(self, node: FileNode) -> None:
        """The node's changes reached the database: nothing left to recover."""
        self.lookups.documents_changed()
        self.state.unsaved.pop(node.ino, None)
        self.drained.pop(node.ino, None)
        path = self._kept.pop(node.ino, None)
        if path is not None and self.recovery is not None:
            self.recovery.forget(path)

    def kept_copy(self, ino: int) -> str | None:
        """Where the recovery area keeps the unsaved content of ``ino`` (None: nowhere)."""
        path = self._kept.get(ino)
        if path is None or self.recovery is None:
            return None
        return str(self.recovery.run_dir / "files" / path)

    def unkept(self) -> list[str]:
        """Files whose changes are in this daemon's memory only: not in the database, not in
        the recovery area, not drained to a folder (``drain``).  Exiting would lose them."""
        return sorted(
            self.lookups.describe_node(node)
            for ino, node in self.state.unsaved.items()
            if ino not in self._kept and ino not in self.drained
        )

    def drain(self, folder: Path) -> tuple[list[str], list[str]]:
        """Write every unsaved file's content to ``folder/<workspace path>`` (0600): the
        way out when neither the database nor the recovery area takes it.  Returns the
        files written and those that could not be (with why)."""
        written: list[str] = []
        failed: list[str] = []
        for ino, node in list(self.state.unsaved.items()):
            buffer = self.state.buffers.get(ino)
            if not isinstance(buffer, FileBuffer) or node.parent is None:
                continue
            path = self.state.tree.path_of(node)
            target = folder / path
            try:
                write_private(target, buffer.snapshot(), durable=True)
            except OSError as exc:
                failed.append(f"{path}: {exc}")
                continue
            self.drained[ino] = str(target)
            written.append(str(target))
            log.warning("unsaved changes to %s written to %s", path, target)
        return written, failed

    def _drop_idle_buffer(self, node: FileNode) -> None:
        buffer = self.state.buffers.get(node.ino)
        if isinstance(buffer, FileBuffer) and node.open_count == 0 and not buffer.dirty:
            del self.state.buffers[node.ino]
            self.state.served.pop(node.ino, None)

    def take_others_content(self, node: FileNode, buffer: Buffer) -> None:
        """Another writer's content replaces the content of a file open here.  Reads keep
        the old bytes until the kernel is next told the file's attributes (``served``):
        a read it sent with the old size must not be answered with bytes of another."""
        old = self.state.buffers.get(node.ino)
        if old is not None:
            self.state.served.setdefault(node.ino, old)
        self.state.set_buffer(node, buffer)

    async def setattr(
        self,
        ino: int,
        *,
        size: int | None = None,
        mode: int | None = None,
        uid: int | None = None,
        gid: int | None = None,
        mtime_ns: int | None = None,
        fh: int | None = None,
    ) -> Attributes:
        node = self.state.tree.get(ino)
        if fh is None and isinstance(node, FileNode) and node.parent is None:
            refuse_stale(node)  # truncate(2) or utimensat by a stale name
        self._check_settable(node, size, mode, uid, gid, mtime_ns)
        now = self.clock()
        persist = False
        if size is not None:
            if not isinstance(node, FileNode):
                raise FsError(errno.EISDIR)
            await self._truncate(node, size, fh, now)
        if mode is not None:
            new_mode = stat.S_IFMT(node.mode) | stat.S_IMODE(mode)
            persist = new_mode != node.mode
            node.mode = new_mode
        if mtime_ns is not None:
            node.mtime_ns = mtime_ns
            if isinstance(node, FileNode):
                node.client_mtime_ns = mtime_ns
            persist = True
        node.ctime_ns = now
        if persist and isinstance(node, FileNode) and node.doc_id is not None:
            pending = self.state.buffers.get(node.ino)
            if pending is None or not pending.dirty:
                attrs = FileAttrs(node.custom_mode, node.client_mtime_ns)
                await self.lookups.run_db(self.store.set_attrs, node.doc_id, attrs)
            # else: the pending commit persists them with the new content.
        return self.lookups.attributes(node)

    def _check_settable(
        self,
        node: Node,
        size: int | None,
        mode: int | None,
        uid: int | None,
        gid: int | None,
        mtime_ns: int | None,
    ) -> None:
        """setattr's refusals: another owner (EPERM), a change to a read-only mount or a
        synthetic file (EROFS), a time 64-bit nanoseconds cannot hold (EINVAL)."""
        if (uid is not None and uid != self.lookups.uid) or (
            gid is not None and gid != self.lookups.gid
        ):
            raise FsError(errno.EPERM, "files on a memfs mount belong to the mounting user")
        changes = (size, mode, mtime_ns) != (None, None, None)
        if changes:
            self.lookups.refuse_if_read_only()
        if size is not None and size > DOCUMENT_MAX_BYTES and type(node) is FileNode \
                and not node.scratch:  # fmt: skip
            raise self._too_large(size)
        if mtime_ns is not None and not -(2**63) <= mtime_ns < 2**63:
            raise FsError(
                errno.EINVAL,
                "a modification time outside 1677-2262 cannot be stored (nanoseconds in 64 "
                "bits, as PostgreSQL's BIGINT and the kernel's FUSE attributes hold them)",
            )
        if isinstance(node, SYNTHETIC) and changes:
            raise FsError(errno.EROFS, "search results are read-only")

    async def _truncate(self, node: FileNode, size: int, fh: int | None, now: int) -> None:
        """``ftruncate`` (through the handle's buffer, saved at its close) or ``truncate``
        by path (no close follows: committed now)."""
        handle = self.state.handles.get(fh) if fh is not None else None
        buffer = handle.buffer if handle else await self._buffer(node, load=size != 0)
        buffer.truncate(size)
        self.state.served.pop(node.ino, None)
        node.size = size
        node.client_mtime_ns = None
        node.mtime_ns = now
        if handle is None:
            await self.commit(node)
            self._drop_idle_buffer(node)

    async def commit(self, node: FileNode, *, final: bool = True) -> None:
        """Write a dirty document through to the database (flush, fsync, close, unmount).

        Content the database refuses is dropped (``_reject``) when ``final``; otherwise
        (flush, fsync: descriptors may still write) the buffer is kept unchanged for the
        next commit.  A file with no row yet (new, or unbound by another writer's delete)
        is placed by its path, under the namespace lock, taken before the buffer's (the
        lock order of ``memfs.vfs.base``; a rename holding it may call this)."""
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

    async def _commit_locked(self, node: FileNode, buffer: FileBuffer, final: bool) -> None:
        """``commit``'s work, under the buffer's lock (and the namespace lock if the file
        has no row)."""
        if not buffer.dirty:
            return
        if node.parent is None:
            buffer.dirty = False  # unlinked while open: nothing to keep
            self.saved(node)
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
        self._adopt_result(node, path, result)
        if merged and not result.conflict:
            # The writer's base is what it wrote: no row holds it (the row is the merge).
            self.bases.saw(path, buffer.writer, result.doc_id, None, ours.encode("utf-8"))
            self._show_merged(node, buffer, generation, ours, text, result.updated_at, final)
            buffer.mark_clean(generation)
            if not buffer.dirty:
                self.saved(node)
            log.debug("committed %r (%s): merged, previous content versioned", path,
                      result.doc_id)  # fmt: skip
            return
        del text
        self._saved_as_written(node, buffer, generation, path, ours, result)

    async def _save_text(
        self, node: FileNode, buffer: FileBuffer, path: str, text: str, attrs: FileAttrs
    ) -> tuple[str, CommitResult, bool]:
        """IronClaw's write of ``text`` at ``path``, merged with another writer's change
        the buffer's writer had not seen (``memfs.merge``) where it can be.  The text
        stored, the commit's result, and whether the text is such a merge."""
        ours = text
        if node.doc_id is None:  # the namespace lock is held (``commit``)
            result = await self.lookups.commit_document(None, path, text, attrs)
            from_nothing = buffer.appends_only or buffer.absent_path == path
            if from_nothing and not result.created and result.replaced_hash:
                # ``>>`` of a file another writer made meanwhile, or a file its writer
                # found none at (``SaverBases.absent``): after their lines.
                late = await self.merges.merge_late(path, b"", ours, attrs, result)
                if late is not None:
                    return late[0], late[1], True
            return text, result, False
        merged = await self._merge_others(node, buffer, path, text)
        found = await self.merges.commit_merged(node.doc_id, path, merged, attrs, ours)
        if found is not None:
            return found[0], found[1], True
        # The base for a change the mount has not heard of yet, merged under the row lock:
        # a base known by hash alone is fetched only if the row did change (below).
        by_hash = buffer.base is None and buffer.base_digest is not None
        at_hand = None if by_hash else self.merges.rebased(node.doc_id, path, buffer.base, ours)
        result = await self.lookups.commit_document(
            node.doc_id, path, text, attrs, node.updated_at,
            self.merges.merge_function(path, at_hand, ours),
        )  # fmt: skip
        locked = await self.merges.committed_merge(path, ours, result)
        if locked is not None:
            return locked[0], locked[1], True
        if result.conflict and result.replaced_hash is not None:
            own = await self._buffer_base(node.doc_id, path, buffer)
            base = self.merges.rebased(node.doc_id, path, own, ours)
            late = await self.merges.merge_late(path, base, ours, attrs, result)
            if late is not None:
                return late[0], late[1], True
        return text, result, False

    def _adopt_result(self, node: FileNode, path: str, result: CommitResult) -> None:
        """The file is the row the commit left (another writer's change kept aside)."""
        if result.conflict:
            log.warning(
                "%r changed in the database after it was opened here; the other change "
                "is kept as %s and this save is the current content",
                path,
                result.conflict,
            )
        if node.parent is not None:
            self.state.tree.bind_document(node, result.doc_id)
        else:
            node.doc_id = result.doc_id
        if result.changed and node.updated_at is not None and self.bases.tracks(result.doc_id):
            self.bases.superseded(result.doc_id, node.updated_at,
                                  self.cache.get(result.doc_id, node.updated_at))  # fmt: skip
        node.updated_at = result.updated_at

    def _saved_as_written(
        self,
        node: FileNode,
        buffer: FileBuffer,
        generation: int,
        path: str,
        ours: str,
        result: CommitResult,
    ) -> None:
        """The row holds the writer's bytes (``ours``): they are its base, the cache's entry
        and what the kernel holds; the buffer is clean unless written since."""
        # One copy of the committed bytes serves as the writers' base and the cache entry.
        same = buffer.generation == generation
        committed = buffer.snapshot() if same else ours.encode("utf-8")
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
            self.saved(node)
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

    def _note_base(
        self, node: FileNode, buffer: Buffer, pid: int, *, writable: bool, truncate: bool
    ) -> None:
        """What process ``pid`` starts from: its first read since it last wrote the document
        (``SaverBases.read``).  A write is based on that, not on what the open loaded: vim
        rewrites a file it read minutes ago (``ftruncate`` and the whole buffer, or
        ``O_TRUNC``) after reading it once more for its backup.  Not called for an
        ``O_APPEND`` open: its writes go at the end of what it loaded, its base (another
        thread of the process may have read the file long ago: that is not this write's)."""
        if not isinstance(buffer, FileBuffer) or type(node) is not FileNode or node.scratch:
            return
        if node.doc_id is None or node.parent is None:
            return
        path = self.state.tree.path_of(node)
        if writable:
            buffer.writer = pid or buffer.writer
            if buffer.base is None or not buffer.dirty:
                self.adopt_saver_base(buffer, node.doc_id, path, pid, rewrites=truncate)
        if truncate:
            return
        if buffer.dirty or buffer.unshown_merge is not None:
            # What it reads is no row: another descriptor's writes not committed yet, or
            # a writer's own bytes a merge it has not seen replaced in the database.
            # Based on the row instead, its save would undo the lines the bytes lack.
            bounded = len(buffer) <= MERGE_LIMIT  # a larger base is not kept: unknown
            self.bases.read(path, pid, node.doc_id, None,
                            data=lambda: buffer.snapshot() if bounded else None)  # fmt: skip
            return
        version = buffer.base_version or node.updated_at
        self.bases.read(path, pid, node.doc_id, version,
                        lambda: self._digest_of(node.doc_id, version, buffer))  # fmt: skip

    def _digest_of(self, doc_id: UUID | None, version: Any, buffer: FileBuffer) -> str | None:
        """IronClaw's hash of the document at ``version``, if its bytes are at hand."""
        data = buffer.base if buffer.base_version == version else None
        if data is None and doc_id is not None:
            data = self.cache.get(doc_id, version)
            data = data if data is not None else self.bases.retained(doc_id, version)
        return bytes_hash(data) if data is not None else None

    def adopt_saver_base(
        self, buffer: FileBuffer, doc_id: UUID | None, path: str, pid: int, *,
        rewrites: bool = True,
    ) -> None:  # fmt: skip
        """A buffer written from empty takes the base of the process writing it (``doc_id``
        None: a new file).  A process that found no file there and read nothing since is
        based on an empty file if it ``rewrites`` the document (an open that keeps the
        content is based on the content it loaded)."""
        found = self.bases.base(path, pid)
        if found is None:
            return
        if found.doc_id is None:
            if doc_id is not None and not rewrites:
                return
            log.debug("%r written by process %d, which found no file there", path, pid)
            buffer.base, buffer.base_version, buffer.base_digest = b"", None, None
            buffer.absent_path = path
            return
        if doc_id is None:
            return
        if found.doc_id != doc_id:
            self._adopt_removed_base(buffer, found, path, pid)
            return
        if found.data is None and buffer.base is not None and found.version == buffer.base_version:
            return  # the buffer holds that very version
        log.debug("%r written by process %d, based on what it read at %s", path, pid,
                  found.version)  # fmt: skip
        data = self.merges.bytes_of(found)
        buffer.base_digest = None
        if data is None and found.digest is not None:  # fetched by its hash if a merge needs it
            buffer.base, buffer.base_version = None, found.version
            buffer.base_digest = found.digest
            return
        if data is None:
            log.info("%r: what process %d read last is no longer cached; a change by another "
                     "writer meanwhile is kept as a version, not merged", path, pid)  # fmt: skip
            return
        buffer.base = data if len(data) <= MERGE_LIMIT else None
        buffer.base_version = found.version if found.data is None else None

    def _adopt_removed_base(self, buffer: FileBuffer, found: Base, path: str, pid: int) -> None:
        """Process ``pid`` read another document at ``path``, removed or moved away since and
        this one made there (an append saved anew after another writer's removal): its save
        is based on the bytes it read, which no row of this document holds (a merge then
        always reads the row), or on today's rule if they are no longer at hand."""
        data = self.merges.bytes_of(found)
        if data is None or len(data) > MERGE_LIMIT:
            return
        log.debug("%r written by process %d, based on what it read of the document there "
                  "before this one", path, pid)  # fmt: skip
        buffer.base, buffer.base_version, buffer.base_digest = data, None, None

    async def _merge_others(
        self, node: FileNode, buffer: FileBuffer, path: str, ours: str
    ) -> RowMerge | None:
        """Another writer changed the row since this buffer's writers read it: the save
        merged with their change (``memfs.merge``) and the version merged with, or None
        (nothing to merge, the base unknown, or the changes overlap): the save is then
        made on today's rule, the other change kept as a version.  A round trip only when
        the change feed (or a poll) told of such a change, or after an earlier merge."""
        base = buffer.base
        if not mergeable(path) or node.doc_id is None:
            return None
        if base is None and buffer.base_digest is None:
            # Its writer read nothing (the shell's ``>`` after a ``cat``): the content its
            # bytes extend, if another writer changed the row since.
            inferred = self.merges.inferred_base(node.doc_id, path, ours)
            if inferred is None:
                return None
            shown = inferred.version if inferred.data is None else None
            if shown == node.updated_at and not buffer.others_changed:
                return None
            data = self.merges.bytes_of(inferred)
            if data is None:
                return None
            return await self.merges.merge_with_row(node.doc_id, path, data, shown, ours)
        if buffer.base_version == node.updated_at and not buffer.others_changed:
            # No change heard of since its writer read the row: the row is ``base``.  Unless
            # the bytes come from an earlier content (a sync tool's copy), that is all.
            rebased = (
                self.merges.rebased(node.doc_id, path, base, ours) if base is not None else None
            )
            if base is None or rebased is None or rebased is base:
                return None
            merged = self.merges.merge_texts(path, rebased, base, ours)
            return RowMerge(merged, node.updated_at, base) if merged is not None else None
        if base is None and buffer.base_digest is not None:
            base = await self.merges.stored_base(node.doc_id, path, buffer.base_digest)
        if base is None:
            return None
        rebased = self.merges.rebased(node.doc_id, path, base, ours)
        version = buffer.base_version if rebased is base else None
        return await self.merges.merge_with_row(node.doc_id, path, rebased or base, version, ours)

    async def _buffer_base(self, doc_id: UUID, path: str, buffer: FileBuffer) -> bytes | None:
        """The bytes a buffer's writers started from, fetched by hash if need be."""
        if buffer.base is not None or buffer.base_digest is None:
            return buffer.base
        return await self.merges.stored_base(doc_id, path, buffer.base_digest)

    def _show_merged(
        self, node: FileNode, buffer: FileBuffer, generation: int, ours: str, merged: str,
        version: Any, final: bool,
    ) -> None:  # fmt: skip
        """After a merged save: the mount shows the merged row once no descriptor writes
        to the file any more; until then its writers keep their own bytes, which the next
        save merges again (their base is what they wrote, no row holds it)."""
        data = merged.encode("utf-8")
        if node.doc_id is not None and self.cache.accepts(len(data)):
            self.cache.put(node.doc_id, version, data)
        if final and buffer.generation == generation and not self.state.open_for_writing(node):
            shown = FileBuffer.of_row(data, version)
            self.take_others_content(node, shown)
            node.size = len(data)
        else:
            buffer.base, buffer.base_version = self._base_of(ours), None
            buffer.base_digest = None
            buffer.unshown_merge = version
        buffer.others_changed = False
        node.kernel_version = None
        self.kernel.attributes(node.ino)
        self.kernel.inode(node.ino)

    async def _refuse_content(self, node: FileNode, exc: FsError, final: bool) -> None:
        if final:
            await self._reject(node, exc)
        else:
            log.error("not saving %s: %s; the database keeps its previous content (the file "
                      "shows what was written until its last close)",
                      self.lookups.describe_node(node), exc.reason)  # fmt: skip

    async def _reject(self, node: FileNode, exc: FsError) -> None:
        """Content that cannot be stored: drop every uncommitted change of the file.

        The database keeps its previous content and the mount shows that content again; a
        file that never reached the database disappears.  The caller reports ``exc``.
        """
        what = self.lookups.describe_node(node)
        log.error("not saving %s: %s; the database keeps its previous content", what, exc.reason)
        buffer = self.state.buffers.pop(node.ino, None)
        if isinstance(buffer, FileBuffer):
            buffer.dirty = False
        self.saved(node)
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
        # Back to the committed content, so the mount shows what the database holds.
        try:
            data = await self.committed_bytes(node)
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
                    self._keep_unsaved(node, f"could not save at unmount: {exc.reason}")
