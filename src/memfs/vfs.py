"""The filesystem model: what each FUSE operation means for a workspace.

``Filesystem`` owns the inode tree, the open handles and their buffers, and talks to the
database only through ``MetaStore`` calls run in worker threads (never on the trio loop).
It knows nothing of pyfuse3: the adapter in ``memfs.fuse_ops`` translates requests to
these coroutines and ``FsError`` to errno replies, so the whole model is testable by
calling it directly.

Concurrency: trio runs one request handler at a time between ``await`` points, so tree
updates need no locks.  Operations that change the namespace and await the database hold
``ns_lock`` so the tree and the rows change together; a document's content commits are
serialised by its buffer's lock.
"""

from __future__ import annotations

import errno
import functools
import logging
import os
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from uuid import UUID

import psycopg
import trio
from psycopg_pool import PoolTimeout

from memfs.buffers import FileBuffer
from memfs.cache import ContentCache
from memfs.db.store import FileAttrs, MetaStore
from memfs.errors import DatabaseUnavailable, FsError
from memfs.paths import SEARCH_DIR, check_new_name, loadable_path
from memfs.tree import ROOT_INODE, DirNode, FileNode, Node, Tree, to_ns

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Synthetic capacity reported by statfs (editors check free space before saving).
STATFS_BLOCK = 4096
STATFS_BLOCKS = 1 << 30  # 4 TiB
STATFS_FILES = 1 << 24


@dataclass(slots=True)
class Attributes:
    """Stat data of one inode, independent of pyfuse3's types."""

    ino: int
    mode: int
    nlink: int
    uid: int
    gid: int
    size: int
    atime_ns: int
    mtime_ns: int
    ctime_ns: int
    birth_ns: int


@dataclass(slots=True)
class StatFs:
    block_size: int
    blocks: int
    blocks_free: int
    files: int
    files_free: int
    name_max: int


@dataclass(slots=True)
class Handle:
    """One open file description."""

    node: FileNode
    buffer: FileBuffer
    writable: bool
    #: Set when a write through this handle was refused: the save is abandoned, later
    #: writes and the closing flush report the same error, and nothing is committed.
    failed: FsError | None = None


