"""Names: create, mkdir, unlink, rmdir, rename, links, and the scratch overlay's rules.

A name is a document or scratch (``memfs.scratch``).  Moving between the two is where
editors' saves happen, and where memfs keeps a document's identity:

* scratch -> document (rsync/sed/VS Code temporaries, unison temp directories): the rename
  is the commit.  The content goes into the row already at the target path (UPDATE, same
  id, versions saved) or a new row, with the mode and mtime the tool set.
* document -> scratch (vim and emacs ``x -> x~``): the row is left untouched and remembered
  by its path in ``detached``; the next file created at that path takes the row over, so
  the whole save is one UPDATE.  Unlinking the backup with no new file deletes the row;
  renaming it back restores it.  If the daemon stops mid-save, the row is as it was.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from typing import Protocol, TypedDict
from uuid import UUID

from memfs.db.deferred import Change, Delete, DropDir, KeepDir, Moved, MoveDir
from memfs.db.interface import FileAttrs, Overwritten, Rename
from memfs.errors import FsError
from memfs.paths import check_new_name
from memfs.recovery import RecoveryArea
from memfs.scratch import REFUSED_NAMES, Kind
from memfs.tree import SYNTHETIC, DirNode, FileNode, Node
from memfs.vfs.base import ReindexRequests, log
from memfs.vfs.buffers import FileBuffer, ScratchBuffer
from memfs.vfs.commits import Commits
from memfs.vfs.content import Contents
from memfs.vfs.replacing import Replacements
from memfs.vfs.roles import Caching, Clocked, Describing, Stateful, StoreAccess
from memfs.vfs.saves import SavePatterns
from memfs.vfs.tool_folders import ToolFolders, ToolHost


class RenameFlags(TypedDict, total=False):
    """rename(2)'s flags and the renaming process, as the fronts pass them on."""

    noreplace: bool
    exchange: bool
    pid: int


@dataclass(frozen=True)
class _Renaming:
    """One rename, resolved: where from, where to, what it replaces and what the new
    name holds (``Kind``)."""

    old_parent: DirNode
    old_name: str
    source: Node
    new_parent: DirNode
    new_name: str
    new_path: str
    target: Node | None
    kind: Kind


class NameLookups(ToolHost, Stateful, StoreAccess, Caching, Clocked, Describing, Protocol):
    """What the name operations ask of the lookups: the mount's state, store and content
    cache, the clock, names for log lines, the scratch rules, spill and recovery area,
    the tool folders, the reindexer, and the lookups and checks of names below."""

    read_only: bool
    recovery: RecoveryArea | None
    tools: ToolFolders | None
    reindexer: ReindexRequests | None

    def adopt_moved(self, moved: dict[UUID, Moved]) -> None: ...

    def adopt_version(self, node: FileNode, versions: Moved) -> None: ...

    def attached_dir(self, ino: int) -> DirNode: ...

    def check_storable(self, path: str, below: int = 0) -> None: ...

    def child(self, parent_ino: int, name: str) -> tuple[DirNode, Node]: ...

    def kind(self, parent: DirNode, name: str, *, is_dir: bool = False) -> Kind: ...

    def refuse_if_read_only(self) -> None: ...

    def request_reindex(self, *doc_ids: UUID) -> None: ...

    def touch_dir(self, directory: DirNode) -> None: ...

    def writable_dir(self, ino: int) -> DirNode: ...


