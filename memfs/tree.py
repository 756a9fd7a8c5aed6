"""The in-memory inode tree of one workspace: names, inode numbers, attributes.

Pure bookkeeping with no I/O, so every rule here is unit-testable without a mount or a
database.  Documents are file nodes; directories are implied by path prefixes (plus the
ones memfs keeps in ``memfs.directories``).  Inode numbers are handed out per session and
never reused while the kernel may still know them: a removed node stays in ``inodes``
until its lookup count drops to zero and no handle has it open (pyfuse3's lookup-count
contract, as in its ``examples/tmpfs.py``).
"""

from __future__ import annotations

import errno
import logging
import stat
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import TypeVar
from uuid import UUID

from memfs.errors import FsError
from memfs.paths import join

log = logging.getLogger(__name__)

#: A stored document as the tree loads it: id, path, size, created and updated (its
#: version), and the mode and mtime a client set (None: the defaults).
StoredDocument = tuple[UUID, str, int, datetime, datetime, int | None, int | None]

ROOT_INODE = 1
DEFAULT_FILE_MODE = 0o644
DEFAULT_DIR_MODE = 0o755


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _without(
    links: tuple[tuple[DirNode, str], ...], link: tuple[DirNode, str]
) -> tuple[tuple[DirNode, str], ...]:
    """``links`` less the first ``link``."""
    at = links.index(link)
    return links[:at] + links[at + 1 :]


def to_ns(moment: datetime) -> int:
    """A timestamp as integer nanoseconds since the epoch (microsecond precision from PG)."""
    since = moment - _EPOCH
    return (since.days * 86_400 + since.seconds) * 1_000_000_000 + since.microseconds * 1000


class Node:
    """A file or directory; ``parent is None`` means removed from the namespace (or root)."""

    __slots__ = ("ctime_ns", "ino", "lookups", "mode", "mtime_ns", "name", "parent", "scratch")

    is_dir = False

    def __init__(self, ino: int, name: str, mode: int, mtime_ns: int) -> None:
        self.ino = ino
        self.name = name
        self.parent: DirNode | None = None
        self.mode = mode
        self.mtime_ns = mtime_ns
        self.ctime_ns = mtime_ns
        #: References the kernel holds (lookup, create, readdirplus), released by forget.
        self.lookups = 0
        #: Lives only in the daemon (editor/sync-tool scratch); never a database row.
        self.scratch = False

    @property
    def pinned(self) -> bool:
        """True while the kernel or an open handle may still use this inode number."""
        return self.lookups > 0


class FileNode(Node):
    """A document (committed when ``doc_id`` is set) with its size and version."""

    __slots__ = (
        "client_mtime_ns",
        "created_ns",
        "digest_version",
        "displaced",
        "doc_id",
        "extra_links",
        "kernel_digest",
        "kernel_version",
        "open_count",
        "origin_doc_id",
        "size",
        "told_size",
        "updated_at",
    )

    def __init__(self, ino: int, name: str, mode: int, mtime_ns: int) -> None:
        super().__init__(ino, name, mode, mtime_ns)
        self.doc_id: UUID | None = None
        self.size = 0
        #: The size the kernel was last given in attributes (None: none yet); it may keep
        #: it for the attribute timeout.
        self.told_size: int | None = None
        self.created_ns = mtime_ns
        #: The row's updated_at as last seen: the document's version.
        self.updated_at: datetime | None = None
        #: mtime set by a client (utimens) and not overtaken by a later write.
        self.client_mtime_ns: int | None = None
        self.open_count = 0
        #: For a document renamed to a scratch name (vim's ``x -> x~``): the row it came
        #: from, which stays in the database until the save completes or is abandoned.
        self.origin_doc_id: UUID | None = None
        #: Further (parent, name) entries of a hard-linked scratch file (a tuple: the empty
        #: one is shared, not a list per document).
        self.extra_links: tuple[tuple[DirNode, str], ...] = ()
        #: Its row went to another node (a save here found the row, moved there by another
        #: writer, at the other node's name): the name stands for nothing any more.
        self.displaced = False
        #: The version of the content the kernel may hold in its page cache (None: none).
        self.kernel_version: datetime | None = None
        #: SHA-256 of the bytes of ``digest_version`` as last given to the kernel: the base
        #: a reader's unloaded open records (``Contents._open_unloaded``); valid only
        #: while that version is the one shown.  On the node, not in a dict of the mount:
        #: after a ``grep -r`` of 100,000 files, 12 MB less.
        self.kernel_digest: bytes | None = None
        self.digest_version: datetime | None = None

    @property
    def nlink(self) -> int:
        return (1 if self.parent is not None else 0) + len(self.extra_links)

    @property
    def pinned(self) -> bool:
        return self.lookups > 0 or self.open_count > 0 or bool(self.extra_links)

    @property
    def custom_mode(self) -> int | None:
        """The permission bits if they differ from the default (persisted beside the row)."""
        perm = stat.S_IMODE(self.mode)
        return None if perm == DEFAULT_FILE_MODE else perm