class Filesystem:
    """A workspace seen as a POSIX directory tree."""

    def __init__(
        self,
        store: MetaStore,
        *,
        uid: int | None = None,
        gid: int | None = None,
        db_concurrency: int = 4,
        cache_bytes: int = 64 * 1024 * 1024,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.store = store
        self.uid = os.getuid() if uid is None else uid
        self.gid = os.getgid() if gid is None else gid
        self.clock = clock
        self.tree = Tree(clock())
        self.cache = ContentCache(cache_bytes)
        self.limiter = trio.CapacityLimiter(db_concurrency)
        self.ns_lock = trio.Lock()
        self.buffers: dict[int, FileBuffer] = {}
        self.handles: dict[int, Handle] = {}
        self.dir_handles: dict[int, tuple[int, list[Node]]] = {}
        #: Nodes whose changes could not be committed yet (database down); retried at unmount.
        self.unsaved: dict[int, FileNode] = {}
        #: Version of each file's content the kernel may hold in its page cache.
        self._kernel_version: dict[int, Any] = {}
        self._next_fh = 1

    # -- database access -----------------------------------------------------------------

    async def _db(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking store call in a worker thread; database outages become EIO."""
        try:
            return await trio.to_thread.run_sync(functools.partial(fn, *args), limiter=self.limiter)
        except (psycopg.OperationalError, PoolTimeout) as exc:
            name = getattr(fn, "__name__", "query")
            log.error("database unavailable during %s: %s", name, str(exc).strip())
            raise DatabaseUnavailable(f"{name}: {exc}") from exc

    async def load(self) -> None:
        """Load every path and attribute of the workspace into the tree (no content)."""
        docs = await self._db(self.store.load_documents)
        dirs = await self._db(self.store.load_directories)
        skipped = 0
        for row in docs:
            if not loadable_path(row.path):
                skipped += 1
                log.warning(
                    "document %s has a path the mount cannot show: %r (not normalised, "
                    "reserved, or with control characters); it is left untouched",
                    row.id,
                    row.path,
                )
                continue
            self.tree.load_document(
                row.id,
                row.path,
                row.size,
                row.created_at,
                row.updated_at,
                row.attrs.mode,
                row.attrs.mtime_ns,
            )
        now = self.clock()
        for path in dirs:
            if not loadable_path(path):
                continue
            node = self.tree.ensure_dir(path, now)
            if node is not None:
                node.explicit = True
        self.tree.settle_dir_times()
        files, directories = self.tree.count()
        log.info("loaded %d documents in %d directories (%d skipped)", files, directories, skipped)

    # -- attributes ----------------------------------------------------------------------

    def attributes(self, node: Node) -> Attributes:
        if isinstance(node, FileNode):
            return Attributes(
                ino=node.ino,
                mode=node.mode,
                nlink=1 if node.parent is not None else 0,
                uid=self.uid,
                gid=self.gid,
                size=node.size,
                atime_ns=node.mtime_ns,
                mtime_ns=node.mtime_ns,
                ctime_ns=node.ctime_ns,
                birth_ns=node.created_ns,
            )
        assert isinstance(node, DirNode)
        return Attributes(
            ino=node.ino,
            mode=node.mode,
            nlink=2 + node.subdirs,
            uid=self.uid,
            gid=self.gid,
            size=4096,
            atime_ns=node.mtime_ns,
            mtime_ns=node.mtime_ns,
            ctime_ns=node.ctime_ns,
            birth_ns=node.ctime_ns,
        )

    def getattr(self, ino: int) -> Attributes:
        return self.attributes(self.tree.get(ino))

    def lookup(self, parent_ino: int, name: str) -> Node:
        """Resolve a name and take one kernel reference on the result."""
        parent = self.tree.get_dir(parent_ino)
        if name == ".":
            node: Node | None = parent
        elif name == "..":
            node = parent.parent or self.tree.root
        else:
            node = parent.children.get(name)
        if node is None:
            raise FsError(errno.ENOENT)
        node.lookups += 1
        return node

    def remember(self, node: Node) -> None:
        """Count a kernel reference handed out outside ``lookup`` (READDIRPLUS)."""
        node.lookups += 1

    def forget(self, items: list[tuple[int, int]]) -> None:
        for ino, count in items:
            self.tree.forget(ino, count)
            self._drop_if_freed(ino)

    def _drop_if_freed(self, ino: int) -> None:
        """Forget per-inode state once the inode number is released."""
        if ino not in self.tree.inodes:
            self._kernel_version.pop(ino, None)

    def _touch_dir(self, directory: DirNode) -> None:
        directory.mtime_ns = directory.ctime_ns = self.clock()

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
        node = self.tree.get(ino)
        if (uid is not None and uid != self.uid) or (gid is not None and gid != self.gid):
            raise FsError(errno.EPERM, "files on a memfs mount belong to the mounting user")
        now = self.clock()
        persist = False
        if size is not None:
            if not isinstance(node, FileNode):
                raise FsError(errno.EISDIR)
            handle = self.handles.get(fh) if fh is not None else None
            buffer = handle.buffer if handle else await self._buffer(node, load=size != 0)
            buffer.truncate(size)
            node.size = size
            node.client_mtime_ns = None
            node.mtime_ns = now
            if handle is None:
                # truncate(2) by path: no close follows, so commit now.
                await self.commit(node)
                self._drop_idle_buffer(node)
        if mode is not None:
            node.mode = stat.S_IFMT(node.mode) | stat.S_IMODE(mode)
            persist = True
        if mtime_ns is not None:
            node.mtime_ns = mtime_ns
            if isinstance(node, FileNode):
                node.client_mtime_ns = mtime_ns
            persist = True
        node.ctime_ns = now
        if persist and isinstance(node, FileNode) and node.doc_id is not None:
            pending = self.buffers.get(node.ino)
            if pending is None or not pending.dirty:
                attrs = FileAttrs(node.custom_mode, node.client_mtime_ns)
                await self._db(self.store.set_attrs, node.doc_id, attrs)
            # else: the pending commit persists them with the new content.
        return self.attributes(node)

    def statfs(self) -> StatFs:
        files, dirs = self.tree.count() if len(self.tree.inodes) < 50_000 else (0, 0)
        used_blocks = sum(
            (n.size + STATFS_BLOCK - 1) // STATFS_BLOCK
            for n in self.tree.inodes.values()
            if isinstance(n, FileNode)
        )
        return StatFs(
            block_size=STATFS_BLOCK,
            blocks=STATFS_BLOCKS,
            blocks_free=STATFS_BLOCKS - used_blocks,
            files=STATFS_FILES,
            files_free=STATFS_FILES - files - dirs,
            name_max=255,
        )

    # -- directories ---------------------------------------------------------------------

    def opendir(self, ino: int) -> int:
        self.tree.get_dir(ino)
        fh = self._new_fh()
        self.dir_handles[fh] = (ino, self._snapshot(ino))
        return fh

    def _snapshot(self, ino: int) -> list[Node]:
        directory = self.tree.get_dir(ino)
        return sorted(directory.children.values(), key=lambda n: n.name)

    def readdir(self, fh: int, start: int) -> list[tuple[int, str, Node]]:
        """Entries from position ``start`` of the handle's snapshot: (next_id, name, node).

        Positions 0 and 1 are ``.`` and ``..``.  The snapshot is taken at ``opendir`` (and
        again on a rewind to 0), so a listing never skips or repeats an entry while the
        directory changes.  Entries removed since the snapshot are left out.
        """
        entry = self.dir_handles.get(fh)
        if entry is None:
            raise FsError(errno.EBADF)
        ino, entries = entry
        if start == 0:
            entries = self._snapshot(ino)
            self.dir_handles[fh] = (ino, entries)
        directory = self.tree.get_dir(ino)
        dots: list[tuple[str, Node]] = [(".", directory), ("..", directory.parent or directory)]
        listing = dots + [(node.name, node) for node in entries]
        return [
            (index + 1, name, node)
            for index, (name, node) in enumerate(listing[start:], start)
            if index < 2 or node.parent is not None
        ]

    def releasedir(self, fh: int) -> None:
        self.dir_handles.pop(fh, None)

    async def mkdir(self, parent_ino: int, name: str, mode: int) -> Node:
        async with self.ns_lock:
            parent = self._attached_dir(parent_ino)
            path = check_new_name(self.tree.path_of(parent), name)
            if name in parent.children:
                raise FsError(errno.EEXIST)
            await self._db(self.store.create_directory, path)
            node = self.tree.new_dir(name, mode, self.clock())
            node.explicit = True
            self.tree.attach(parent, node)
            node.lookups += 1
            self._touch_dir(parent)
            return node

    def _keep_if_emptied(self, parent: DirNode, leaving: int = 1) -> list[str]:
        """Directories that an operation would leave empty: memfs keeps them, as a disk would."""
        if parent is self.tree.root or parent.explicit or len(parent.children) > leaving:
            return []
        return [self.tree.path_of(parent)]

    async def rmdir(self, parent_ino: int, name: str) -> None:
        async with self.ns_lock:
            parent, node = self._child(parent_ino, name)
            if not isinstance(node, DirNode):
                raise FsError(errno.ENOTDIR)
            if node.children:
                raise FsError(errno.ENOTEMPTY)
            keep = self._keep_if_emptied(parent)
            if node.explicit or keep:
                await self._db(self.store.delete_directory, self.tree.path_of(node), keep)
            if keep:
                parent.explicit = True
            self.tree.detach(node)
            self._touch_dir(parent)

    # -- files: namespace ----------------------------------------------------------------

    def _attached_dir(self, ino: int) -> DirNode:
        directory = self.tree.get_dir(ino)
        if directory.parent is None and directory is not self.tree.root:
            raise FsError(errno.ENOENT, "directory was removed")
        return directory

    def _child(self, parent_ino: int, name: str) -> tuple[DirNode, Node]:
        """An existing entry of a live directory, or ENOENT."""
        parent = self._attached_dir(parent_ino)
        node = parent.children.get(name)
        if node is None:
            raise FsError(errno.ENOENT)
        return parent, node

    async def create(self, parent_ino: int, name: str, mode: int, flags: int) -> tuple[int, Node]:
        """Create and open a new, empty document; it reaches the database at flush/close."""
        async with self.ns_lock:
            parent = self._attached_dir(parent_ino)
            check_new_name(self.tree.path_of(parent), name)
            if name in parent.children:
                raise FsError(errno.EEXIST)
            node = self.tree.new_file(name, mode, self.clock())
            self.tree.attach(parent, node)
            node.lookups += 1
            self._touch_dir(parent)
            buffer = FileBuffer(b"", dirty=True)
            self.buffers[node.ino] = buffer
            writable = (flags & os.O_ACCMODE) != os.O_RDONLY
            return self._open_handle(node, buffer, writable), node

    async def unlink(self, parent_ino: int, name: str) -> None:
        async with self.ns_lock:
            parent, node = self._child(parent_ino, name)
            if not isinstance(node, FileNode):
                raise FsError(errno.EISDIR)
            keep = self._keep_if_emptied(parent)
            if node.doc_id is not None:
                await self._db(self.store.delete_document, node.doc_id, keep)
                self.cache.drop(node.doc_id)
            elif keep:
                await self._db(self.store.create_directory, keep[0])
            if keep:
                parent.explicit = True
            self.unsaved.pop(node.ino, None)
            self.tree.detach(node)
            self._touch_dir(parent)

    async def rename(
        self,
        old_parent_ino: int,
        old_name: str,
        new_parent_ino: int,
        new_name: str,
        *,
        noreplace: bool = False,
        exchange: bool = False,
    ) -> None:
        if exchange:
            raise FsError(errno.EINVAL, "RENAME_EXCHANGE is not supported")
        async with self.ns_lock:
            old_parent, source = self._child(old_parent_ino, old_name)
            new_parent = self._attached_dir(new_parent_ino)
            new_path = check_new_name(self.tree.path_of(new_parent), new_name)
            target = new_parent.children.get(new_name)
            if target is source:
                return
            if target is not None and noreplace:
                raise FsError(errno.EEXIST)
            if isinstance(source, DirNode):
                if self.tree.is_within(new_parent, source):
                    raise FsError(errno.EINVAL, "cannot move a directory into itself")
                if target is not None and not isinstance(target, DirNode):
                    raise FsError(errno.ENOTDIR)
                if isinstance(target, DirNode) and target.children:
                    raise FsError(errno.ENOTEMPTY)
            elif isinstance(target, DirNode):
                raise FsError(errno.EISDIR)
            keep = [] if old_parent is new_parent else self._keep_if_emptied(old_parent)
            if isinstance(source, DirNode):
                await self._rename_dir(source, new_path, target, keep)
            else:
                assert isinstance(source, FileNode)
                await self._rename_file(source, new_path, target, keep)
            if keep:
                old_parent.explicit = True
            if target is not None:
                self.tree.detach(target)
            self.tree.move(source, new_parent, new_name)
            self._touch_dir(old_parent)
            self._touch_dir(new_parent)

    async def _rename_file(
        self, source: FileNode, new_path: str, target: Node | None, keep: list[str]
    ) -> None:
        replaced = target.doc_id if isinstance(target, FileNode) else None
        if source.doc_id is None:
            # Not committed yet: its first commit adopts the row at the new path (so a
            # write-temp-then-rename save keeps the target document's identity).
            if keep:
                await self._db(self.store.create_directory, keep[0])
            return
        attrs = FileAttrs(source.custom_mode, source.mtime_ns)
        updated_at = await self._db(
            self.store.rename_document, source.doc_id, new_path, replaced, attrs, keep
        )
        if replaced is not None:
            self.cache.drop(replaced)
        if updated_at is None:
            log.warning("document %s vanished from the database during rename", source.doc_id)
            return
        self._adopt_version(source, updated_at)
        source.client_mtime_ns = source.mtime_ns
        source.ctime_ns = self.clock()

    async def _rename_dir(
        self, source: DirNode, new_path: str, target: Node | None, keep: list[str]
    ) -> None:
        old_path = self.tree.path_of(source)
        replaced = self.tree.path_of(target) if isinstance(target, DirNode) else None
        moved = await self._db(self.store.rename_directory, old_path, new_path, replaced, keep)
        for node in self.tree.iter_files(source):
            if node.doc_id is not None and node.doc_id in moved:
                self._adopt_version(node, moved[node.doc_id])
                node.client_mtime_ns = node.mtime_ns
        source.explicit = source.explicit or (isinstance(target, DirNode) and target.explicit)

    def _adopt_version(self, node: FileNode, updated_at: Any) -> None:
        """Record a new row version that did not change content (rename, attrs)."""
        cached = self.cache.get(node.doc_id, node.updated_at) if node.doc_id else None
        if cached is not None and node.doc_id is not None:
            self.cache.put(node.doc_id, updated_at, cached)
        if self._kernel_version.get(node.ino) == node.updated_at:
            self._kernel_version[node.ino] = updated_at
        node.updated_at = updated_at

    # -- files: content ------------------------------------------------------------------

    def _new_fh(self) -> int:
        fh = self._next_fh
        self._next_fh += 1
        return fh

    def _open_handle(self, node: FileNode, buffer: FileBuffer, writable: bool) -> int:
        fh = self._new_fh()
        self.handles[fh] = Handle(node, buffer, writable)
        node.open_count += 1
        return fh

    async def _buffer(self, node: FileNode, *, load: bool = True) -> FileBuffer:
        """The node's shared buffer, loading committed content from cache or database."""
        buffer = self.buffers.get(node.ino)
        if buffer is not None:
            return buffer
        if node.doc_id is None:
            buffer = FileBuffer(b"", dirty=True)
        elif not load:
            buffer = FileBuffer(b"", dirty=node.size != 0)
        else:
            data = self.cache.get(node.doc_id, node.updated_at)
            if data is None:
                doc_id = node.doc_id
                row = await self._db(self.store.read_content, doc_id)
                if row is None:
                    raise FsError(errno.ENOENT, f"document {doc_id} is gone from the database")
                text, version = row
                data = text.encode("utf-8")
                self.cache.put(doc_id, version, data)
                if version != node.updated_at:
                    node.updated_at = version
                    node.size = len(data)
                    if node.client_mtime_ns is None:
                        node.mtime_ns = to_ns(version)
            existing = self.buffers.get(node.ino)
            if existing is not None:  # another open loaded it while we waited
                return existing
            buffer = FileBuffer(data)
        self.buffers[node.ino] = buffer
        return buffer

    async def open(self, ino: int, flags: int) -> tuple[int, bool]:
        """Open a document; returns (fh, keep_cache)."""
        node = self.tree.get_file(ino)
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        truncate = writable and bool(flags & os.O_TRUNC)
        buffer = await self._buffer(node, load=not truncate)
        if truncate and len(buffer) > 0:
            buffer.truncate(0)
        if truncate:
            node.size = 0
            node.client_mtime_ns = None
            node.mtime_ns = node.ctime_ns = self.clock()
        fh = self._open_handle(node, buffer, writable)
        version = node.updated_at
        known = self._kernel_version.get(ino)
        keep_cache = not truncate and version is not None and known == version
        self._kernel_version[ino] = version
        return fh, keep_cache

    def _handle(self, fh: int) -> Handle:
        try:
            return self.handles[fh]
        except KeyError:
            raise FsError(errno.EBADF) from None

    def read(self, fh: int, offset: int, size: int) -> bytes:
        return self._handle(fh).buffer.read(offset, size)

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        handle = self._handle(fh)
        if not handle.writable:
            raise FsError(errno.EBADF)
        if handle.failed is not None:
            raise handle.failed
        node = handle.node
        try:
            written = handle.buffer.write(offset, data)
        except FsError as exc:
            handle.failed = exc
            await self._reject(node, exc)
            raise
        node.size = len(handle.buffer)
        node.client_mtime_ns = None
        node.mtime_ns = node.ctime_ns = self.clock()
        return written

    def _describe(self, node: FileNode) -> str:
        try:
            return repr(self.tree.path_of(node))
        except FsError:
            return f"removed inode {node.ino}"

    async def flush(self, fh: int) -> None:
        """Commit at close(2) so errors reach the caller.

        A new file nothing was written to yet is left for ``release``: shells send a flush
        before the first write (``>`` dup2s and closes the original descriptor), and
        committing then would insert an empty row and update it a moment later.
        """
        handle = self._handle(fh)
        if handle.failed is not None:
            raise handle.failed
        node = handle.node
        if node.doc_id is None and len(handle.buffer) == 0:
            return
        await self.commit(node)

    async def fsync(self, fh: int) -> None:
        handle = self._handle(fh)
        if handle.failed is not None:
            raise handle.failed
        await self.commit(handle.node)

    async def release(self, fh: int) -> None:
        handle = self.handles.pop(fh, None)
        if handle is None:
            return
        node = handle.node
        try:
            await self.commit(node)
        except FsError as exc:
            if exc.errno != errno.EILSEQ:
                log.error(
                    "changes to %s stay in memory until the database is back: %s",
                    self._describe(node),
                    exc.reason,
                )
                self.unsaved[node.ino] = node
        finally:
            self.tree.release_handle(node)
            self._drop_idle_buffer(node)
            self._drop_if_freed(node.ino)

    def _drop_idle_buffer(self, node: FileNode) -> None:
        buffer = self.buffers.get(node.ino)
        if node.open_count == 0 and buffer is not None and not buffer.dirty:
            del self.buffers[node.ino]

    async def commit(self, node: FileNode) -> None:
        """Write a dirty document through to the database (flush, fsync, close, unmount)."""
        buffer = self.buffers.get(node.ino)
        if buffer is None or not buffer.dirty:
            return
        async with buffer.lock:
            if not buffer.dirty:
                return
            if node.parent is None:
                buffer.dirty = False  # unlinked while open: nothing to keep
                self.unsaved.pop(node.ino, None)
                return
            try:
                text, data, generation = buffer.commit_text()
            except FsError as exc:
                await self._reject(node, exc)
                raise
            attrs = FileAttrs(node.custom_mode, node.client_mtime_ns)
            if node.doc_id is None:
                async with self.ns_lock:
                    if node.parent is None:
                        buffer.dirty = False
                        return
                    path = self.tree.path_of(node)
                    result = await self._db(self.store.commit_document, None, path, text, attrs)
            else:
                path = self.tree.path_of(node)
                result = await self._db(self.store.commit_document, node.doc_id, path, text, attrs)
            if node.parent is not None:
                self.tree.bind_document(node, result.doc_id)
            else:
                node.doc_id = result.doc_id
            node.updated_at = result.updated_at
            self.cache.put(result.doc_id, result.updated_at, data)
            self._kernel_version[node.ino] = result.updated_at
            if node.client_mtime_ns is None and result.changed:
                node.mtime_ns = node.ctime_ns = to_ns(result.updated_at)
            buffer.mark_clean(generation)
            if not buffer.dirty:
                self.unsaved.pop(node.ino, None)
            log.debug(
                "committed %r (%s): %s, %d chunks%s",
                path,
                result.doc_id,
                "created" if result.created else ("updated" if result.changed else "unchanged"),
                result.chunks,
                ", previous content versioned" if result.versioned else "",
            )

    async def _reject(self, node: FileNode, exc: FsError) -> None:
        """Content that cannot be stored: drop every uncommitted change of the file.

        The database keeps its previous content and the mount shows that content again; a
        file that never reached the database disappears.  The caller reports ``exc``.
        """
        what = self._describe(node)
        log.error("not saving %s: %s; the database keeps its previous content", what, exc.reason)
        buffer = self.buffers.pop(node.ino, None)
        if buffer is not None:
            buffer.dirty = False
        self.unsaved.pop(node.ino, None)
        if node.doc_id is None:
            # Never reached the database: the file disappears rather than exist empty.
            async with self.ns_lock:
                if node.parent is not None:
                    self.tree.detach(node)
            return
        # Back to the committed content, so the mount shows what the database holds.
        data = self.cache.get(node.doc_id, node.updated_at)
        if data is None:
            row = await self._db(self.store.read_content, node.doc_id)
            data = row[0].encode("utf-8") if row is not None else b""
        node.size = len(data)
        restored = FileBuffer(data)
        for handle in self.handles.values():
            if handle.node is node:
                handle.buffer = restored
        if node.open_count > 0:
            self.buffers[node.ino] = restored
        self._kernel_version.pop(node.ino, None)

    async def commit_all(self) -> int:
        """Commit every dirty buffer (at unmount); return how many could not be saved."""
        failed = 0
        nodes = {h.node.ino: h.node for h in self.handles.values()}
        nodes.update(self.unsaved)
        for ino, buffer in list(self.buffers.items()):
            if buffer.dirty and ino in self.tree.inodes:
                node = self.tree.inodes[ino]
                if isinstance(node, FileNode):
                    nodes[ino] = node
        for node in nodes.values():
            try:
                await self.commit(node)
            except FsError as exc:
                failed += 1
                log.error("could not save %s at unmount: %s", self._describe(node), exc.reason)
        return failed

    def search_reserved(self, parent_ino: int, name: str) -> bool:
        return parent_ino == ROOT_INODE and name == SEARCH_DIR

    def node_path(self, ino: int) -> str:
        return self.tree.path_of(self.tree.get(ino))

    def doc_id_of(self, ino: int) -> UUID | None:
        node = self.tree.get(ino)
        return node.doc_id if isinstance(node, FileNode) else None
