"""The workspace by path: the operations a front door without inodes calls (WebDAV, MCP,
the contract suite), each made of the very operations FUSE's adapter calls.

Nothing here is a rule of its own: a save is ``create`` or ``open(O_TRUNC)``, one
``write`` and ``release`` (one commit: one transaction, IronClaw's rows, the merge and
its safety net); a move is ``rename``; a removal is ``unlink`` or ``rmdir``.  Refusals are
the model's ``FsError`` with its errno, which each front turns into its own answer.
A path is the workspace path (``a/b.md``; ``""`` is the root), and names starting with a
dot reach the synthetic trees as on the mount (``.versions/a.md``, ``.search/q``).
"""

from __future__ import annotations

import builtins
import errno
import itertools
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memfs.errors import FsError
from memfs.paths import RESERVED_ROOT_NAMES, check_new_name
from memfs.tree import SYNTHETIC, DirNode, FileNode, Node
from memfs.vfs import Filesystem
from memfs.vfs.buffers import FileBuffer

#: How much a read asks at a time (a document is at most ``DOCUMENT_MAX_BYTES``).
READ_CHUNK = 1 << 20

#: Writer ids of the front doors' sessions start above Linux's largest pid (``pid_max``,
#: 4,194,304 on 64-bit): the merge's bases tell one session's reads from another's as
#: they tell processes apart on the mount, and never take one for a process.
FRONT_WRITERS = itertools.count(1 << 23)


@dataclass(frozen=True, slots=True)
class Entry:
    """One name of the workspace as a front shows it."""

    path: str
    is_dir: bool
    size: int
    mtime_ns: int
    #: The document's row version (None: a folder, or a file not saved yet): a front's
    #: ETag, and what a conditional save is checked against.
    version: datetime | None

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def split(path: str) -> list[str]:
    """The names of a workspace path (``"a/b.md"``, ``"/a/b.md/"`` alike); EINVAL for
    ``.`` and ``..``, which no front may use to leave the workspace."""
    names = [name for name in path.strip("/").split("/") if name]
    if any(name in (".", "..") for name in names):
        raise FsError(errno.EINVAL, f"{path!r}: '.' and '..' are not workspace names")
    return names


