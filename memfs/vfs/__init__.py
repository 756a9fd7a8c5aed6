"""The filesystem model: what each FUSE operation means for a workspace.

``Filesystem`` changes the mount's state (``MountState``: the inode tree, the open handles
and their buffers) and talks to the database only through a
``memfs.db.interface.DocumentStore``, whose calls run in worker
threads (never on the trio loop).  It knows nothing of pyfuse3: ``memfs.fuse_ops``
translates requests to these coroutines and ``FsError`` to errno replies, so the whole
model is testable by calling it directly.

The mount's state has one owner, ``state.MountState`` (the tree, open files, buffers,
unsaved files, the listings the kernel holds, the namespace lock), whose methods keep its
invariants.  The operations over it come in three layers: ``base`` (attributes, lookups,
listings), ``content`` (buffers and commits), ``namespace`` (names, renames, the scratch
overlay).
Around it, each built separately and passed in or handed the filesystem: ``saves``
(editors' save patterns), ``extensions`` (``.search`` in ``search_dir``, ``.scopes`` in
``scopes``, ``.versions`` in ``versions_dir``), ``coherence`` (other writers' changes),
``maintenance`` (background upkeep).
"""

from __future__ import annotations

import errno
from typing import Any

from memfs.errors import FsError
from memfs.tree import FileNode, Node
from memfs.vfs.at_dir import AtTree
from memfs.vfs.base import Attributes, ReindexRequests, StatFs, log
from memfs.vfs.coherence import OtherWriters
from memfs.vfs.extensions import SyntheticTree
from memfs.vfs.maintenance import Maintenance
from memfs.vfs.namespace import NamespaceMixin
from memfs.vfs.prompt_file import PromptFile
from memfs.vfs.recent_dir import RecentTree
from memfs.vfs.scopes import ScopesTree
from memfs.vfs.search_dir import SearchTree
from memfs.vfs.state import Handle, MountState
from memfs.vfs.status_file import StatusFiles
from memfs.vfs.tool_folders import TOOL_FILE_MAX_BYTES, ToolFolders
from memfs.vfs.versions_dir import VersionsTree

__all__ = [
    "AtTree",
    "Attributes",
    "Filesystem",
    "Handle",
    "Maintenance",
    "MountState",
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


class Filesystem(NamespaceMixin):
    """A workspace seen as a POSIX directory tree, built complete by its constructor.

    Here the operations that can change a tool folder are followed by writing what changed
    in it (``ToolFolders.sync``), so neither ``content`` nor ``namespace`` has to know.
    """

    async def load(self) -> None:
        await super().load()
        if self.tools is not None:
            await self.tools.load(self)

    async def release(self, fh: int) -> None:
        handle = self.state.handles.get(fh)
        wrote = handle is not None and handle.writable
        await super().release(fh)
        if wrote:  # a reader's close changes no tool folder (a warm grep -r closes 100,000)
            await self._sync_tools()

    def _tool_file(self, fh: int) -> FileNode | None:
        """The node open as ``fh`` if it is a file in a tool folder."""
        handle = self.state.handles.get(fh)
        if handle is None or self.tools is None or self.tools.top(self, handle.node) is None:
            return None
        return handle.node

    def _bound_tool_file(self, node: FileNode, size: int) -> None:
        if size > TOOL_FILE_MAX_BYTES:
            log.error("%s: a tool-folder file may not grow past %d bytes; refused (EFBIG)",
                      self.describe_node(node), TOOL_FILE_MAX_BYTES)  # fmt: skip
            raise FsError(errno.EFBIG, f"tool-folder files are limited to {TOOL_FILE_MAX_BYTES} "
                          "bytes")  # fmt: skip

    async def write(self, fh: int, offset: int, data: bytes) -> int:
        node = self._tool_file(fh)
        if node is not None:
            start = len(self.state.handles[fh].buffer) if self.state.handles[fh].append else offset
            self._bound_tool_file(node, start + len(data))
        return await super().write(fh, offset, data)

    async def flush(self, fh: int) -> None:
        """A tool-folder file is kept at close like a document (durable before close
        returns), not at the release that follows it asynchronously."""
        await super().flush(fh)
        handle = self.state.handles.get(fh)
        tool_file = handle is not None and handle.writable and self._tool_file(fh) is not None
        if tool_file and not await self._sync_tools():
            raise FsError(errno.EIO, "tool folder files could not be kept")

    async def fsync(self, fh: int) -> None:
        await super().fsync(fh)
        if not await self._sync_tools():
            raise FsError(errno.EIO, "tool folder files could not be kept")

    async def mkdir(self, parent_ino: int, name: str, mode: int) -> Node:
        node = await super().mkdir(parent_ino, name, mode)
        await self._sync_tools()
        return node

    async def unlink(self, parent_ino: int, name: str) -> None:
        await super().unlink(parent_ino, name)
        await self._sync_tools()

    async def rmdir(self, parent_ino: int, name: str) -> None:
        await super().rmdir(parent_ino, name)
        await self._sync_tools()

    async def setattr(self, ino: int, **changes: Any) -> Attributes:
        size = changes.get("size")
        node = self.state.tree.inodes.get(ino)
        if (size is not None and isinstance(node, FileNode) and self.tools is not None
                and self.tools.top(self, node) is not None):  # fmt: skip
            self._bound_tool_file(node, size)
        attributes = await super().setattr(ino, **changes)
        await self._sync_tools()
        return attributes

    async def rename(
        self,
        old_parent_ino: int,
        old_name: str,
        new_parent_ino: int,
        new_name: str,
        *,
        noreplace: bool = False,
        exchange: bool = False,
        pid: int = 0,
    ) -> None:
        """A document moved into a tool folder (Obsidian's delete to ``.trash``) leaves
        memory: kept as a tool file first, then its row is deleted."""
        source = self._attached_dir(old_parent_ino).children.get(old_name)
        leaving = isinstance(source, FileNode) and not source.scratch and source.doc_id is not None
        await super().rename(
            old_parent_ino, old_name, new_parent_ino, new_name,
            noreplace=noreplace, exchange=exchange, pid=pid,
        )  # fmt: skip
        kept = await self._sync_tools()
        if (
            leaving
            and kept
            and isinstance(source, FileNode)
            and source.origin_doc_id is not None
            and self.tools is not None
            and self.tools.top(self, source) is not None
        ):
            doc_id = source.origin_doc_id
            # Only as this mount showed the row: another writer's change meanwhile stays.
            await self.run_db(self.store.delete_document, doc_id, [], source.updated_at)
            self.cache.drop(doc_id)
            self.saves.release(source)
            log.info(
                "%s moved into a tool folder: kept there, no longer memory",
                self.describe_node(source),
            )

    async def shutdown(self) -> list[str]:
        await self._sync_tools()
        return await super().shutdown()