class Names:
    """Operations that add, remove or move names."""

    def __init__(
        self,
        lookups: NameLookups,
        contents: Contents,
        commits: Commits,
        replacing: Replacements,
        patterns: SavePatterns,
    ) -> None:
        #: What this part asks of the mount's lookups (``NameLookups``).
        self.lookups = lookups
        self.state = lookups.state
        #: Open files (``memfs.vfs.content``): a create opens what it makes.
        self.contents = contents
        #: The save path (``memfs.vfs.commits``): a rename commits what it moves.
        self.commits = commits
        #: The rows a rename puts something else in the place of (``memfs.vfs.replacing``).
        self.replacing = replacing
        #: Editors' saves: what a create or a rename through a scratch name makes
        #: (``memfs.vfs.saves``).
        self.patterns = patterns
        #: Documents and kept directories a move into a tool folder took out of memory:
        #: removed from the database once the tool folder has them (``sync_tools``, which
        #: ``hooks.ToolFolderHook`` calls after each operation).
        self.leaving_memory: list[Delete] = []
        self.leaving_dirs: list[str] = []

    def _refuse(self, name: str) -> None:
        if name in REFUSED_NAMES:
            raise FsError(
                errno.EPERM,
                f"{name!r} is refused: a repository kept only in the daemon would vanish at "
                "unmount with its history (memory keeps versions in memory_document_versions)",
            )

    def _not_synthetic(self, parent: DirNode, node: Node) -> None:
        self.lookups.refuse_if_read_only()
        if isinstance(parent, SYNTHETIC) or isinstance(node, SYNTHETIC):
            raise FsError(errno.EROFS, "search results are read-only")

    def _keep_if_emptied(self, parent: DirNode, leaving: Node) -> list[str]:
        """Directories an operation leaves without documents: kept, as a disk would keep them."""
        if parent is self.state.tree.root or parent.explicit or parent.scratch:
            return []
        if any(c is not leaving and not c.scratch for c in parent.children.values()):
            return []
        return [self.state.tree.path_of(parent)]

    # -- creating ------------------------------------------------------------------------

    def _new_entry(self, parent_ino: int, name: str) -> tuple[DirNode, str]:
        """The directory a new name goes into, and its full path; errno if it cannot."""
        parent = self.lookups.writable_dir(parent_ino)
        self._refuse(name)
        path = check_new_name(self.state.tree.path_of(parent), name)
        if name in parent.children:
            raise FsError(errno.EEXIST)
        return parent, path

    async def mkdir(self, parent_ino: int, name: str, mode: int) -> Node:
        async with self.state.ns_lock:
            parent, path = self._new_entry(parent_ino, name)
            kind = self.lookups.kind(parent, name, is_dir=True)
            if kind is Kind.DOCUMENT:
                self.lookups.check_storable(path)
            if kind is Kind.DOCUMENT and self.lookups.db.deferring():
                self.lookups.db.defer(KeepDir(path))
            elif kind is Kind.DOCUMENT:
                await self.lookups.db.run_db(self.lookups.store.create_directory, path)
            node = self.state.tree.new_dir(name, mode, self.lookups.clock())
            node.explicit = kind is Kind.DOCUMENT
            node.scratch = kind is not Kind.DOCUMENT
            self.state.tree.attach(parent, node)
            node.lookups += 1
            self.lookups.touch_dir(parent)
            return node

    async def create(
        self, parent_ino: int, name: str, mode: int, flags: int, pid: int = 0
    ) -> tuple[int, Node]:
        """Create and open a new, empty file; a document reaches the database at close.

        The kernel sends CREATE after a lookup found no such name; by the time it arrives
        another writer's file may have appeared there (the change feed).  Without O_EXCL
        that is an ordinary open of the existing file, as on a local disk, not EEXIST.
        """
        async with self.state.ns_lock:
            existing = self.lookups.attached_dir(parent_ino).children.get(name)
            if isinstance(existing, FileNode) and not flags & os.O_EXCL:
                reopen = existing
            else:
                reopen = None
                fh, node = self._create_locked(parent_ino, name, mode, flags, pid)
        if reopen is not None:  # outside the lock: open may read from the database
            fh, _ = await self.contents.open(reopen.ino, flags, pid)
            reopen.lookups += 1
            return fh, reopen
        return fh, node

    def _create_locked(
        self, parent_ino: int, name: str, mode: int, flags: int, pid: int = 0
    ) -> tuple[int, FileNode]:
        """A new file (or scratch file) and its handle; the caller holds ``ns_lock``."""
        parent, path = self._new_entry(parent_ino, name)
        kind = self.lookups.kind(parent, name)
        if kind is Kind.DOCUMENT:
            self.lookups.check_storable(path)
        node = self.state.tree.new_file(name, mode, self.lookups.clock())
        buffer: FileBuffer | ScratchBuffer
        if kind is Kind.DOCUMENT:
            buffer = FileBuffer(b"", dirty=True)
            buffer.writer = pid
            buffer.appends_only = bool(flags & os.O_APPEND)
        else:
            node.scratch = True
            buffer = ScratchBuffer(self.lookups.spill)
        self.patterns.created(node, path, kind, buffer, pid)
        self.state.tree.attach(parent, node)
        node.lookups += 1
        self.lookups.touch_dir(parent)
        self.state.buffers[node.ino] = buffer
        writable = (flags & 0o3) != 0
        return self.contents.open_handle(node, buffer, writable, flags), node

    async def symlink(self, parent_ino: int, name: str, target: bytes, pid: int = 0) -> Node:
        """Symbolic links exist only as scratch (emacs lock files); EPERM for documents.
        An emacs lock file tells what its process edits (``SavePatterns.linked``)."""
        async with self.state.ns_lock:
            parent, path = self._new_entry(parent_ino, name)
            if self.lookups.kind(parent, name) is Kind.DOCUMENT:
                raise FsError(errno.EPERM, "documents cannot be symbolic links")
            self.patterns.linked(path, name, pid)
            node = self.state.tree.new_symlink(name, target, self.lookups.clock())
            self.state.tree.attach(parent, node)
            node.lookups += 1
            self.lookups.touch_dir(parent)
            return node

    async def link(self, ino: int, parent_ino: int, name: str) -> Node:
        """Hard links exist only between scratch names; EPERM for documents."""
        async with self.state.ns_lock:
            node = self.state.tree.get(ino)
            parent, _ = self._new_entry(parent_ino, name)
            if not (isinstance(node, FileNode) and node.scratch and node.nlink > 0):
                raise FsError(errno.EPERM, "documents cannot have hard links")
            if self.lookups.kind(parent, name) is Kind.DOCUMENT:
                raise FsError(errno.EPERM, "a document name cannot be a hard link")
            self.state.tree.add_link(node, parent, name)
            node.lookups += 1
            self.lookups.touch_dir(parent)
            return node

    # -- removing ------------------------------------------------------------------------

    async def unlink(self, parent_ino: int, name: str) -> None:
        async with self.state.ns_lock:
            parent, node = self.lookups.child(parent_ino, name)
            self._not_synthetic(parent, node)
            if isinstance(node, DirNode):
                raise FsError(errno.EISDIR)
            if node.scratch:
                await self.replacing.delete_abandoned_origin(node)
                self.state.tree.remove_entry(parent, name)
                self.lookups.touch_dir(parent)
                self.lookups.drop_if_freed(node.ino)
                return
            assert isinstance(node, FileNode)
            if node.doc_id is not None:
                await self._settle_moves()
            keep = self._keep_if_emptied(parent, node)
            if node.doc_id is not None or keep:
                removal = None
                if node.doc_id is not None:  # only the version this mount shows
                    removal = Delete(node.doc_id, node.updated_at, self.state.tree.path_of(node))
                await self._delete_later(removal, keep)
            if node.doc_id is not None:
                self.lookups.cache.drop(node.doc_id)
            if keep:
                parent.explicit = True
            self.commits.unsaved.saved(node)
            self.state.tree.detach(node)
            self.lookups.touch_dir(parent)
            self.lookups.drop_if_freed(node.ino)

    async def _settle_moves(self) -> None:
        """A folder move not sent yet (or not taken in) first: it changes the version of
        every row below it, and a removal or rename guards on the version this mount
        shows (``mv a b; rm b/x`` in one burst skipped the ``rm`` as another writer's
        change).  A round trip only in that case."""
        if self.lookups.store.moving():
            await self.lookups.db.flush_changes()

    async def _delete_later(
        self, removal: Delete | None, keep: list[str], drop_dir: str | None = None
    ) -> None:
        """Leave a document's delete (or an ``rmdir``) for the next transaction: ``rm -rf``
        then costs a round trip per batch, not per entry."""
        if self.lookups.db.deferring():
            changes: list[Change] = [] if removal is None else [removal]
            changes += [DropDir(drop_dir)] if drop_dir is not None else []
            self.lookups.db.defer(*changes, *(KeepDir(path) for path in keep))
        elif removal is not None:
            await self.lookups.db.run_db(
                self.lookups.store.delete_document, removal.doc_id, keep, removal.seen
            )
        elif drop_dir is not None:
            await self.lookups.db.run_db(self.lookups.store.delete_directory, drop_dir, keep)
        else:
            await self.lookups.db.run_db(self.lookups.store.create_directory, keep[0])

    @staticmethod
    def _longest_below(node: Node) -> int:
        """Bytes the longest path below a directory adds to its own (0 for a file)."""
        longest = 0
        stack = [(node, 0)]
        while stack:
            current, depth = stack.pop()
            if isinstance(current, DirNode):
                for name, child in current.children.items():
                    stack.append((child, depth + 1 + len(name.encode())))
            longest = max(longest, depth)
        return longest

    async def rmdir(self, parent_ino: int, name: str) -> None:
        async with self.state.ns_lock:
            parent, node = self.lookups.child(parent_ino, name)
            self._not_synthetic(parent, node)
            if not isinstance(node, DirNode):
                raise FsError(errno.ENOTDIR)
            if node.children:
                raise FsError(errno.ENOTEMPTY)
            if not node.scratch:
                keep = self._keep_if_emptied(parent, node)
                if node.explicit or keep:
                    await self._delete_later(None, keep, self.state.tree.path_of(node))
                if keep:
                    parent.explicit = True
            self.state.tree.detach(node)
            self.lookups.touch_dir(parent)

    # -- renaming ------------------------------------------------------------------------

    async def rename(  # noqa: PLR0913 - rename(2): four names, its flags and the caller
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
        if exchange:
            raise FsError(errno.EINVAL, "RENAME_EXCHANGE is not supported")
        async with self.state.ns_lock:
            old_parent, source = self.lookups.child(old_parent_ino, old_name)
            self._not_synthetic(old_parent, source)
            new_parent = self.lookups.writable_dir(new_parent_ino)
            self._refuse(new_name)
            new_path = check_new_name(self.state.tree.path_of(new_parent), new_name)
            target = new_parent.children.get(new_name)
            if target is source:
                return
            self._check_replaceable(source, new_parent, target, noreplace=noreplace)
            if isinstance(source, FileNode) or isinstance(target, FileNode):
                await self._settle_moves()
            kind = self.lookups.kind(new_parent, new_name, is_dir=source.is_dir)
            if kind is Kind.DOCUMENT:
                self.lookups.check_storable(new_path, self._longest_below(source))
            move = _Renaming(old_parent, old_name, source, new_parent, new_name, new_path, target,
                             kind)  # fmt: skip
            await self._rename_rows(move, pid)
            self._rename_entries(move)

    def _check_replaceable(
        self, source: Node, new_parent: DirNode, target: Node | None, *, noreplace: bool
    ) -> None:
        """rename(2)'s refusals: a name taken (with ``RENAME_NOREPLACE``), a folder into
        itself or over a file or a non-empty folder, a file over a folder."""
        if target is not None and noreplace:
            raise FsError(errno.EEXIST)
        if isinstance(source, DirNode):
            if self.state.tree.is_within(new_parent, source):
                raise FsError(errno.EINVAL, "cannot move a directory into itself")
            if target is not None and not isinstance(target, DirNode):
                raise FsError(errno.ENOTDIR)
            if isinstance(target, DirNode) and target.children:
                raise FsError(errno.ENOTEMPTY)
        elif isinstance(target, DirNode):
            raise FsError(errno.EISDIR)

    async def _rename_rows(self, move: _Renaming, pid: int) -> None:
        """The database side of a rename, by what the source is and where it goes: into
        memory, out of it (scratch, a tool folder) or within it."""
        old_parent, source, new_parent = move.old_parent, move.source, move.new_parent
        new_name, new_path, target, kind = move.new_name, move.new_path, move.target, move.kind
        if source.scratch and kind is not Kind.DOCUMENT:
            await self.replacing.replace_target(target)
        elif source.scratch:
            await self.patterns.scratch_to_document(source, new_path, target, pid)
        elif kind is not Kind.DOCUMENT:
            if isinstance(source, DirNode) and self._into_tool_folder(new_parent, new_name):
                await self._folder_leaves_memory(source, target)
            else:
                await self.patterns.document_to_scratch(source, target)
        else:
            keep = [] if old_parent is new_parent else self._keep_if_emptied(old_parent, source)
            if isinstance(source, DirNode):
                await self._rename_dir(source, new_path, target, keep)
            else:
                assert isinstance(source, FileNode)
                await self._rename_file(source, new_path, target, keep, pid)
            if keep:
                old_parent.explicit = True

    def _rename_entries(self, move: _Renaming) -> None:
        """The tree side of a rename, once the database has it."""
        old_parent, old_name, source = move.old_parent, move.old_name, move.source
        new_parent, new_name, target, kind = move.new_parent, move.new_name, move.target, move.kind
        if target is not None:
            if new_parent.children.get(new_name) is target:
                self.state.tree.remove_entry(new_parent, new_name)
            self.lookups.drop_if_freed(target.ino)
        self.state.tree.rename_entry(old_parent, old_name, new_parent, new_name)
        if isinstance(source, FileNode):
            self.patterns.renamed(source, kind)
        self.lookups.touch_dir(old_parent)
        self.lookups.touch_dir(new_parent)

    async def _rename_file(
        self, source: FileNode, new_path: str, target: Node | None, keep: list[str], pid: int = 0
    ) -> None:
        replaced, seen = self.patterns.replaced_at(target, new_path, source.doc_id)
        if source.doc_id is None:
            # Not committed yet: its first commit adopts the row at the new path (so a
            # write-temp-then-rename save keeps the target document's identity).
            if keep:
                await self.lookups.db.run_db(self.lookups.store.create_directory, keep[0])
            return
        attrs = FileAttrs(source.custom_mode, source.mtime_ns)
        if replaced is not None and replaced != source.doc_id:
            await self.patterns.rename_file_over(source, replaced, new_path, keep, seen, pid, attrs)
            return
        rename = Rename(source.doc_id, new_path, self.state.tree.path_of(source), keep)
        over = Overwritten(replaced, seen) if replaced is not None else None
        moved = await self.lookups.db.run_db(
            self.lookups.store.rename_document, rename, attrs, over
        )
        self.lookups.request_reindex(source.doc_id)
        if replaced is not None:
            self.lookups.cache.drop(replaced)
        if moved is None:
            log.warning("document %s vanished from the database during rename", source.doc_id)
            return
        self.lookups.adopt_version(source, moved)
        source.client_mtime_ns = source.mtime_ns
        source.ctime_ns = self.lookups.clock()

    async def _rename_dir(
        self, source: DirNode, new_path: str, target: Node | None, keep: list[str]
    ) -> None:
        old_path = self.state.tree.path_of(source)
        replaced = self.state.tree.path_of(target) if isinstance(target, DirNode) else None
        if self.lookups.db.deferring():
            # The paths of every document below are rewritten with the next transaction;
            # each moved file takes its row's new version from the answer (_adopt_moves),
            # and no other call of this mount reaches the database before it has (run_db).
            self.lookups.db.defer(
                MoveDir(old_path, new_path, replaced), *(KeepDir(p) for p in keep)
            )
            self.patterns.folder_moved(old_path, new_path)
            source.explicit = source.explicit or (isinstance(target, DirNode) and target.explicit)
            return
        moved = await self.lookups.db.run_db(
            self.lookups.store.rename_directory, old_path, new_path, replaced, keep
        )
        self.patterns.folder_moved(old_path, new_path)
        self.lookups.adopt_moved(moved)
        source.explicit = source.explicit or (isinstance(target, DirNode) and target.explicit)

    def _into_tool_folder(self, parent: DirNode, name: str) -> bool:
        """Whether ``name`` in ``parent`` is inside (or is) a tool folder."""
        if self.lookups.tools is None:
            return False
        if parent is self.state.tree.root:
            return name in self.lookups.rules.tool_folders
        top: Node = parent
        while top.parent is not None and top.parent is not self.state.tree.root:
            top = top.parent
        return top.scratch and top.name in self.lookups.rules.tool_folders

    async def _folder_leaves_memory(self, source: DirNode, target: Node | None) -> None:
        """A folder of documents moved into a tool folder (Obsidian's delete to ``.trash``):
        every document below becomes a tool file with its content; the rows go once the
        tool folder has kept them (``leaving_memory``, sent by ``sync_tools``)."""
        await self.replacing.replace_target(target)
        for node in list(self.state.tree.iter_files(source)):
            if node.scratch:
                continue
            data = await self.commits.content_now(node)
            if node.doc_id is not None:
                self.leaving_memory.append(
                    Delete(node.doc_id, node.updated_at, self.state.tree.path_of(node))
                )
                self.lookups.cache.drop(node.doc_id)
                self.state.tree.unbind_document(node)
            node.scratch = True
            self.commits.unsaved.saved(node)
            self.state.set_buffer(node, ScratchBuffer(self.lookups.spill, data))
        folders: list[DirNode] = [source]
        while folders:
            folder = folders.pop()
            if folder.explicit:
                self.leaving_dirs.append(self.state.tree.path_of(folder))
            folder.scratch, folder.explicit = True, False
            folders.extend(c for c in folder.children.values() if isinstance(c, DirNode))
        log.info(
            "%s moved into a tool folder with its documents", self.lookups.describe_node(source)
        )

    # -- tool folders (memfs.vfs.tool_folders) ---------------------------------------------

    async def sync_tools(self) -> bool:
        """Write what changed in the tool folders; False (and a log line) if it failed:
        what was not written stays in memory and goes with the next operation's write."""
        if self.lookups.tools is None or self.lookups.read_only:
            return True
        try:
            await self.lookups.tools.sync(self.lookups)
            # Documents a move took into a tool folder leave memory once it has them.
            while self.leaving_memory:
                await self._delete_later(self.leaving_memory[0], [])
                self.leaving_memory.pop(0)
            while self.leaving_dirs:
                await self._delete_later(None, [], self.leaving_dirs[0])
                self.leaving_dirs.pop(0)
        except FsError as exc:
            log.error("tool folders: changes not kept yet (%s); retried later", exc.reason)
            return False
        return True

    async def retry_tools(self) -> None:
        """Write what an earlier tool-folder write could not (the upkeep loop's call; no
        query when everything is written)."""
        if self.lookups.tools is None or self.lookups.read_only:
            return
        if (
            self.leaving_memory
            or self.leaving_dirs
            or not self.lookups.tools.persisted_all(self.lookups)
        ):
            await self.sync_tools()
        if self.lookups.tools.pending:  # another mount's change waited for a file to be closed
            await self.refresh_tools()

    async def refresh_tools(self) -> int:
        """Take in other mounts' changes to the tool folders (told by the change feed, or
        looked for by the polling loop)."""
        if self.lookups.tools is None:
            return 0
        if not self.lookups.read_only and (
            self.leaving_memory
            or self.leaving_dirs
            or not self.lookups.tools.persisted_all(self.lookups)
        ):
            await self.sync_tools()  # a write that failed earlier goes first
        try:
            return await self.lookups.tools.refresh(self.lookups)
        except FsError as exc:
            log.warning("tool folders: other mounts' changes not read (%s)", exc.reason)
            return 0

    # -- tentative scratch -----------------------------------------------------------------

    async def shutdown(self) -> list[str]:
        """At unmount: promote every tentative file, then commit every dirty document.

        Returns what could not be saved: each is in the recovery area (``memfs recover``).
        """
        await self.patterns.promote_all()
        await self.commits.commit_all()
        try:
            await self.lookups.db.flush_changes()
        except FsError as exc:
            log.error("removals and moves were not sent at unmount: %s", exc.reason)
        if self.lookups.reindexer is not None:
            await self.lookups.reindexer.finish()
        if self.lookups.recovery is not None:
            return self.lookups.recovery.kept()
        return [self.lookups.describe_node(node) for node in self.state.unsaved.values()]