class DirNode(Node):
    """A directory; ``explicit`` when memfs keeps a row for it in ``memfs.directories``.
    ``generation`` counts the changes to its list of names (the kernel may cache that list)."""

    __slots__ = ("children", "explicit", "generation", "subdirs")

    is_dir = True

    def __init__(self, ino: int, name: str, mode: int, mtime_ns: int) -> None:
        super().__init__(ino, name, mode, mtime_ns)
        self.children: dict[str, Node] = {}
        self.explicit = False
        self.subdirs = 0
        self.generation = 0


class SyntheticDir(DirNode):
    """A read-only directory the daemon makes up (``.search`` and its query directories)."""

    __slots__ = ()


class SyntheticFile(FileNode):
    """A read-only file whose exact bytes the daemon holds (search results, README)."""

    __slots__ = ("data",)

    def __init__(self, ino: int, name: str, data: bytes, mtime_ns: int) -> None:
        super().__init__(ino, name, stat.S_IFREG | 0o444, mtime_ns)
        self.data = data
        self.size = len(data)


class ScopedFile(SyntheticFile):
    """A read-only document of another user's workspace (``--read-scope``), read lazily."""

    __slots__ = ("scope_index", "source_id")

    def __init__(self, ino: int, name: str, size: int, mtime_ns: int) -> None:
        super().__init__(ino, name, b"", mtime_ns)
        self.size = size
        self.scope_index = 0
        self.source_id: UUID | None = None


SYNTHETIC = (SyntheticDir, SyntheticFile)


class SymlinkNode(Node):
    """A symbolic link; only ever scratch (emacs lock files)."""

    __slots__ = ("target",)

    def __init__(self, ino: int, name: str, target: bytes, mtime_ns: int) -> None:
        super().__init__(ino, name, stat.S_IFLNK | 0o777, mtime_ns)
        self.target = target
        self.scratch = True


#: Any kind of node, as made.
NodeT = TypeVar("NodeT", bound=Node)


