"""Tool folders: top-level folders where tools keep their own state (``.obsidian``,
``.trash``, ``.vscode``, …), kept across mounts but never memory.

Everything in one is scratch to the model (any bytes, never chunked, searched or written
to the agent's tables), and its files and folders are kept in memfs's own schema
(``memfs.tool_files``), for every mount of the workspace: a mount loads them at start and
writes what changed after each operation that can change them (close, fsync, rename,
unlink, mkdir, rmdir, attribute changes) and before unmount, all the differences in one
transaction.  What changed is found by comparing each tool file's signature (inode,
buffer generation, size, mode, mtime) with the one last written, so no operation needs a
rule of its own, whatever pattern a tool saves with.
"""

from __future__ import annotations

import logging
import stat
from typing import Protocol

import trio

from memfs.buffers import FileBuffer, ScratchBuffer, ScratchSpill
from memfs.db.calls import RunDb
from memfs.db.tool_file_store import ToolFile, ToolFileStore
from memfs.scratch import ScratchRules
from memfs.tree import DirNode, FileNode, Node, Tree

log = logging.getLogger("memfs.vfs")

Signature = tuple[object, ...]


class ToolHost(Protocol):
    """What of the filesystem model tool folders read and add to."""

    tree: Tree
    buffers: dict[int, FileBuffer | ScratchBuffer]
    spill: ScratchSpill
    rules: ScratchRules


class ToolFolders:
    """One workspace's tool folders: loaded at mount, written back as they change."""

    def __init__(self, store: ToolFileStore, calls: RunDb) -> None:
        self.store = store
        self.calls = calls
        #: What was last written, by path.
        self.persisted: dict[str, Signature] = {}
        self.lock = trio.Lock()

    # -- what the mount shows --------------------------------------------------------------

    @staticmethod
    def top(fs: ToolHost, node: Node) -> str | None:
        """The tool folder ``node`` lies in (None: it is not in one)."""
        current: Node | None = node
        while current is not None and current.parent is not fs.tree.root:
            current = current.parent
        if current is None or not current.scratch or not isinstance(current, DirNode):
            return None
        return current.name if current.name in fs.rules.tool_folders else None

    def _current(self, fs: ToolHost) -> dict[str, tuple[Node, Signature]]:
        found: dict[str, tuple[Node, Signature]] = {}
        for name in sorted(fs.rules.tool_folders):
            top = fs.tree.root.children.get(name)
            if not isinstance(top, DirNode) or not top.scratch:
                continue
            stack: list[tuple[str, Node]] = [(name, top)]
            while stack:
                path, node = stack.pop()
                if isinstance(node, DirNode):
                    found[path] = (node, ("dir", stat.S_IMODE(node.mode)))
                    stack.extend((f"{path}/{n}", c) for n, c in node.children.items())
                elif isinstance(node, FileNode):
                    buffer = fs.buffers.get(node.ino)
                    generation = getattr(buffer, "generation", None)
                    size = len(buffer) if isinstance(buffer, ScratchBuffer) else node.size
                    mode = stat.S_IMODE(node.mode)
                    found[path] = (node, ("file", node.ino, generation, size, mode, node.mtime_ns))
        return found

    # -- loading and writing -------------------------------------------------------------

    async def load(self, fs: ToolHost) -> None:
        """Make the kept tool files and folders (each folder before what is in it)."""
        rows = await self.calls(self.store.load)
        shown = 0
        for row in rows:
            parent_path, _, name = row.path.rpartition("/")
            if row.path.split("/")[0] not in fs.rules.tool_folders:
                continue
            parent = fs.tree.resolve(parent_path) if parent_path else fs.tree.root
            if not isinstance(parent, DirNode) or (
                parent is not fs.tree.root and not parent.scratch
            ):
                log.warning("tool file %r has no folder to go in: not shown", row.path)
                continue
            if name in parent.children:
                log.warning("tool file %r: a document holds that name: not shown", row.path)
                continue
            node: Node
            if row.is_dir:
                node = fs.tree.new_dir(name, row.mode, row.mtime_ns)
            else:
                node = fs.tree.new_file(name, row.mode, row.mtime_ns)
                node.size = len(row.content)
                fs.buffers[node.ino] = ScratchBuffer(fs.spill, row.content)
                shown += 1
            node.scratch = True
            fs.tree.attach(parent, node)
        self.persisted = {path: signature for path, (_, signature) in self._current(fs).items()}
        if rows:
            log.info("tool folders: %d files kept from earlier mounts", shown)

    async def sync(self, fs: ToolHost) -> None:
        """Write every tool file and folder that changed since the last write (one
        transaction), and remove those that went."""
        async with self.lock:
            current = self._current(fs)
            removed = [path for path in self.persisted if path not in current]
            changed = {
                path: (node, signature)
                for path, (node, signature) in current.items()
                if self.persisted.get(path) != signature
            }
            if not removed and not changed:
                return
            upserts = []
            for path, (node, _) in changed.items():
                content = b""
                if isinstance(node, FileNode):
                    buffer = fs.buffers.get(node.ino)
                    content = buffer.snapshot() if buffer is not None else b""
                upserts.append(
                    ToolFile(path, node.is_dir, content, stat.S_IMODE(node.mode), node.mtime_ns)
                )
            await self.calls(self.store.apply, upserts, removed)
            for path in removed:
                del self.persisted[path]
            for path, (_, signature) in changed.items():
                self.persisted[path] = signature
            log.debug("tool folders: %d written, %d removed", len(upserts), len(removed))
