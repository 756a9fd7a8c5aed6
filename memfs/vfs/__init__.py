"""The filesystem model: what each FUSE operation means for a workspace.

``Filesystem`` changes the mount's state (``MountState``: the inode tree, the open handles
and their buffers) and talks to the database only through a
``memfs.db.interface.DocumentStore``, whose calls run in worker
threads (never on the trio loop).  It knows nothing of pyfuse3: ``memfs.fuse_ops``
translates requests to these coroutines and ``FsError`` to errno replies, so the whole
model is testable by calling it directly.

The mount's state has one owner, ``state.MountState`` (the tree, open files, buffers,
unsaved files, the listings the kernel holds, the namespace lock), whose methods keep its
invariants.  The operations over it are made by parts, each given by its constructor
the parts it uses, none reaching back up: ``base.Lookups`` (the shared services,
attributes, lookups, listings), ``content.Contents`` (buffers and commits),
``replacing.Replacements`` (the rows a rename puts something else in the place of),
``saves.SavePatterns`` (editors' saves end to end: renamed-away originals, temporaries
renamed into place, tentative names) and ``namespace.Names`` (names, renames, the scratch
overlay).  ``Filesystem`` is the façade FUSE's adapter calls: each operation is made by
one part, then heard by a fixed list of hooks (``hooks``: the tool folders').  Other
writers' changes (``coherence``) arrive by their own events, not after an operation.
Around it, each built separately and passed in: ``extensions`` (``.search`` in
``search_dir``, ``.scopes`` in ``scopes``, ``.versions`` in ``versions_dir``, ``.at``,
``.recent``), the root files (``.prompt``, ``.status``), ``coherence`` and
``maintenance`` (background upkeep), each handed the parts (``parts.ModelParts``).
"""

from __future__ import annotations

import errno
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Unpack

import trio

from memfs.db.interface import DocumentStore
from memfs.errors import FsError
from memfs.tree import FileNode, Node
from memfs.vfs.at_dir import AtTree
from memfs.vfs.base import Attributes, Lookups, ModelOptions, ReindexRequests, StatFs
from memfs.vfs.coherence import OtherWriters
from memfs.vfs.commits import Commits
from memfs.vfs.committed import CommittedContent
from memfs.vfs.content import Contents
from memfs.vfs.extensions import SyntheticTree
from memfs.vfs.hooks import Done, OperationHook, ToolFolderHook
from memfs.vfs.listings import Listings
from memfs.vfs.maintenance import Maintenance
from memfs.vfs.merging import Merges
from memfs.vfs.namespace import Names, RenameFlags
from memfs.vfs.prompt_file import PromptFile
from memfs.vfs.recent_dir import RecentTree
from memfs.vfs.replacing import Replacements
from memfs.vfs.saves import SavePatterns
from memfs.vfs.scopes import ScopesTree
from memfs.vfs.search_dir import SearchTree
from memfs.vfs.state import Handle, MountState
from memfs.vfs.status_file import StatusFiles
from memfs.vfs.tool_folders import ToolFolders
from memfs.vfs.unsaved import UnsavedFiles
from memfs.vfs.versions_dir import VersionsTree
from memfs.vfs.writer_bases import WriterBases

__all__ = [
    "AtTree",
    "Attributes",
    "Contents",
    "Filesystem",
    "Handle",
    "Lookups",
    "Maintenance",
    "MountState",
    "Names",
    "OtherWriters",
    "PromptFile",
    "RecentTree",
    "ReindexRequests",
    "ScopesTree",
    "SearchTree",
    "StatFs",
    "StatusFiles",
    "SyntheticTree",
    "ToolFolders",
    "VersionsTree",
]