class PathOperations:
    """The workspace of one ``Filesystem``, addressed by path."""

    def __init__(self, fs: Filesystem, *, pid: int | None = None) -> None:
        #: The model every front shares (its rules, its state, its database).
        self.fs = fs
        #: Whose reads and saves these are, for the merge's bases: a save is based on
        #: what this session read last (by default a writer id of its own).
        self.pid = next(FRONT_WRITERS) if pid is None else pid

    # -- finding names -------------------------------------------------------------------

    async def node(self, path: str) -> Node:
        """The node at ``path`` (ENOENT, ENOTDIR as a lookup gives them)."""
        node: Node = self.fs.state.tree.root
        for name in split(path):
            if not isinstance(node, DirNode):
                raise FsError(errno.ENOTDIR, f"{path!r}: a file is no folder")
            node = await self.fs.lookup(node.ino, name, self.pid)
        return node

    async def _parent(self, path: str) -> tuple[DirNode, str]:
        names = split(path)
        if not names:
            raise FsError(errno.EINVAL, "the workspace root cannot be changed")
        parent = await self.node("/".join(names[:-1]))
        if not isinstance(parent, DirNode):
            raise FsError(errno.ENOTDIR, f"{path!r}: its parent is a file")
        return parent, names[-1]

    def entry(self, path: str, node: Node) -> Entry:
        attrs = self.fs.attributes(node)
        version = node.updated_at if isinstance(node, FileNode) else None
        return Entry(
            "/".join(split(path)), stat.S_ISDIR(attrs.mode), attrs.size, attrs.mtime_ns, version
        )

    async def stat(self, path: str) -> Entry:
        return self.entry(path, await self.node(path))

    async def exists(self, path: str) -> bool:
        try:
            await self.node(path)
        except FsError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return False
            raise
        return True

    async def list(self, path: str = "") -> list[Entry]:
        """A folder's entries, by name (what ``readdir`` lists, without ``.`` and ``..``)."""
        directory = await self.node(path)
        if not isinstance(directory, DirNode):
            raise FsError(errno.ENOTDIR, f"{path!r} is a file")
        await self.fs.prepare_listing(directory.ino)
        fh = self.fs.opendir(directory.ino)
        try:
            listed = [(name, node) for _, name, node in self.fs.readdir(fh, 0)]
        finally:
            self.fs.releasedir(fh)
        base = "/".join(split(path))
        return [
            self.entry(f"{base}/{name}" if base else name, node)
            for name, node in listed
            if name not in (".", "..")
        ]

    async def used_bytes(self, path: str = "") -> int:
        """The bytes of every file at or below ``path``, from the tree (no SQL): a
        front's quota report (WebDAV's ``quota-used-bytes``)."""
        stack = [await self.node(path)]
        used = 0
        while stack:
            node = stack.pop()
            if isinstance(node, DirNode):
                stack.extend(node.children.values())
            elif isinstance(node, FileNode):
                used += node.size
        return used

    async def documents(self, path: str = "") -> builtins.list[Entry]:
        """Every document at or below ``path``, by path, from the tree (no SQL): what the
        agent's tools and a front's resource list name.  Not the synthetic trees and root
        files, tool folders, scratch or a file not saved yet; nothing for a missing path."""
        try:
            start = await self.node(path)
        except FsError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return []
            raise
        found: builtins.list[Entry] = []
        stack: builtins.list[tuple[str, Node]] = [("/".join(split(path)), start)]
        root = self.fs.state.tree.root
        while stack:
            where, node = stack.pop()
            if isinstance(node, SYNTHETIC) or node.scratch:
                continue
            if isinstance(node, DirNode):
                for name, child in node.children.items():
                    hidden = RESERVED_ROOT_NAMES | self.fs.lookups.rules.tool_folders
                    if node is root and name in hidden:
                        continue
                    stack.append((f"{where}/{name}" if where else name, child))
            elif isinstance(node, FileNode) and node.doc_id is not None and not node.displaced:
                found.append(self.entry(where, node))
        return sorted(found, key=lambda entry: entry.path)

    # -- content -------------------------------------------------------------------------

    async def read(self, path: str) -> bytes:
        node = await self.node(path)
        if not isinstance(node, FileNode):
            raise FsError(errno.EISDIR, f"{path!r} is a folder")
        fh, _ = await self.fs.open(node.ino, os.O_RDONLY, self.pid)
        try:
            parts: list[bytes] = []
            offset = 0
            while True:
                data = await self.fs.read(fh, offset, READ_CHUNK)
                if not data:
                    return b"".join(parts)
                parts.append(data)
                offset += len(data)
        finally:
            await self.fs.release(fh)

    async def save(self, path: str, data: bytes, *, if_version: object = None) -> Entry:
        """The whole content of the document at ``path``, in one commit (created if it is
        not there; its folder must be).  ``if_version``: the version the writer last saw
        (its ETag); a document at another version is not overwritten (ESTALE)."""
        parent, name = await self._parent(path)
        existing = parent.children.get(name)
        if existing is None:
            existing = await self._looked_up(parent, name)
        if isinstance(existing, DirNode):
            raise FsError(errno.EISDIR, f"{path!r} is a folder")
        if if_version is not None and (
            not isinstance(existing, FileNode) or existing.updated_at != if_version
        ):
            raise FsError(errno.ESTALE, f"{path!r} changed since the version given")
        if isinstance(existing, FileNode):
            fh, _ = await self.fs.open(existing.ino, os.O_WRONLY | os.O_TRUNC, self.pid)
            node: Node = existing
        else:
            fh, node = await self.fs.create(
                parent.ino, name, 0o644, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, self.pid
            )
        buffer = self.fs.state.buffers.get(node.ino)
        if if_version is not None and isinstance(buffer, FileBuffer):
            buffer.only_at = if_version  # written over that version only, never merged
        try:
            if data:
                await self.fs.write(fh, 0, data)
            await self.fs.flush(fh)  # the commit's error reaches the caller here
        finally:
            try:
                await self.fs.release(fh)
            finally:
                if isinstance(buffer, FileBuffer):
                    buffer.only_at = None
        return self.entry(path, node)

    async def check_new(self, path: str) -> None:
        """What ``save`` refuses of a new name before it makes a document there (a folder
        missing or a file, a name IronClaw would not keep), making nothing: a front that
        learns of a new name before its content (a WebDAV PUT) stores nothing until the
        content is taken."""
        parent, name = await self._parent(path)
        check_new_name("/".join(split(path)[:-1]), name)
        if isinstance(parent.children.get(name), DirNode):
            raise FsError(errno.EISDIR, f"{path!r} is a folder")

    async def stored_content(self, path: str) -> str | None:
        """The document's content in the database now (``Filesystem.stored_content``)."""
        return await self.fs.stored_content("/".join(split(path)))

    async def merge_metadata(self, path: str, overlay: Mapping[str, Any]) -> None:
        """The document's own metadata with ``overlay``'s top-level keys over it
        (``Filesystem.merge_metadata``); ENOENT where no document is saved."""
        node = await self.node(path)
        if not isinstance(node, FileNode):
            raise FsError(errno.EISDIR, f"{path!r} is a folder")
        await self.fs.merge_metadata(node.ino, overlay)

    async def _looked_up(self, parent: DirNode, name: str) -> Node | None:
        try:
            return await self.fs.lookup(parent.ino, name, self.pid)
        except FsError as exc:
            if exc.errno == errno.ENOENT:
                return None
            raise

    # -- names ---------------------------------------------------------------------------

    async def mkdir(self, path: str) -> Entry:
        """A folder; EEXIST where any name is (as the kernel answers before asking)."""
        parent, name = await self._parent(path)
        if await self._looked_up(parent, name) is not None:
            raise FsError(errno.EEXIST, f"{path!r} exists")
        node = await self.fs.mkdir(parent.ino, name, 0o755)
        return self.entry(path, node)

    async def remove(self, path: str) -> None:
        """A document, or a folder and everything below it (deepest first)."""
        parent, name = await self._parent(path)
        node = await self.fs.lookup(parent.ino, name, self.pid)
        if isinstance(node, DirNode):
            for child in await self.list(path):
                await self.remove(child.path)
            await self.fs.rmdir(parent.ino, name)
        else:
            await self.fs.unlink(parent.ino, name)

    async def move(self, source: str, target: str, *, overwrite: bool = True) -> Entry:
        """``rename``: a document keeps its identity and versions; a folder moves whole.
        Without ``overwrite`` an existing target is refused (EEXIST)."""
        old_parent, old_name = await self._parent(source)
        await self.fs.lookup(old_parent.ino, old_name, self.pid)
        new_parent, new_name = await self._parent(target)
        await self.fs.rename(
            old_parent.ino, old_name, new_parent.ino, new_name,
            noreplace=not overwrite, pid=self.pid,
        )  # fmt: skip
        return await self.stat(target)

    async def copy(self, source: str, target: str, *, overwrite: bool = True) -> Entry:
        """A document's content saved anew at ``target``, or a folder copied whole."""
        node = await self.node(source)
        if not overwrite and await self.exists(target):
            raise FsError(errno.EEXIST, f"{target!r} exists")
        if isinstance(node, DirNode):
            if not await self.exists(target):
                await self.mkdir(target)
            for child in await self.list(source):
                await self.copy(child.path, f"{target.rstrip('/')}/{child.name}")
            return await self.stat(target)
        return await self.save(target, await self.read(source))
