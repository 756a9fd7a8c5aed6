"""The model's shared services and its read-only operations: ``Lookups``.

The model is parts over one ``MountState``, each given what it uses by its constructor:
``Lookups`` here (the services, lookups and attributes), and over
it ``listings.Listings``, ``commits.Commits``, ``content.Contents``,
``replacing.Replacements``, ``saves.SavePatterns`` and
``namespace.Names`` (each naming in its constructor the services it uses).
``memfs.vfs.Filesystem`` is the façade over them that FUSE's adapter calls.

Ownership, concurrency and the lock order are written at the top of ``memfs.vfs.state``.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar
from uuid import UUID

from memfs.cache import ContentCache
from memfs.db.calls import DatabaseCalls
from memfs.db.capabilities import KeptHistory
from memfs.db.deferred import Moved
from memfs.db.interface import (
    PLAIN_SAVE,
    CommitResult,
    DocumentStore,
    FileAttrs,
    SaveOptions,
    Write,
)
from memfs.db.scoped import folder_config_paths
from memfs.errors import FsError
from memfs.kernel import KernelNotifier, RecordingNotifier
from memfs.paths import loadable_path
from memfs.recovery import RecoveryArea
from memfs.scratch import Kind, ScratchRules
from memfs.stats import MountStats
from memfs.tree import (
    SYNTHETIC,
    DirNode,
    FileNode,
    Node,
    ScopedFile,
    StoredDocument,
    SymlinkNode,
    SyntheticDir,
    SyntheticFile,
)
from memfs.vfs.buffers import FileBuffer, ScratchSpill
from memfs.vfs.extensions import RootFile, SyntheticTree

if TYPE_CHECKING:
    from memfs.vfs.tool_folders import ToolFolders
from memfs.vfs.database_access import DatabaseAccess
from memfs.vfs.safety_net import SafetyNet
from memfs.vfs.save_tables import BASES_SHARE, EditorSaves, SaverBases
from memfs.vfs.state import MountState

log = logging.getLogger("memfs.vfs")

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


class ReindexRequests(Protocol):
    """The background re-chunking the model hands its saves to (``memfs.reindex``)."""

    @property
    def running(self) -> bool:
        """Whether its worker runs (if not, a save re-chunks in its own transaction)."""

    def request(self, doc_ids: Sequence[UUID]) -> None:
        """Re-chunk these documents soon."""

    async def finish(self) -> None:
        """Re-chunk what was requested, before unmount."""


def refuse_stale(node: FileNode) -> None:
    """A removed file reached through a name the kernel still caches (a refused new file,
    another writer's delete): ESTALE makes the kernel look the name up again, so
    ``echo x > f`` creates a new file instead of writing into a dead inode."""
    raise FsError(errno.ESTALE, f"inode {node.ino} was removed; the kernel looks again")


@dataclass(frozen=True, slots=True)
class ModelOptions:
    """How a mount's model is made: ``Filesystem``'s keyword arguments, each described where
    ``Lookups`` keeps it (None or empty: a default of its own, or none)."""

    uid: int | None = None
    gid: int | None = None
    umask: int = 0
    calls: DatabaseCalls | None = None
    recovery: RecoveryArea | None = None
    cache_bytes: int = 64 * 1024 * 1024
    rules: ScratchRules | None = None
    spill: ScratchSpill | None = None
    clock: Callable[[], int] = time.time_ns
    monotonic: Callable[[], float] = time.monotonic
    read_only: bool = False
    kernel: KernelNotifier | None = None
    reindexer: ReindexRequests | None = None
    extensions: Sequence[SyntheticTree] = ()
    on_changed: Callable[[UUID], None] | None = None
    tools: ToolFolders | None = None
    root_files: Sequence[RootFile] = ()
    stats: MountStats | None = None
    process_of: Callable[[int], int] = field(default=lambda thread: thread)
    kept: KeptHistory | None = None


class Lookups:
    """The services every part of the model shares (the mount's state, the store and the
    bounded calls into it, the content cache, the kernel's caches) and the operations that
    change no name and no content: lookups, attributes, listings, and database access with
    the background sender of deferred changes."""

    def __init__(self, store: DocumentStore, options: ModelOptions) -> None:
        o = options
        self.store = store
        #: The mount's live statistics (commits by outcome, and what is watched there).
        self.stats = o.stats
        #: Tool folders' files, kept in memfs's own schema (``memfs.vfs.tool_folders``).
        self.tools = o.tools
        #: Files at the root found by lookup, never listed: ``.prompt``, the system prompt
        #: IronClaw assembles (``memfs.vfs.prompt_file``); ``.status`` and ``.status.json``,
        #: made anew at each open (``memfs.vfs.status_file``).
        self.root_files = tuple(o.root_files)
        #: The owner, group and masked-off permission bits every file is shown with
        #: (``--uid``, ``--gid``, ``--umask``); the stored modes are unmasked.
        self.uid = os.getuid() if o.uid is None else o.uid
        self.gid = os.getgid() if o.gid is None else o.gid
        self.umask = o.umask
        self.clock = o.clock
        self.monotonic = o.monotonic
        #: Where kernel cache invalidations go (the daemon passes a FuseNotifier).
        self.kernel: KernelNotifier = o.kernel or RecordingNotifier()
        #: The tree, the open files and their buffers, the listings the kernel holds, the
        #: unsaved files and the namespace lock: one owner (``memfs.vfs.state``).
        self.state = MountState(o.clock(), self.kernel, o.monotonic)
        #: What each process last read or wrote of each document: its next save's base.
        self.bases = SaverBases(max_bytes=o.cache_bytes // BASES_SHARE, process_of=o.process_of)
        #: ``cache_bytes`` is the whole budget for content held in memory: a quarter of it
        #: for the bytes of merge bases no row version holds (``SaverBases``), the rest for
        #: the cache of document contents.  An entry leaving the cache (replaced, dropped,
        #: evicted) goes to the bases still at its version: a base is never known by its
        #: hash alone while its bytes were at hand (legacy IronClaw keeps no version of
        #: the agent's own UPDATEs: the hash would find nothing).
        self.cache = ContentCache(
            o.cache_bytes - o.cache_bytes // BASES_SHARE,
            on_leave=self.bases.retain,
            on_put=self.bases.served,
        )
        #: Every database call goes through this: worker threads, a deadline, a breaker.
        self.calls = o.calls or DatabaseCalls()
        self.rules = o.rules or ScratchRules()
        self.spill = o.spill or ScratchSpill(Path(f"/var/tmp/memfs-scratch-{os.getpid()}"))
        #: Where unsaved content is copied on local disk (``memfs.recovery``).
        self.recovery = o.recovery
        #: Renamed-away originals and tentative files (``memfs.vfs.save_tables``; the
        #: protocol that keeps them: ``memfs.vfs.saves``).
        self.saves = EditorSaves(o.monotonic, self._shows)
        #: Synthetic trees at the mount root (``.search``, ``.scopes``), made at ``load``,
        #: by the inode of their directory; listings of the root leave those out.
        self._extensions = list(o.extensions)
        self.synthetic_roots: dict[int, SyntheticTree] = {}
        #: A read-only mount refuses every change with EROFS.
        self.read_only = o.read_only
        #: Told each document id whose content changed (the embedding worker).
        self.on_changed = o.on_changed
        #: Re-chunks committed documents in the background (the daemon runs one).  While it
        #: runs, commits leave their chunks to it; otherwise they replace them themselves.
        self.reindexer = o.reindexer
        #: Bounded calls into the store, and the sender of deferred changes.
        self.db = DatabaseAccess(store, self.calls, self.adopt_moved)
        #: Where a save's own bytes go when what is stored is not them (a merge): the
        #: safety net under the merge rule, in ``kept``, memfs's own storage
        #: (``memfs.vfs.safety_net``; None: a store without it keeps none).
        self.safety_net = SafetyNet(o.kept, self.db.run_db)

    def adopt_moved(self, moved: dict[UUID, Moved]) -> None:
        """Each moved document's new row version; the mtime shown stays (a rename is not
        an edit), and the reindexer hears of them (their indexing rules may differ)."""
        for doc_id, versions in moved.items():
            node = self.state.tree.docs.get(doc_id)
            if node is not None:
                self.adopt_version(node, versions)
                node.client_mtime_ns = node.mtime_ns
        self.request_reindex(*moved)

    def adopt_version(self, node: FileNode, versions: Moved) -> None:
        """Record a new row version that did not change content (rename, attrs).

        If the row was not at the version the node shows, another writer changed it in
        between and its change-feed event has not been applied: the node keeps its version
        (that event, or the next read, brings the new content and size) and nothing cached
        of the old content is served meanwhile."""
        if node.updated_at != versions.before:
            if node.doc_id is not None:
                self.cache.drop(node.doc_id)
            node.kernel_version = None
            self.kernel.inode(node.ino)
            return
        cached = self.cache.get(node.doc_id, node.updated_at) if node.doc_id else None
        if cached is not None and node.doc_id is not None:
            self.cache.put(node.doc_id, versions.after, cached)
        if node.kernel_version == node.updated_at:
            node.kernel_version = versions.after
        node.updated_at = versions.after

    async def load(self) -> None:
        """Load every path and attribute of the workspace into the tree (no content)."""
        docs = await self.db.run_db(self.store.load_documents)
        dirs = await self.db.run_db(self.store.load_directories)
        skipped = 0

        def shown() -> Iterator[StoredDocument]:
            nonlocal skipped
            for row in docs:
                if loadable_path(row.path):
                    yield (row.id, row.path, row.size, row.created_at, row.updated_at,
                           row.attrs.mode, row.attrs.mtime_ns)  # fmt: skip
                    continue
                skipped += 1
                log.warning(
                    "document %s has a path the mount cannot show: %r (not normalised, "
                    "reserved, or with control characters); it is left untouched",
                    row.id,
                    row.path,
                )

        self.state.tree.load_documents(shown())
        now = self.clock()
        for path in dirs:
            if not loadable_path(path):
                continue
            node = self.state.tree.ensure_dir(path, now)
            if node is not None:
                node.explicit = True
        self.state.tree.settle_dir_times()
        files, directories = self.state.tree.count()
        log.info("loaded %d documents in %d directories (%d skipped)", files, directories, skipped)
        for extension in self._extensions:
            root = self.state.tree.new_synthetic_dir(extension.name, now)
            self.state.tree.attach(self.state.tree.root, root)
            self.synthetic_roots[root.ino] = extension
            await extension.fill(self.state.tree, root)

    # -- names ---------------------------------------------------------------------------

    def attached_dir(self, ino: int) -> DirNode:
        directory = self.state.tree.get_dir(ino)
        if directory.parent is None and directory is not self.state.tree.root:
            raise FsError(errno.ENOENT, "directory was removed")
        return directory

    def refuse_if_read_only(self) -> None:
        if self.read_only:
            raise FsError(errno.EROFS, "this mount is read-only")

    def writable_dir(self, ino: int) -> DirNode:
        """A live directory in which names may be added or removed (not ``.search``)."""
        self.refuse_if_read_only()
        directory = self.attached_dir(ino)
        if isinstance(directory, SYNTHETIC):
            raise FsError(errno.EROFS, "search results are read-only")
        return directory

    def child(self, parent_ino: int, name: str) -> tuple[DirNode, Node]:
        """An existing entry of a live directory, or ENOENT."""
        parent = self.attached_dir(parent_ino)
        node = parent.children.get(name)
        if node is None:
            raise FsError(errno.ENOENT)
        return parent, node

    def check_storable(self, path: str, below: int = 0) -> None:
        """EINVAL (and a log line naming it) for a document path the engine cannot store;
        ENAMETOOLONG for one (with ``below`` bytes of the longest path under it) too long
        for the database's path indexes (``db.limits``)."""
        size = len(path.encode()) + below
        if size > self.store.max_path_bytes:
            log.warning("refusing %r: a path of %d bytes is longer than the database's path "
                        "index takes (%d)", path, size, self.store.max_path_bytes)  # fmt: skip
            raise FsError(errno.ENAMETOOLONG, f"{path!r}: {size} bytes")
        problem = self.store.path_problem(path)
        if problem is not None:
            log.warning("refusing %r: it %s", path, problem)
            raise FsError(errno.EINVAL, f"{path!r} {problem}")

    def kind(self, parent: DirNode, name: str, *, is_dir: bool = False) -> Kind:
        """What a name in ``parent`` is: below a scratch directory everything is scratch."""
        if parent.scratch:
            return Kind.SCRATCH
        if parent is self.state.tree.root and name in self.rules.tool_folders:
            return Kind.SCRATCH  # kept in memfs's own schema, never memory (tool_folders)
        kind = self.rules.classify(name)
        if is_dir and kind is Kind.TENTATIVE:
            return Kind.DOCUMENT  # rsync makes no temporary directories
        if kind is not Kind.DOCUMENT:
            log.debug("treating %r as %s (matches a scratch pattern)", name, kind.value)
        return kind

    def describe_node(self, node: Node) -> str:
        """A node's path for a log line (or that it was removed)."""
        try:
            return repr(self.state.tree.path_of(node))
        except FsError:
            return f"removed inode {node.ino}"

    def describe_inode(self, ino: int) -> str:
        """A file's path for a log line (requests arrive by inode)."""
        node = self.state.tree.inodes.get(ino)
        return self.describe_node(node) if node is not None else f"inode {ino}"

    def describe_entry(self, parent_ino: int, name: str) -> str:
        node = self.state.tree.inodes.get(parent_ino)
        try:
            base = self.state.tree.path_of(node) if node is not None else None
        except FsError:
            base = None
        return repr(f"{base}/{name}" if base else name)

    def describe_handle(self, fh: int) -> str:
        handle = self.state.handles.get(fh)
        return self.describe_node(handle.node) if handle is not None else f"file handle {fh}"

    def announce(self, doc_id: UUID) -> None:
        if self.on_changed is not None:
            self.on_changed(doc_id)

    async def commit_document(
        self, write: Write, attrs: FileAttrs, how: SaveOptions = PLAIN_SAVE
    ) -> CommitResult:
        """Commit one document's content; its chunks follow now or from the reindexer.
        ``how.merge``: the save's merge with a change since ``how.expected``, run under
        the row lock (``memfs.vfs.merging``)."""
        deferred = self.reindex_deferred()
        unconfigured = write.doc_id is None and not any(
            self.state.tree.resolve(config) is not None
            for config in folder_config_paths(write.path)
        )
        how = dataclasses.replace(how, index_now=not deferred, unconfigured=unconfigured)
        result = await self.db.run_db(self.store.commit_document, write, attrs, how)
        if deferred:
            self.request_reindex(result.doc_id)  # IronClaw re-indexes every write
        elif result.changed:
            self.announce(result.doc_id)
        self.count_commit(result)
        return result

    def count_commit(self, result: CommitResult) -> None:
        if self.stats is not None:
            self.stats.committed(
                created=result.created, changed=result.changed, conflict=bool(result.conflict)
            )

    def reindex_deferred(self) -> bool:
        """Whether commits leave re-chunking to the running reindex worker."""
        return self.reindexer is not None and self.reindexer.running

    def request_reindex(self, *doc_ids: UUID) -> None:
        if self.reindexer is not None and self.reindexer.running:
            self.reindexer.request(doc_ids)

    def documents_changed(self) -> None:
        """A document changed, here or by another writer (``.search`` results found before
        it are searched again)."""
        for extension in self._extensions:
            extension.documents_changed()

    def touch_dir(self, directory: DirNode) -> None:
        directory.mtime_ns = directory.ctime_ns = self.clock()

    def _shows(self, doc_id: UUID) -> bool:
        """Whether a file in the tree stands for row ``doc_id``."""
        node = self.state.tree.docs.get(doc_id)
        return node is not None and node.parent is not None

    def apply_deletion(self, doc_id: UUID) -> None:
        """Another writer deleted document ``doc_id`` (its change-feed event, or a read
        that found the row gone before the event arrived)."""
        self.saves.row_deleted(doc_id)
        node = self.state.tree.docs.get(doc_id)
        if node is None:
            return
        self.mark_node_contended(node)
        # A process that read the row may save at its path again (a document made anew
        # there meanwhile): its base is kept by its bytes, which go from the cache now.
        self.bases.superseded(doc_id, node.updated_at, self.cache.get(doc_id, node.updated_at))
        self.cache.drop(doc_id)
        buffer = self.state.buffers.get(node.ino)
        dirty = isinstance(buffer, FileBuffer) and buffer.dirty
        if dirty or self.state.open_for_writing(node):
            # Deleted by another writer while open for writing here: what is written
            # before the last close is saved anew (on a local disk the open came after
            # the removal, or its writer was told by ENOENT, not by a lost write).
            log.info("%s was deleted by another writer while open for writing here; what is "
                     "written to it is saved anew", self.describe_node(node))  # fmt: skip
            self.state.tree.unbind_document(node)
            if not dirty:
                self.state.deleted_while_open.add(node.ino)
            return
        self.remove_deleted(node)

    def remove_deleted(self, node: FileNode) -> None:
        """Take a file another writer deleted out of the tree and the kernel's caches."""
        parent, name = node.parent, node.name
        self.state.tree.detach(node)
        if parent is not None:
            self.touch_dir(parent)
            self.kernel.entry(parent.ino, name)
            self.kernel.inode(parent.ino)
            self.prune_implied(parent)
        self.drop_if_freed(node.ino)

    def prune_implied(self, directory: DirNode) -> None:
        """Remove implied directories left with nothing in them (IronClaw's view)."""
        current: DirNode | None = directory
        while (
            current is not None
            and current is not self.state.tree.root
            and not current.children
            and not current.explicit
            and not current.scratch
        ):
            parent, name = current.parent, current.name
            self.state.tree.detach(current)
            if parent is not None:
                self.kernel.entry(parent.ino, name)
            current = parent

    # -- attributes ----------------------------------------------------------------------

    def attributes(self, node: Node) -> Attributes:
        if isinstance(node, FileNode):
            # An open file's size is the length of the bytes its reads serve, whatever
            # the row says meanwhile: a larger size than those bytes reads as NUL padding.
            # Every call answers the kernel, which from now on caches the current size.
            self.state.served.pop(node.ino, None)
            buffer = self.state.buffers.get(node.ino)
            node.told_size = len(buffer) if buffer is not None else node.size
            return Attributes(
                ino=node.ino,
                mode=node.mode & ~self.umask,
                nlink=node.nlink,
                uid=self.uid,
                gid=self.gid,
                size=node.told_size,
                atime_ns=node.mtime_ns,
                mtime_ns=node.mtime_ns,
                ctime_ns=node.ctime_ns,
                birth_ns=node.created_ns,
            )
        if isinstance(node, SymlinkNode):
            return Attributes(
                ino=node.ino,
                mode=node.mode & ~self.umask,
                nlink=1,
                uid=self.uid,
                gid=self.gid,
                size=len(node.target),
                atime_ns=node.mtime_ns,
                mtime_ns=node.mtime_ns,
                ctime_ns=node.ctime_ns,
                birth_ns=node.ctime_ns,
            )
        assert isinstance(node, DirNode)
        return Attributes(
            ino=node.ino,
            mode=node.mode & ~self.umask,
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
        node = self.state.tree.get(ino)
        if isinstance(node, FileNode) and node.parent is None and self._gone(node):
            refuse_stale(node)
        return self.attributes(node)

    def _gone(self, node: FileNode) -> bool:
        """Removed and not open (or open only through handles that failed): a stat of it
        comes through a stale kernel entry, not a descriptor that still uses it."""
        return all(h.failed is not None for h in self.state.handles.values() if h.node is node)

    async def lookup(self, parent_ino: int, name: str, pid: int = 0) -> Node:
        """Resolve a name and take one kernel reference on the result; a name not there
        under a synthetic tree is that tree's to make (a ``.search`` query).  A document
        name not there is what process ``pid`` found (``SaverBases.absent``)."""
        parent = self.state.tree.get_dir(parent_ino)
        special = await self._root_file(name) if parent is self.state.tree.root else None
        if special is not None:
            special.lookups += 1
            return special
        if isinstance(parent, SyntheticDir) and name not in (".", ".."):
            existing = parent.children.get(name)
            extension = self.extension_of(parent)
            # A name it does not hold yet, or one it decides anew at each lookup.
            if extension is not None and (existing is None or extension.volatile(existing)):
                # What it derives from the database sees this mount's removals and moves,
                # also those on their way (a thread hop when none are).
                await self.db.flush_changes()
                made = await extension.make_entry(self.state.tree, parent, name)
                if made is not None:
                    made.lookups += 1
                    return made
        if name == ".":
            node: Node | None = parent
        elif name == "..":
            node = parent.parent or self.state.tree.root
        else:
            node = parent.children.get(name)
        if node is not None and self.drop_displaced(node):
            node = None
        if node is None:
            self._saw_absent(parent, name, pid)
            raise FsError(errno.ENOENT)
        node.lookups += 1
        return node

    async def _root_file(self, name: str) -> Node | None:
        """``.prompt``, ``.status`` or ``.status.json`` (None: another name)."""
        for files in self.root_files:
            node = await files.lookup(self.state.tree, name)
            if node is not None:
                return node
        return None

    def root_file_of(self, node: Node) -> RootFile | None:
        """The root files ``node`` is one of (None: it is not)."""
        if isinstance(node, SyntheticFile) and node.parent is self.state.tree.root:
            for files in self.root_files:
                if files.shows(node):
                    return files
        return None

    def _saw_absent(self, parent: DirNode, name: str, pid: int) -> None:
        """Process ``pid`` found no ``name`` in ``parent``: a document it writes there next
        may start from an empty file (``SaverBases.absent``)."""
        if pid <= 0 or parent.scratch or isinstance(parent, SyntheticDir):
            return
        if parent is self.state.tree.root and name in self.rules.tool_folders:
            return
        if self.rules.classify(name) is not Kind.DOCUMENT:
            return
        try:
            below = self.state.tree.path_of(parent)
        except FsError:
            return  # a removed folder
        self.bases.absent(f"{below}/{name}" if below else name, pid)

    def extension_of(self, node: Node) -> SyntheticTree | None:
        """The synthetic tree a node belongs to (None: the workspace's own)."""
        top: Node | None = node
        while top is not None and top.parent is not self.state.tree.root:
            top = top.parent
        return self.synthetic_roots.get(top.ino) if top is not None else None

    def volatile_name(self, node: Node) -> bool:
        """Whether the kernel must not cache this name (a search query's directory)."""
        if self.root_file_of(node) is not None:
            return True
        if not isinstance(node, SYNTHETIC):
            return False
        extension = self.extension_of(node)
        return extension is not None and extension.volatile(node)

    async def synthetic_content(self, node: ScopedFile) -> bytes:
        """A lazily read synthetic file's bytes, from the tree that made it."""
        extension = self.extension_of(node)
        return await extension.read(node) if extension is not None else b""

    def remember(self, node: Node) -> None:
        """Count a kernel reference handed out outside ``lookup`` (READDIRPLUS)."""
        node.lookups += 1

    def forget(self, items: list[tuple[int, int]]) -> None:
        for ino, count in items:
            self.state.tree.forget(ino, count)
            self.drop_if_freed(ino)

    def mark_node_contended(self, node: FileNode) -> None:
        """``mark_contended`` for the path a file is shown at (none: it is not shown)."""
        if node.parent is not None:
            self.state.mark_contended(self.state.tree.path_of(node))

    def drop_displaced(self, node: Node) -> bool:
        """Take out a file whose row another node took (``FileNode.displaced``) unless it
        has changes of its own; True if it went.  Kept, it would be an empty new file a
        reader's open and close would save as a document nobody wrote."""
        if not isinstance(node, FileNode) or not node.displaced or node.doc_id is not None:
            return False
        if self.state.ns_lock.locked():
            return False  # a rename under way may be displacing it: its own step removes it
        if self.state.has_changes(node):
            return False
        if node.parent is None:
            return True
        log.info("%s: its row is shown at another name now; this name goes",
                 self.describe_node(node))  # fmt: skip
        return self.state.take_out_unchanged(node)

    def drop_if_freed(self, ino: int) -> None:
        """Forget per-inode state once the inode number is released."""
        if self.state.forget_freed(ino):
            self.saves.untrack(ino)

    def readlink(self, ino: int) -> bytes:
        node = self.state.tree.get(ino)
        if not isinstance(node, SymlinkNode):
            raise FsError(errno.EINVAL, "not a symbolic link")
        return node.target

    def statfs(self) -> StatFs:
        used_blocks = inodes = 0
        for node in self.state.tree.inodes.values():  # one pass; editors call statfs often
            inodes += 1
            if isinstance(node, FileNode):
                used_blocks += (node.size + STATFS_BLOCK - 1) // STATFS_BLOCK
        return StatFs(
            block_size=STATFS_BLOCK,
            blocks=STATFS_BLOCKS,
            blocks_free=STATFS_BLOCKS - used_blocks,
            files=STATFS_FILES,
            files_free=STATFS_FILES - inodes,
            name_max=255,
        )