class Filesystem:
    """A workspace seen as a POSIX directory tree: the façade over the model's parts.

    Built complete by its constructor, which takes ``Lookups``'s arguments: the lookups
    are made first, then each part over those it uses, the names last.  Each
    operation is made by the part that owns it; those that can change a tool folder are
    then heard by the hooks, in order.
    """

    def __init__(self, store: DocumentStore, **options: Any) -> None:
        #: The shared services, database access, attributes, lookups and listings.
        self.lookups = Lookups(store, ModelOptions(**options))
        #: Every decision between a save and another writer's change: the base, the rule,
        #: the merged write and the safety net (``memfs.vfs.merging``).
        merges = Merges(self.lookups)
        lookups = self.lookups
        #: Directory listings, and which the kernel may keep.
        self.listings = Listings(lookups, lookups.state, lookups.kernel)
        #: The rows' bytes, through the content cache.
        self.committed = CommittedContent(lookups, lookups.state, lookups.cache, lookups.kernel)
        #: The save path: IronClaw's write, the merge, the safety net, what is kept unsaved.
        unsaved = UnsavedFiles(lookups, lookups.state, lookups.recovery)
        self.commits = Commits(lookups, merges, self.committed, unsaved)
        #: What each writer's save is based on (rule 1 of ``memfs.vfs.merging``).
        writer_bases = WriterBases(lookups.state, lookups.cache, lookups.bases, merges)
        #: Open files, buffers, reads and writes.
        self.contents = Contents(lookups, self.commits, self.committed, writer_bases)
        #: The rows a rename or a save puts something else in the place of.
        replacing = Replacements(lookups)
        #: Editors' saves: renamed-away originals, temporaries, tentative names.
        self.patterns = SavePatterns(lookups, self.commits, writer_bases, replacing, merges)
        #: Names: creating, removing, renaming, the scratch overlay, tool folders' sync.
        self.names = Names(lookups, self.contents, self.commits, replacing, self.patterns)
        #: Heard after the operations that can change a tool folder (``hooks``).
        self.hooks: tuple[OperationHook, ...] = ()
        if self.lookups.tools is not None:
            self.hooks = (ToolFolderHook(self.lookups.tools, self.lookups, self.names),)
        #: The mount's state (``MountState``) and its store, as the lookups hold them.
        self.state = self.lookups.state
        self.store = store

    async def _heard(self, done: Done) -> None:
        for hook in self.hooks:
            await hook.after(done)

    def _check_size(self, node: FileNode, size: int) -> None:
        for hook in self.hooks:
            hook.check_size(node, size)

    # -- whole-mount ---------------------------------------------------------------------

    async def load(self) -> None:
        await self.lookups.load()
        await self._heard(Done("load"))

    async def shutdown(self) -> list[str]:
        """At unmount: what the hooks keep, then ``Names.shutdown``; returns what could
        not be saved."""
        await self._heard(Done("unmount"))
        return await self.names.shutdown()

    async def send_changes(
        self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        await self.lookups.db.send_changes(task_status=task_status)

    async def flush_changes(self) -> None:
        await self.lookups.db.flush_changes()

    async def commit_all(self) -> None:
        await self.commits.commit_all()

    def unkept(self) -> list[str]:
        return self.commits.unsaved.unkept()

    def kept_copy(self, ino: int) -> str | None:
        return self.commits.unsaved.kept_copy(ino)

    def drain(self, folder: Path) -> tuple[list[str], list[str]]:
        return self.commits.unsaved.drain(folder)

    def describe_node(self, node: Node) -> str:
        return self.lookups.describe_node(node)

    # -- lookups, attributes, listings ---------------------------------------------------

    async def lookup(self, parent_ino: int, name: str, pid: int = 0) -> Node:
        return await self.lookups.lookup(parent_ino, name, pid)

    def attributes(self, node: Node) -> Attributes:
        return self.lookups.attributes(node)

    def getattr(self, ino: int) -> Attributes:
        return self.lookups.getattr(ino)

    def readlink(self, ino: int) -> bytes:
        return self.lookups.readlink(ino)

    def statfs(self) -> StatFs:
        return self.lookups.statfs()

    def remember(self, node: Node) -> None:
        self.lookups.remember(node)

    def forget(self, items: list[tuple[int, int]]) -> None:
        self.lookups.forget(items)

    def volatile_name(self, node: Node) -> bool:
        return self.lookups.volatile_name(node)

    async def prepare_listing(self, ino: int) -> None:
        await self.listings.prepare_listing(ino)

    def opendir(self, ino: int, *, kernel_caches: bool = False) -> int:
        return self.listings.opendir(ino, kernel_caches=kernel_caches)

    def listing_cached(self, fh: int) -> bool:
        return self.listings.listing_cached(fh)

    def listing_kept(self, fh: int) -> bool:
        return self.listings.listing_kept(fh)

    def readdir(self, fh: int, start: int) -> Iterator[tuple[int, str, Node]]:
        return self.listings.readdir(fh, start)

    def releasedir(self, fh: int) -> None:
        self.listings.releasedir(fh)

    # -- content -------------------------------------------------------------------------

    async def open(self, ino: int, flags: int, pid: int = 0) -> tuple[int, bool]:
        return await self.contents.open(ino, flags, pid)

    def direct_io(self, fh: int) -> bool:
        return self.contents.direct_io(fh)

    def flushes(self, fh: int) -> bool:
        return self.contents.flushes(fh)

    async def read(self, fh: int, offset: int, size: int) -> bytes:
        return await self.contents.read(fh, offset, size)

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        handle = self.state.handles.get(fh)
        if handle is not None and self.hooks:
            start = len(handle.buffer) if handle.append else offset
            self._check_size(handle.node, start + len(data))
        return await self.contents.write(fh, offset, data)

    async def flush(self, fh: int) -> None:
        await self.contents.flush(fh)
        handle = self.state.handles.get(fh)
        if handle is not None and handle.writable:  # a reader's close changes nothing
            await self._heard(Done("flush", handle.node))

    async def fsync(self, fh: int) -> None:
        await self.contents.fsync(fh)
        await self._heard(Done("fsync"))

    async def release(self, fh: int) -> None:
        handle = self.state.handles.get(fh)
        await self.contents.release(fh)
        if handle is not None and handle.writable:  # a warm grep -r closes 100,000
            await self._heard(Done("release", handle.node))

    async def setattr(self, ino: int, **changes: Any) -> Attributes:
        size = changes.get("size")
        node = self.state.tree.inodes.get(ino)
        if size is not None and isinstance(node, FileNode):
            self._check_size(node, size)
        attributes = await self.contents.setattr(ino, **changes)
        await self._heard(Done("setattr", node))
        return attributes

    async def stored_content(self, path: str) -> str | None:
        """The document at ``path`` as the database holds it now (one round trip, not the
        tree): what a compare-and-write compares with.  None if there is none."""
        found = await self.lookups.db.run_db(self.store.find_document, path)
        return None if found is None else found.content

    async def merge_metadata(self, ino: int, overlay: Mapping[str, Any]) -> None:
        """IronClaw's metadata of an agent's write (``memory_write``'s ``metadata``) merged
        into the saved document's own, then its chunks rebuilt to follow it (a
        ``skip_indexing`` drops them); ENOENT if no saved document is there."""
        node = self.state.tree.get_file(ino)
        lookups = self.lookups
        lookups.refuse_if_read_only()
        path = self.state.tree.path_of(node)
        merged = node.doc_id is not None and await lookups.db.run_db(
            self.store.merge_metadata, node.doc_id, path, dict(overlay)
        )
        if not merged or node.doc_id is None:
            raise FsError(errno.ENOENT, f"{path!r}: no saved document to set metadata on")
        if lookups.reindex_deferred():
            lookups.request_reindex(node.doc_id)
        else:
            await lookups.db.run_db(self.store.reindex, node.doc_id, path)
        lookups.documents_changed()

    # -- names ---------------------------------------------------------------------------

    async def mkdir(self, parent_ino: int, name: str, mode: int) -> Node:
        node = await self.names.mkdir(parent_ino, name, mode)
        await self._heard(Done("mkdir", node))
        return node

    async def create(
        self, parent_ino: int, name: str, mode: int, flags: int, pid: int = 0
    ) -> tuple[int, Node]:
        return await self.names.create(parent_ino, name, mode, flags, pid)

    async def symlink(self, parent_ino: int, name: str, target: bytes, pid: int = 0) -> Node:
        return await self.names.symlink(parent_ino, name, target, pid)

    async def link(self, ino: int, parent_ino: int, name: str) -> Node:
        return await self.names.link(ino, parent_ino, name)

    async def unlink(self, parent_ino: int, name: str) -> None:
        await self.names.unlink(parent_ino, name)
        await self._heard(Done("unlink"))

    async def rmdir(self, parent_ino: int, name: str) -> None:
        await self.names.rmdir(parent_ino, name)
        await self._heard(Done("rmdir"))

    async def rename(
        self,
        old_parent_ino: int,
        old_name: str,
        new_parent_ino: int,
        new_name: str,
        **flags: Unpack[RenameFlags],
    ) -> None:
        """rename(2) as ``Names.rename`` makes it, then told to the hooks."""
        source = None
        if self.hooks:
            source = self.lookups.attached_dir(old_parent_ino).children.get(old_name)
        document = isinstance(source, FileNode) and not source.scratch and source.doc_id is not None
        await self.names.rename(old_parent_ino, old_name, new_parent_ino, new_name, **flags)
        await self._heard(Done("rename", source, was_document=document))
