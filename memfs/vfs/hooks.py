"""What runs around the model's operations: the façade's fixed list of hooks.

``Filesystem`` makes each operation through its collaborators, then hands a ``Done`` to
every hook in its list (``unmount`` is heard as the unmount begins, so what a hook writes
then is committed and sent with the rest).  A hook may refuse a change of size before it
is made (``check_size``) and may fail an operation after it (an ``FsError`` from
``after``).
Today's one hook is the tool folders' (``ToolFolderHook``): what an operation changed in
a tool folder is written to memfs's own table, and a document moved into one leaves
memory once it is kept there.  Neither ``content`` nor ``namespace`` knows of it.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Literal, Protocol

from memfs.errors import FsError
from memfs.tree import FileNode, Node
from memfs.vfs.base import log
from memfs.vfs.namespace import Names
from memfs.vfs.roles import Caching, Describing, SaverTables, StoreAccess
from memfs.vfs.tool_folders import TOOL_FILE_MAX_BYTES, ToolFolders, ToolHost

#: The operations hooks hear of (those that can change a tool folder, and the unmount).
Operation = Literal[
    "load", "release", "flush", "fsync", "mkdir", "unlink", "rmdir", "setattr", "rename",
    "unmount",
]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Done:
    """An operation the model has made, as the hooks see it."""

    operation: Operation
    #: The file a handle open for writing was open on (release, flush: a reader's close
    #: is not heard) or a rename's source, as it was found before the operation.
    node: Node | None = None
    #: A rename's source was a document with a row (it may have left memory).
    was_document: bool = False


class OperationHook(Protocol):
    """One entry of the façade's list of hooks."""

    def check_size(self, node: FileNode, size: int) -> None:
        """Refuse (``FsError``) a write or truncation that would make ``node`` ``size``
        bytes long, before it is made."""

    async def after(self, done: Done) -> None:
        """Run after ``done`` was made; an ``FsError`` fails the operation."""


class ToolHookLookups(ToolHost, StoreAccess, Caching, SaverTables, Describing, Protocol):
    """What the tool-folder hook asks of the lookups: what tool folders read and add to
    (``ToolHost``), and, for a document moved into one, the store, the content cache,
    the editors' saves and names for log lines."""


class ToolFolderHook:
    """Tool folders (``.obsidian``, ``.trash``, ...) kept in memfs's own table."""

    def __init__(self, tools: ToolFolders, lookups: ToolHookLookups, names: Names) -> None:
        self.tools = tools
        self.lookups = lookups
        self.names = names

    def in_tool_folder(self, node: Node) -> bool:
        return self.tools.top(self.lookups, node) is not None

    def check_size(self, node: FileNode, size: int) -> None:
        if size > TOOL_FILE_MAX_BYTES and self.in_tool_folder(node):
            log.error("%s: a tool-folder file may not grow past %d bytes; refused (EFBIG)",
                      self.lookups.describe_node(node), TOOL_FILE_MAX_BYTES)  # fmt: skip
            raise FsError(errno.EFBIG, f"tool-folder files are limited to {TOOL_FILE_MAX_BYTES} "
                          "bytes")  # fmt: skip

    async def after(self, done: Done) -> None:
        match done.operation:
            case "load":
                await self.tools.load(self.lookups)
            case "flush":
                # A tool-folder file is kept at close like a document (durable before
                # close returns), not at the release that follows it asynchronously.
                if done.node is not None and self.in_tool_folder(done.node):
                    await self._sync_or_fail()
            case "fsync":
                await self._sync_or_fail()
            case "rename":
                kept = await self.names.sync_tools()
                if kept and done.was_document and isinstance(done.node, FileNode):
                    await self._leave_memory(done.node)
            case _:
                await self.names.sync_tools()

    async def _sync_or_fail(self) -> None:
        if not await self.names.sync_tools():
            raise FsError(errno.EIO, "tool folder files could not be kept")

    async def _leave_memory(self, source: FileNode) -> None:
        """A document moved into a tool folder (Obsidian's delete to ``.trash``) leaves
        memory: kept as a tool file first (``sync_tools``), then its row is deleted."""
        if source.origin_doc_id is None or not self.in_tool_folder(source):
            return
        doc_id = source.origin_doc_id
        lookups = self.lookups
        # Only as this mount showed the row: another writer's change meanwhile stays.
        await lookups.db.run_db(lookups.store.delete_document, doc_id, [], source.updated_at)
        lookups.cache.drop(doc_id)
        lookups.saves.release(source)
        log.info("%s moved into a tool folder: kept there, no longer memory",
                 lookups.describe_node(source))  # fmt: skip