class Tree:
    """Inode table plus namespace of one mounted workspace.

    ``on_listing_change`` is told every directory whose list of names changes (a name
    added, removed or moved, or a file marked displaced, whose name goes at its next
    lookup), whoever changed it: the kernel's cached listings follow from it."""

    def __init__(
        self, now_ns: int, on_listing_change: Callable[[DirNode], None] | None = None
    ) -> None:
        self.root = DirNode(ROOT_INODE, "", stat.S_IFDIR | DEFAULT_DIR_MODE, now_ns)
        self.inodes: dict[int, Node] = {ROOT_INODE: self.root}
        self.docs: dict[UUID, FileNode] = {}
        self._next_ino = ROOT_INODE + 1
        self._on_listing_change = on_listing_change

    def _listing_changed(self, directory: DirNode) -> None:
        directory.generation += 1
        if self._on_listing_change is not None:
            self._on_listing_change(directory)

    # -- lookups -------------------------------------------------------------------------

    def get(self, ino: int) -> Node:
        try:
            return self.inodes[ino]
        except KeyError:
            raise FsError(errno.ENOENT, f"inode {ino} is not known") from None

    def get_dir(self, ino: int) -> DirNode:
        node = self.get(ino)
        if not isinstance(node, DirNode):
            raise FsError(errno.ENOTDIR, f"inode {ino} is not a directory")
        return node

    def get_file(self, ino: int) -> FileNode:
        node = self.get(ino)
        if not isinstance(node, FileNode):
            raise FsError(errno.EISDIR, f"inode {ino} is a directory")
        return node

    def path_of(self, node: Node) -> str:
        """Workspace-relative path of an attached node ('' for the root)."""
        parts: list[str] = []
        cur: Node | None = node
        while cur is not None and cur is not self.root:
            parts.append(cur.name)
            cur = cur.parent
        if cur is None:
            raise FsError(errno.ENOENT, f"inode {node.ino} was removed")
        return "/".join(reversed(parts))

    def shown_documents(self) -> dict[UUID, tuple[datetime | None, str] | None]:
        """Every document's version and path as shown (None: not in the tree), in one walk
        of the tree (``path_of`` per document climbs to the root each time: a resync at
        100,000 documents called it 300,000 times; a second dict of paths cost as much
        again in hashing the ids)."""
        found: dict[UUID, tuple[datetime | None, str] | None] = {}
        docs = self.docs
        pending: list[tuple[DirNode, str]] = [(self.root, "")]
        while pending:
            directory, prefix = pending.pop()
            for name, child in directory.children.items():
                if child.parent is not directory or child.name != name:
                    continue  # another name of a hard-linked file
                if isinstance(child, DirNode):
                    pending.append((child, prefix + name + "/"))
                elif (
                    isinstance(child, FileNode)
                    and child.doc_id is not None
                    and docs.get(child.doc_id) is child
                ):
                    found[child.doc_id] = (child.updated_at, prefix + name)
        if len(found) < len(docs):
            for doc_id in docs:
                found.setdefault(doc_id, None)
        return found

    def resolve(self, path: str) -> Node | None:
        node: Node = self.root
        if not path:
            return node
        for part in path.split("/"):
            if not isinstance(node, DirNode):
                return None
            child = node.children.get(part)
            if child is None:
                return None
            node = child
        return node

    def is_within(self, node: Node, ancestor: DirNode) -> bool:
        """True if ``node`` is ``ancestor`` or lies below it."""
        cur: Node | None = node
        while cur is not None:
            if cur is ancestor:
                return True
            cur = cur.parent
        return False

    def iter_files(self, directory: DirNode) -> Iterator[FileNode]:
        """Every file below ``directory``, depth first."""
        stack: list[DirNode] = [directory]
        while stack:
            current = stack.pop()
            for child in current.children.values():
                if isinstance(child, FileNode):
                    yield child
                elif isinstance(child, DirNode):
                    stack.append(child)

    # -- building ------------------------------------------------------------------------

    def _new_ino(self) -> int:
        ino = self._next_ino
        self._next_ino += 1
        return ino

    def _registered(self, node: NodeT) -> NodeT:
        """A new node, known by its inode number (not in the namespace yet)."""
        self.inodes[node.ino] = node
        return node

    def new_file(self, name: str, mode: int, now_ns: int) -> FileNode:
        mode = stat.S_IFREG | stat.S_IMODE(mode)
        return self._registered(FileNode(self._new_ino(), name, mode, now_ns))

    def new_dir(self, name: str, mode: int, now_ns: int) -> DirNode:
        mode = stat.S_IFDIR | stat.S_IMODE(mode)
        return self._registered(DirNode(self._new_ino(), name, mode, now_ns))

    def new_synthetic_dir(self, name: str, now_ns: int) -> SyntheticDir:
        mode = stat.S_IFDIR | 0o555
        return self._registered(SyntheticDir(self._new_ino(), name, mode, now_ns))

    def new_synthetic_file(self, name: str, data: bytes, mtime_ns: int) -> SyntheticFile:
        return self._registered(SyntheticFile(self._new_ino(), name, data, mtime_ns))

    def new_scoped_file(self, name: str, size: int, mtime_ns: int) -> ScopedFile:
        return self._registered(ScopedFile(self._new_ino(), name, size, mtime_ns))

    def new_symlink(self, name: str, target: bytes, now_ns: int) -> SymlinkNode:
        return self._registered(SymlinkNode(self._new_ino(), name, target, now_ns))

    def add_link(self, node: FileNode, parent: DirNode, name: str) -> None:
        """Give a (scratch) file another name: a hard link."""
        if name in parent.children:
            raise FsError(errno.EEXIST, f"{name!r} already exists")
        parent.children[name] = node
        node.extra_links = (*node.extra_links, (parent, name))
        self._listing_changed(parent)

    def remove_entry(self, parent: DirNode, name: str) -> Node:
        """Remove one name; a hard-linked file keeps its other names."""
        node = parent.children[name]
        if isinstance(node, FileNode) and node.extra_links:
            if (parent, name) in node.extra_links:
                node.extra_links = _without(node.extra_links, (parent, name))
                del parent.children[name]
                self._listing_changed(parent)
                return node
            del parent.children[name]
            self._listing_changed(parent)
            node.parent, node.name = node.extra_links[-1]
            node.extra_links = node.extra_links[:-1]
            return node
        self.detach(node)
        return node

    def rename_entry(
        self, old_parent: DirNode, old_name: str, new_parent: DirNode, new_name: str
    ) -> Node:
        """Move one name of a node (the primary name or a hard link) to a new place."""
        node = old_parent.children[old_name]
        if isinstance(node, FileNode) and (old_parent, old_name) in node.extra_links:
            if new_name in new_parent.children:
                raise FsError(errno.EEXIST, f"{new_name!r} already exists")
            del old_parent.children[old_name]
            node.extra_links = (
                *_without(node.extra_links, (old_parent, old_name)),
                (new_parent, new_name),
            )
            new_parent.children[new_name] = node
            self._listing_changed(old_parent)
            self._listing_changed(new_parent)
            return node
        self.move(node, new_parent, new_name)
        return node

    def attach(self, parent: DirNode, node: Node) -> None:
        if node.name in parent.children:
            raise FsError(errno.EEXIST, f"{node.name!r} already exists")
        parent.children[node.name] = node
        node.parent = parent
        if node.is_dir:
            parent.subdirs += 1
        self._listing_changed(parent)
        if isinstance(node, FileNode) and node.doc_id is not None:
            self.docs[node.doc_id] = node

    def detach(self, node: Node) -> None:
        """Take a node out of the namespace; free its inode unless still pinned."""
        parent = node.parent
        if parent is not None and parent.children.get(node.name) is node:
            del parent.children[node.name]
            if node.is_dir:
                parent.subdirs -= 1
            self._listing_changed(parent)
        node.parent = None
        if (
            isinstance(node, FileNode)
            and node.doc_id is not None
            and self.docs.get(node.doc_id) is node
        ):
            del self.docs[node.doc_id]
        self._maybe_free(node)

    def move(self, node: Node, new_parent: DirNode, new_name: str) -> None:
        """Re-link a node under another name; the inode number stays the same."""
        old_parent = node.parent
        if old_parent is not None:
            del old_parent.children[node.name]
            if node.is_dir:
                old_parent.subdirs -= 1
            self._listing_changed(old_parent)
        node.name = new_name
        node.parent = None
        self.attach(new_parent, node)

    def bind_document(self, node: FileNode, doc_id: UUID) -> None:
        """Record that a file node is now backed by row ``doc_id``."""
        if node.doc_id is not None and self.docs.get(node.doc_id) is node:
            del self.docs[node.doc_id]
        node.doc_id = doc_id
        node.displaced = False
        if node.parent is not None:
            previous = self.docs.get(doc_id)
            if previous is not None and previous is not node:
                previous.doc_id = None
                previous.displaced = True
                if previous.parent is not None:
                    self._listing_changed(previous.parent)
            self.docs[doc_id] = node

    def unbind_document(self, node: FileNode) -> None:
        """The node no longer stands for its row (it took a scratch name)."""
        if node.doc_id is not None and self.docs.get(node.doc_id) is node:
            del self.docs[node.doc_id]
        node.doc_id = None

    def _maybe_free(self, node: Node) -> None:
        if node.parent is None and node is not self.root and not node.pinned:
            self.inodes.pop(node.ino, None)

    def forget(self, ino: int, count: int) -> None:
        node = self.inodes.get(ino)
        if node is None or node is self.root:
            return
        node.lookups = max(node.lookups - count, 0)
        self._maybe_free(node)

    def release_handle(self, node: FileNode) -> None:
        node.open_count -= 1
        self._maybe_free(node)

    # -- loading -------------------------------------------------------------------------

    def ensure_dir(self, path: str, mtime_ns: int) -> DirNode | None:
        """The directory at ``path``, creating implied parents; None if a file is in the way."""
        node: DirNode = self.root
        if not path:
            return node
        for part in path.split("/"):
            child = node.children.get(part)
            if child is None:
                child = self.new_dir(part, DEFAULT_DIR_MODE, mtime_ns)
                self.attach(node, child)
            elif isinstance(child, FileNode):
                # IronClaw's listing shows the directory when a file and a prefix collide.
                log.warning(
                    "document %r is hidden: it has the same path as a directory "
                    "(IronClaw shows the directory too); rename one of them with SQL to see it",
                    self.path_of(child),
                )
                self.detach(child)
                child = self.new_dir(part, DEFAULT_DIR_MODE, mtime_ns)
                self.attach(node, child)
            assert isinstance(child, DirNode)
            node = child
        return node

    def load_document(self, row: StoredDocument) -> FileNode | None:
        """Add a stored document; None (and a log line) if it cannot be shown."""
        parent_path, _, name = row[1].rpartition("/")
        parent = self.ensure_dir(parent_path, to_ns(row[4]))
        if parent is None:
            return None
        return self._load_into(parent, name, row)

    def load_documents(self, rows: Iterable[StoredDocument]) -> None:
        """``load_document`` of every row of a workspace (a mount's load): each folder is
        found once, not once per document (at 100,000 documents, a second of the mount)."""
        folders: dict[str, DirNode | None] = {"": self.root}
        for row in rows:
            parent_path, _, name = row[1].rpartition("/")
            if parent_path in folders:
                parent = folders[parent_path]
            else:
                parent = folders[parent_path] = self.ensure_dir(parent_path, to_ns(row[4]))
            if parent is not None:
                self._load_into(parent, name, row)

    def _load_into(self, parent: DirNode, name: str, row: StoredDocument) -> FileNode | None:
        doc_id, path, size, created_at, updated_at, mode, mtime_ns = row
        existing = parent.children.get(name)
        if existing is not None:
            if existing.is_dir:
                log.warning(
                    "document %r (%s) is hidden: a directory has the same path", path, doc_id
                )
            else:
                log.warning(
                    "duplicate rows for %r: showing the newest, hiding %s "
                    "(IronClaw cannot read a path with two rows; delete one with SQL)",
                    path,
                    doc_id,
                )
            return None
        updated_ns = to_ns(updated_at)
        node = self.new_file(name, mode if mode is not None else DEFAULT_FILE_MODE, updated_ns)
        node.size = size
        node.created_ns = to_ns(created_at)
        node.updated_at = updated_at
        node.client_mtime_ns = mtime_ns
        node.mtime_ns = mtime_ns if mtime_ns is not None else updated_ns
        node.ctime_ns = updated_ns
        node.doc_id = doc_id
        self.attach(parent, node)
        return node

    def settle_dir_times(self) -> None:
        """Give each directory the newest mtime found below it (IronClaw's listing rule)."""

        def settle(directory: DirNode) -> int:
            newest = directory.mtime_ns
            for child in directory.children.values():
                child_time = settle(child) if isinstance(child, DirNode) else child.mtime_ns
                newest = max(newest, child_time)
            directory.mtime_ns = directory.ctime_ns = newest
            return newest

        settle(self.root)

    def count(self) -> tuple[int, int]:
        """(files, directories) in the namespace."""
        files = len([n for n in self.iter_files(self.root)])
        dirs = 0
        stack = [self.root]
        while stack:
            current = stack.pop()
            dirs += 1
            stack.extend(c for c in current.children.values() if isinstance(c, DirNode))
        return files, dirs


__all__ = [
    "ROOT_INODE",
    "SYNTHETIC",
    "DirNode",
    "FileNode",
    "Node",
    "SymlinkNode",
    "SyntheticDir",
    "SyntheticFile",
    "Tree",
    "join",
    "to_ns",
]
