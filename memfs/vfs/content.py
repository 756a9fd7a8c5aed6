"""File content: open handles, buffers, reads and writes.

Documents are buffered per inode (all handles share one ``FileBuffer``) and committed on
flush, fsync and release when dirty, by the save path (``memfs.vfs.commits``).  Scratch
files have a ``ScratchBuffer`` that is never committed and lives as long as the file does.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import logging
import os
import stat
from typing import Any, Protocol
from uuid import UUID

from memfs.db.interface import FileAttrs
from memfs.errors import DocumentGone, FsError, WriteRefused
from memfs.recovery import RecoveryArea
from memfs.tree import SYNTHETIC, FileNode, Node, ScopedFile, SyntheticFile
from memfs.vfs.base import Attributes, log, refuse_stale
from memfs.vfs.buffers import FileBuffer, ScratchBuffer, ScratchSpill
from memfs.vfs.commits import Commits
from memfs.vfs.committed import CommittedContent
from memfs.vfs.extensions import RootFile
from memfs.vfs.roles import Caching, Clocked, Describing, SaverTables, Stateful, StoreAccess
from memfs.vfs.state import CONTENDED_SECONDS, Buffer, Handle
from memfs.vfs.writer_bases import WriterBases

#: The largest document a mount saves (EFBIG at the write that would pass it; the bytes
#: received are kept in the recovery area).  Every engine commits a document of this size,
#: chunks and full-text index included, well within a call's deadline (12 s); IronClaw's
#: own memory documents are kilobytes.  ``MEMFS_MAX_DOCUMENT_BYTES`` changes it.
DOCUMENT_MAX_BYTES = int(os.environ.get("MEMFS_MAX_DOCUMENT_BYTES", str(8 << 20)))


class ContentLookups(Stateful, StoreAccess, Caching, SaverTables, Clocked, Describing, Protocol):
    """What contents ask of the lookups: the mount's state, store and caches, the editors'
    saves, the clock, names for log lines, the mount's owner, where scratch content
    spills and unsaved content is kept, and the node rules below."""

    uid: int
    gid: int
    spill: ScratchSpill
    recovery: RecoveryArea | None

    def apply_deletion(self, doc_id: UUID) -> None: ...

    def attributes(self, node: Node) -> Attributes: ...

    def drop_displaced(self, node: Node) -> bool: ...

    def drop_if_freed(self, ino: int) -> None: ...

    def refuse_if_read_only(self) -> None: ...

    def remove_deleted(self, node: FileNode) -> None: ...

    def root_file_of(self, node: Node) -> RootFile | None: ...

    async def synthetic_content(self, node: ScopedFile) -> bytes: ...


class Contents:
    """Open, read, write, truncate and commit."""

    def __init__(
        self,
        lookups: ContentLookups,
        commits: Commits,
        committed: CommittedContent,
        writer_bases: WriterBases,
    ) -> None:
        #: What this part asks of the mount's lookups (``ContentLookups``).
        self.lookups = lookups
        self.state = lookups.state
        #: The save path: flush, fsync and release commit through it.
        self.commits = commits
        #: The rows' bytes a buffer is loaded with.
        self.committed = committed
        #: What a writer's save is based on, noted at its open.
        self.writer_bases = writer_bases

    def describe_node(self, node: Node) -> str:
        """The node's path for a log line or a report (``Lookups.describe_node``)."""
        return self.lookups.describe_node(node)

    def open_handle(self, node: FileNode, buffer: Buffer, writable: bool, flags: int = 0) -> int:
        fh = self.state.new_fh()
        self.state.handles[fh] = Handle(node, buffer, writable, append=bool(flags & os.O_APPEND))
        node.open_count += 1
        self.lookups.saves.opened(node.ino)
        return fh

    def _handle(self, fh: int) -> Handle:
        try:
            return self.state.handles[fh]
        except KeyError:
            raise FsError(errno.EBADF) from None

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
            buffer = ScratchBuffer(self.lookups.spill)
        elif node.doc_id is None:
            buffer = FileBuffer(b"", dirty=True)
        elif not load:
            buffer = FileBuffer(b"", dirty=node.size != 0, truncated=True)
        else:
            data = await self.committed.read(node)
            existing = self.state.buffers.get(node.ino)
            if existing is not None:  # another open loaded it while we waited
                return existing
            if node.size != len(data):  # never a size the bytes do not fill, or exceed
                log.warning("%s: its size was %d, its content %d bytes; the content's size is "
                            "shown", self.lookups.describe_node(node), node.size,
                            len(data))  # fmt: skip
                node.size = len(data)
                self.lookups.kernel.attributes(node.ino)
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
            self.writer_bases.note(node, buffer, pid, writable=writable, truncate=truncate)
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
        node.mtime_ns = node.ctime_ns = self.lookups.clock()

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
            self.state.drop_idle_buffer(node)
            refuse_stale(node)
        return buffer

    def _snapshot_if_contended(self, node: FileNode, handle: Handle, writable: bool) -> None:
        """A reader of a file another writer changed moments ago reads a snapshot (the
        bytes of this open), whatever that writer does next (``mark_contended``)."""
        path = self.state.tree.path_of(node)
        changed = self.state.contended.get(path)
        if changed is not None and self.lookups.monotonic() - changed > CONTENDED_SECONDS:
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
            self.lookups.kernel.attributes(node.ino)
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
            data = self.lookups.cache.get(node.doc_id, version)
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
        self.lookups.bases.read(self.state.tree.path_of(node), pid, doc_id, version, lambda: digest)
        return fh

    async def _made_at_open(self, node: FileNode, files: RootFile) -> tuple[int, bool] | None:
        """A root file whose bytes are made for each open (``.status``): served from a
        buffer of their own, with direct I/O (None: its bytes are the node's own)."""
        assert isinstance(node, SyntheticFile)
        data = await files.content_at_open(node, self.commits.unsaved)
        if data is None:
            return None
        fh = self.open_handle(node, FileBuffer(data), False)
        self.state.handles[fh].snapshot = True
        self.lookups.kernel.attributes(node.ino)
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
            await self.commits.reject(node, exc)
            raise
        node.size = len(handle.buffer)
        node.client_mtime_ns = None
        node.mtime_ns = node.ctime_ns = self.lookups.clock()
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
        if self.lookups.recovery is not None and received and node.parent is not None:
            with contextlib.suppress(OSError):
                stored = self.lookups.recovery.keep(
                    self.state.tree.path_of(node), received, exc.reason
                )
                log.error("%s: the %d bytes written before the refusal are kept in %s",
                          self.lookups.describe_node(node), len(received), stored)  # fmt: skip
        handle.failed = exc
        await self.commits.reject(node, exc)
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
        await self.commits.commit_or_keep(node)

    def _refuse_lone_truncation(self, node: FileNode, buffer: FileBuffer) -> None:
        """A close whose only change is emptying a file IronClaw may not empty fails
        (EINVAL); the buffer stays truncated, so what a redirect writes next lands in it."""
        if node.doc_id is None or node.parent is None:
            return
        try:
            text, _ = buffer.commit_text()
        except FsError:
            return  # release decides
        refused = self.lookups.store.content_problem(self.state.tree.path_of(node), text)
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
        await self.commits.commit_or_keep(handle.node)

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

    async def release(self, fh: int) -> None:
        handle = self.state.handles.pop(fh, None)
        if handle is None:
            return
        node = handle.node
        try:
            if not self._held_by_a_writer(handle):
                await self.commits.commit(node)
        except FsError as exc:
            if exc.errno != errno.EILSEQ and not isinstance(exc, WriteRefused):
                self.commits.unsaved.keep(node, exc.reason)
        finally:
            self.state.tree.release_handle(node)
            if handle.writable:
                await self._show_unshown_merge(node)
            if node.open_count == 0:
                self.lookups.saves.closed(node.ino)
                self._drop_if_deleted_elsewhere(node)
            self.state.drop_idle_buffer(node)
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
            data = await self.committed.read(node)
        except FsError:
            return  # gone meanwhile: the removal's event updates the file
        if self.state.buffers.get(node.ino) is not buffer or buffer.dirty:
            return  # opened and written again while the row was read
        shown = FileBuffer.of_row(data, node.updated_at)
        self.state.take_others_content(node, shown)
        node.size = len(data)
        node.kernel_version = None
        self.lookups.kernel.attributes(node.ino)
        self.lookups.kernel.inode(node.ino)

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

    async def setattr(  # noqa: PLR0913 - setattr(2)'s fields as FUSE gives them
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
        now = self.lookups.clock()
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
                await self.lookups.db.run_db(self.lookups.store.set_attrs, node.doc_id, attrs)
            # else: the pending commit persists them with the new content.
        return self.lookups.attributes(node)

    def _check_settable(  # noqa: PLR0913 - setattr(2)'s fields as FUSE gives them
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
            await self.commits.commit(node)
            self.state.drop_idle_buffer(node)
