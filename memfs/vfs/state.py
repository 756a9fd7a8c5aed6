"""The state of one mount between FUSE requests, with one owner (``MountState``).

Ownership.  ``MountState`` alone holds the tree, the open handles and their buffers, the
unsaved files, the listings the kernel holds and the namespace lock; the parts of the
model (``base.Lookups``, ``content.Contents``, ``commits.Commits``, ``namespace.Names``,
``saves.SavePatterns``, ``listings.Listings``) and the helpers around it (``coherence``,
``tool_folders``, ``maintenance``) read and change it, and the methods here keep the
invariants between its fields: a file's handles serve its current buffer, a freed inode
leaves no buffer behind, a folder whose names change drops the listing the kernel holds
of it.  What else a part keeps is its own: the unsaved copies (``unsaved.UnsavedFiles``),
the saver bases (``save_tables.SaverBases``), the content cache (``memfs.cache``).

Concurrency.  trio runs one request handler at a time between ``await`` points, so tree
updates need no locks.  Operations that change the namespace and await the database hold
``ns_lock``, so the tree and the rows change together; a document's content commits are
serialised by its buffer's lock.

Lock order: ``ns_lock`` first, then a buffer's lock, never the other way round.  A commit
of a file without a row (new, or unbound by another writer's delete) needs both: it takes
the namespace lock before the buffer's, or runs inside a rename that holds it already
(``holding_ns_lock``).  The other writers' changes (``coherence``) and a deletion ``open``
discovers are applied under ``ns_lock`` too.  Nothing holds a lock across a wait for
anything but the database, whose calls are bounded (``memfs.db.calls``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

import trio

from memfs.errors import FsError
from memfs.kernel import KernelNotifier
from memfs.tree import DirNode, FileNode, Node, Tree
from memfs.vfs.buffers import FileBuffer, ScratchBuffer

Buffer = FileBuffer | ScratchBuffer

#: For this long after another writer changed a document, a read-only open of it is a
#: snapshot read with direct I/O (``Handle.snapshot``): the page cache and the size the
#: kernel caches could otherwise pad a read with NUL bytes or mix two versions.
CONTENDED_SECONDS = 30.0
#: Paths remembered as contended before the settled ones are forgotten.
CONTENDED_PRUNE_AT = 10_000


@dataclass(slots=True)
class Handle:
    """One open file description."""

    node: FileNode
    buffer: Buffer
    writable: bool
    #: Set when a write through this handle was refused: the save is abandoned, later
    #: writes and the closing flush report the same error, and nothing is committed.
    failed: FsError | None = None
    #: Opened with O_APPEND: every write goes to the end of the content as the daemon
    #: holds it, whatever offset the kernel computed from a size it may have cached
    #: before another writer's change.
    append: bool = False
    #: Opened for reading while another writer was changing the file: direct I/O (no
    #: page cache, no cached size clipping or padding a read) of the content as it was at
    #: open, kept whole whatever changes meanwhile.
    snapshot: bool = False
    #: Opened for reading while the kernel held the pages of the version shown: the
    #: content is loaded only if the kernel asks for a read (it dropped the pages); until
    #: then ``buffer`` is an empty stand-in.
    unloaded: bool = False


@dataclass(slots=True)
class DirHandle:
    """One open directory: the snapshot its listing is read from."""

    ino: int
    #: Taken by ``readdir`` at offset 0 (and again on a rewind), or at ``opendir`` when the
    #: kernel may serve the listing from its cache: it then asks from the middle (a cache
    #: page went), and the positions must be those of the listing it cached.
    entries: list[tuple[str, Node]] | None
    #: The directory's ``generation`` at the open when the kernel may cache what this
    #: handle lists (``cache_readdir``), else None.
    cached_from: int | None = None
    #: Whether the kernel may go on serving the listing it already holds (``keep_cache``):
    #: only if nothing changed the folder since the kernel was last given its listing.  A
    #: change queues an invalidation (``_listing_changed``) that may land after this open;
    #: an open without ``keep_cache`` drops the held listing at once, in the open itself.
    kept: bool = False


class MountState:
    """Everything a mount holds between requests.

    ``tree``: the inode tree (every name and inode shown, and the documents by id).
    ``handles``: open file descriptions by file handle; ``dir_handles``: open
    directories.  ``buffers``: each open or unsaved file's content by inode, served by
    all its handles (``set_buffer``).  ``served``: content another writer's change
    replaced while the file was open here, still served to reads until the kernel is
    next told the file's attributes (until then it caches that content's size, and bytes
    of another length would read as NUL padding or a torn last line).
    ``deleted_while_open``: files another writer deleted while open for writing here,
    kept in the tree and unbound from their row, so a write before the last close saves
    them anew.  ``unsaved``: nodes whose changes could not be committed yet (database
    down), retried by the upkeep and at unmount.  ``contended``: when (monotonic)
    another writer last changed, created, moved or removed a document at each path, for
    the paths changed in the last ``CONTENDED_SECONDS`` (a read-only open there is a
    snapshot).  ``kernel_listings``: folders whose listing the kernel may hold
    (``cache_readdir``); ``listings``: the sorted listing of each, with the folder's
    ``generation`` it was taken at.  ``ns_lock``: held by every change of names, and by
    other writers' events while they are applied.
    """

    def __init__(self, now_ns: int, kernel: KernelNotifier, monotonic: Callable[[], float]) -> None:
        self.kernel = kernel
        self.monotonic = monotonic
        self.tree = Tree(now_ns, on_listing_change=self.listing_changed)
        self.handles: dict[int, Handle] = {}
        self.dir_handles: dict[int, DirHandle] = {}
        self.buffers: dict[int, Buffer] = {}
        self.served: dict[int, Buffer] = {}
        self.deleted_while_open: set[int] = set()
        self.unsaved: dict[int, FileNode] = {}
        self.contended: dict[str, float] = {}
        self.kernel_listings: set[int] = set()
        self.listings: dict[int, tuple[int, list[tuple[str, Node]]]] = {}
        self.ns_lock = trio.Lock()
        self._next_fh = 1

    def new_fh(self) -> int:
        """A file handle number not given out before."""
        fh = self._next_fh
        self._next_fh += 1
        return fh

    def set_buffer(self, node: FileNode, buffer: Buffer) -> None:
        """Give a file a new buffer, for every handle that has it open (but snapshots)."""
        old = self.buffers.get(node.ino)
        self.buffers[node.ino] = buffer
        for handle in self.handles.values():
            if handle.node is node and not handle.snapshot:
                handle.buffer, handle.unloaded = buffer, False
        if isinstance(old, ScratchBuffer) and old is not buffer:
            old.release()

    def take_others_content(self, node: FileNode, buffer: Buffer) -> None:
        """Another writer's content replaces the content of a file open here.  Reads keep
        the old bytes until the kernel is next told the file's attributes (``served``):
        a read it sent with the old size must not be answered with bytes of another."""
        old = self.buffers.get(node.ino)
        if old is not None:
            self.served.setdefault(node.ino, old)
        self.set_buffer(node, buffer)

    def drop_idle_buffer(self, node: FileNode) -> None:
        buffer = self.buffers.get(node.ino)
        if isinstance(buffer, FileBuffer) and node.open_count == 0 and not buffer.dirty:
            del self.buffers[node.ino]
            self.served.pop(node.ino, None)

    def forget_freed(self, ino: int) -> bool:
        """Forget the buffers of an inode the tree released; whether it was released."""
        if ino in self.tree.inodes:
            return False
        self.served.pop(ino, None)
        buffer = self.buffers.get(ino)
        if isinstance(buffer, ScratchBuffer):
            del self.buffers[ino]
            buffer.release()
        return True

    def take_out_unchanged(self, node: FileNode) -> bool:
        """Take a file out of the tree unless it has changes of its own (open for writing
        here, or content not saved yet); True if it went.  Its buffer goes with its inode,
        and the kernel forgets the name."""
        if self.has_changes(node):
            return False
        parent = node.parent
        self.tree.detach(node)
        if node.ino not in self.tree.inodes:
            self.buffers.pop(node.ino, None)
        if parent is not None:
            self.kernel.entry(parent.ino, node.name)
            self.kernel.inode(parent.ino)
        return True

    def has_changes(self, node: FileNode) -> bool:
        """Whether ``node`` is open for writing here or holds content not saved yet."""
        buffer = self.buffers.get(node.ino)
        return self.open_for_writing(node) or (isinstance(buffer, FileBuffer) and buffer.dirty)

    def open_for_writing(self, node: FileNode) -> bool:
        """Whether a descriptor of ``node`` is open for writing here (a scan of the open
        files, a handful: for other writers' events and a reader's close)."""
        return any(h.node is node and h.writable for h in self.handles.values())

    def mark_contended(self, *paths: str) -> None:
        """Another writer changed the documents at ``paths`` (see ``contended``)."""
        now = self.monotonic()
        if len(self.contended) > CONTENDED_PRUNE_AT:  # bounded: forget the settled ones
            self.contended = {
                path: at for path, at in self.contended.items() if now - at <= CONTENDED_SECONDS
            }
        for path in paths:
            self.contended[path] = now

    def holding_ns_lock(self) -> bool:
        """Whether this task holds ``ns_lock`` (a rename committing its source)."""
        return self.ns_lock.statistics().owner is trio.lowlevel.current_task()

    @contextlib.asynccontextmanager
    async def ns_locked(self) -> AsyncIterator[None]:
        """``ns_lock``, unless this task holds it already (trio's lock is not reentrant)."""
        if self.holding_ns_lock():
            yield
            return
        async with self.ns_lock:
            yield

    def listing_changed(self, directory: DirNode) -> None:
        """The tree changed ``directory``'s names: a listing the kernel holds goes."""
        self.listings.pop(directory.ino, None)
        if directory.ino in self.kernel_listings:
            self.kernel_listings.discard(directory.ino)
            self.kernel.inode(directory.ino)
