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
import math
import os
from datetime import datetime
from typing import Any
from uuid import UUID

from memfs.buffers import FileBuffer, ScratchBuffer
from memfs.db.deferred import Change, Delete, DropDir, KeepDir, MoveDir
from memfs.db.interface import CommitResult, FileAttrs
from memfs.errors import DatabaseUnavailable, FsError
from memfs.ironclaw.hashing import bytes_hash
from memfs.merge import MERGE_LIMIT, mergeable
from memfs.paths import check_new_name
from memfs.scratch import REFUSED_NAMES, TENTATIVE_GRACE, Kind
from memfs.tree import SYNTHETIC, DirNode, FileNode, Node, to_ns
from memfs.vfs.base import Lookups, log
from memfs.vfs.content import Contents
from memfs.vfs.saves import Base

#: How emacs names the lock file of ``x`` it edits (a symbolic link).
EMACS_LOCK = ".#"


def _as_text(data: bytes, what: str) -> str:
    """Validate content about to become a document (EILSEQ if it is not text)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FsError(errno.EILSEQ, f"{what}: invalid UTF-8 at byte {exc.start}") from None
    if "\x00" in text:
        raise FsError(errno.EILSEQ, f"{what}: NUL byte at offset {data.index(0)}")
    return text


class Names:
    """Operations that add, remove or move names."""

    def __init__(self, lookups: Lookups, contents: Contents) -> None:
        #: Database access, attributes and lookups (``memfs.vfs.base``).
        self.lookups = lookups
        #: Buffers and commits (``memfs.vfs.content``): a rename commits what it moves.
        self.contents = contents
        #: The services this part uses, as the lookups hold them (one of each per mount).
        self.state = lookups.state
        self.store = lookups.store
        self.cache = lookups.cache
        self.calls = lookups.calls
        self.kernel = lookups.kernel
        self.saves = lookups.saves
        self.bases = lookups.bases
        self.spill = lookups.spill
        self.recovery = lookups.recovery
        self.rules = lookups.rules
        self.tools = lookups.tools
        self.reindexer = lookups.reindexer
        self.clock = lookups.clock
        self.monotonic = lookups.monotonic
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
            if kind is Kind.DOCUMENT and self.lookups.deferring():
                self.lookups.defer(KeepDir(path))
            elif kind is Kind.DOCUMENT:
                await self.lookups.run_db(self.store.create_directory, path)
            node = self.state.tree.new_dir(name, mode, self.clock())
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
        node = self.state.tree.new_file(name, mode, self.clock())
        buffer: FileBuffer | ScratchBuffer
        if kind is Kind.DOCUMENT:
            buffer = FileBuffer(b"", dirty=True)
            buffer.writer = pid
            buffer.appends_only = bool(flags & os.O_APPEND)
            claimed = self.saves.claim(path)
            if claimed is not None:
                node.doc_id, node.updated_at = claimed  # the version this save is based on
                log.debug("%r takes over the row of its renamed-away original", path)
                self.contents.adopt_saver_base(buffer, claimed[0], path, pid)
            else:  # its process may have found no file here: another writer's may be new
                self.contents.adopt_saver_base(buffer, None, path, pid)
        else:
            node.scratch = True
            buffer = ScratchBuffer(self.spill)
            if kind is Kind.TENTATIVE:
                self.saves.track(node.ino, idle=False)
        self.state.tree.attach(parent, node)
        node.lookups += 1
        self.lookups.touch_dir(parent)
        self.state.buffers[node.ino] = buffer
        writable = (flags & 0o3) != 0
        return self.contents.open_handle(node, buffer, writable, flags), node

    async def symlink(self, parent_ino: int, name: str, target: bytes, pid: int = 0) -> Node:
        """Symbolic links exist only as scratch (emacs lock files); EPERM for documents.
        An emacs lock file tells what its process edits (``SaverBases.editing``)."""
        async with self.state.ns_lock:
            parent, path = self._new_entry(parent_ino, name)
            if self.lookups.kind(parent, name) is Kind.DOCUMENT:
                raise FsError(errno.EPERM, "documents cannot be symbolic links")
            if name.startswith(EMACS_LOCK) and pid > 0:
                self.bases.editing(path[: len(path) - len(name)] + name[len(EMACS_LOCK) :], pid)
            node = self.state.tree.new_symlink(name, target, self.clock())
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
                await self._delete_abandoned_origin(node)
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
                self.cache.drop(node.doc_id)
            if keep:
                parent.explicit = True
            self.contents.saved(node)
            self.state.tree.detach(node)
            self.lookups.touch_dir(parent)
            self.lookups.drop_if_freed(node.ino)

    async def _settle_moves(self) -> None:
        """A folder move not sent yet (or not taken in) first: it changes the version of
        every row below it, and a removal or rename guards on the version this mount
        shows (``mv a b; rm b/x`` in one burst skipped the ``rm`` as another writer's
        change).  A round trip only in that case."""
        if self.store.moving():
            await self.lookups.flush_changes()

    async def _delete_later(
        self, removal: Delete | None, keep: list[str], drop_dir: str | None = None
    ) -> None:
        """Leave a document's delete (or an ``rmdir``) for the next transaction: ``rm -rf``
        then costs a round trip per batch, not per entry."""
        if self.lookups.deferring():
            changes: list[Change] = [] if removal is None else [removal]
            changes += [DropDir(drop_dir)] if drop_dir is not None else []
            self.lookups.defer(*changes, *(KeepDir(path) for path in keep))
        elif removal is not None:
            await self.lookups.run_db(
                self.store.delete_document, removal.doc_id, keep, removal.seen
            )
        elif drop_dir is not None:
            await self.lookups.run_db(self.store.delete_directory, drop_dir, keep)
        else:
            await self.lookups.run_db(self.store.create_directory, keep[0])

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

    async def _delete_abandoned_origin(self, node: Node) -> None:
        """A renamed-away original whose name goes with no new file: the user deleted it."""
        if not isinstance(node, FileNode) or node.origin_doc_id is None or node.extra_links:
            return
        shown = self.state.tree.docs.get(node.origin_doc_id)
        if shown is not None and shown is not node and shown.parent is not None:
            # Another writer's change brought the row back into the tree (the agent wrote
            # it mid-save): it is a live document again, not an abandoned original.
            log.info(
                "%s: the renamed-away original is shown again as %s; keeping it",
                self.lookups.describe_node(node), self.lookups.describe_node(shown),
            )  # fmt: skip
            self.saves.release(node)
            return
        log.warning(
            "%s was the renamed-away original of a document and no new file took its "
            "place: deleting the document",
            self.lookups.describe_node(node),
        )
        # Only as this mount showed it: another writer's save into the waiting row, not
        # seen here yet, keeps it (the change feed or the next poll shows it again).
        deleted = await self.lookups.run_db(
            self.store.delete_document, node.origin_doc_id, [], node.updated_at
        )
        if not deleted:
            log.warning(
                "%s: the document changed in the database after this mount last showed it; "
                "it is kept", self.lookups.describe_node(node),
            )  # fmt: skip
        self.cache.drop(node.origin_doc_id)
        self.saves.release(node)

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
            await self._rename_rows(
                old_parent, source, new_parent, new_name, new_path, target, kind, pid
            )
            self._rename_entries(old_parent, old_name, source, new_parent, new_name, target, kind)

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

    async def _rename_rows(
        self,
        old_parent: DirNode,
        source: Node,
        new_parent: DirNode,
        new_name: str,
        new_path: str,
        target: Node | None,
        kind: Kind,
        pid: int,
    ) -> None:
        """The database side of a rename, by what the source is and where it goes: into
        memory, out of it (scratch, a tool folder) or within it."""
        if source.scratch and kind is not Kind.DOCUMENT:
            await self._replace_target(target)
        elif source.scratch:
            await self._scratch_to_document(source, new_path, target, pid)
        elif kind is not Kind.DOCUMENT:
            if isinstance(source, DirNode) and self._into_tool_folder(new_parent, new_name):
                await self._folder_leaves_memory(source, target)
            else:
                await self._document_to_scratch(source, target)
        else:
            keep = [] if old_parent is new_parent else self._keep_if_emptied(old_parent, source)
            if isinstance(source, DirNode):
                await self._rename_dir(source, new_path, target, keep)
            else:
                assert isinstance(source, FileNode)
                await self._rename_file(source, new_path, target, keep, pid)
            if keep:
                old_parent.explicit = True

    def _rename_entries(
        self,
        old_parent: DirNode,
        old_name: str,
        source: Node,
        new_parent: DirNode,
        new_name: str,
        target: Node | None,
        kind: Kind,
    ) -> None:
        """The tree side of a rename, once the database has it."""
        if target is not None:
            if new_parent.children.get(new_name) is target:
                self.state.tree.remove_entry(new_parent, new_name)
            self.lookups.drop_if_freed(target.ino)
        self.state.tree.rename_entry(old_parent, old_name, new_parent, new_name)
        if isinstance(source, FileNode):
            if source.scratch and kind is Kind.TENTATIVE:
                self.saves.track(source.ino, idle=source.open_count == 0)
            else:
                self.saves.untrack(source.ino)
        self.lookups.touch_dir(old_parent)
        self.lookups.touch_dir(new_parent)

    async def _replace_target(self, target: Node | None) -> None:
        """The database side of a name being replaced by a rename."""
        if isinstance(target, FileNode):
            if not target.scratch and target.doc_id is not None:
                await self.lookups.run_db(
                    self.store.delete_document, target.doc_id, [], target.updated_at
                )
                self.cache.drop(target.doc_id)
            else:
                await self._delete_abandoned_origin(target)
        elif isinstance(target, DirNode) and target.explicit and not target.scratch:
            await self.lookups.run_db(
                self.store.delete_directory, self.state.tree.path_of(target), []
            )

    async def _rename_file(
        self, source: FileNode, new_path: str, target: Node | None, keep: list[str], pid: int = 0
    ) -> None:
        replaced = target.doc_id if isinstance(target, FileNode) and not target.scratch else None
        seen = target.updated_at if isinstance(target, FileNode) else None
        if replaced is None:  # the renamed-away original waiting there is replaced
            replaced, seen = self.saves.replaced_by(new_path, source.doc_id) or (None, seen)
        if source.doc_id is None:
            # Not committed yet: its first commit adopts the row at the new path (so a
            # write-temp-then-rename save keeps the target document's identity).
            if keep:
                await self.lookups.run_db(self.store.create_directory, keep[0])
            return
        attrs = FileAttrs(source.custom_mode, source.mtime_ns)
        if replaced is not None and replaced != source.doc_id:
            await self._rename_file_over(source, replaced, new_path, keep, seen, pid, attrs)
            return
        moved = await self.lookups.run_db(
            self.store.rename_document, source.doc_id, new_path, replaced, attrs, keep,
            self.state.tree.path_of(source), replaced_seen=seen,
        )  # fmt: skip
        self.lookups.request_reindex(source.doc_id)
        if replaced is not None:
            self.cache.drop(replaced)
        if moved is None:
            log.warning("document %s vanished from the database during rename", source.doc_id)
            return
        self.lookups.adopt_version(source, moved)
        source.client_mtime_ns = source.mtime_ns
        source.ctime_ns = self.clock()

    async def _rename_file_over(
        self,
        source: FileNode,
        replaced: UUID,
        new_path: str,
        keep: list[str],
        seen: datetime | None,
        pid: int,
        attrs: FileAttrs,
    ) -> None:
        """``_rename_file`` over another document (``replaced``, shown at ``seen``): the
        source's pending changes first, then IronClaw's write of the target and delete of
        the source, merged with a change of the target the renaming process did not read."""
        assert source.doc_id is not None
        await self.contents.commit(source)  # pending changes first: the rename carries them
        merged = await self._merge_renamed(source, replaced, new_path, pid, seen)
        text, source_seen = None, None
        if merged is not None:
            text, seen, _ = merged
            source_seen = source.updated_at
        based = self.bases.base(new_path, pid) if merged is None else None
        if based is not None and based.data is None:  # the replace drops the cache
            cached = self.cache.get(replaced, based.version)
            based = based._replace(data=cached) if cached is not None else based
        result = await self._replace_document(
            source, source.doc_id, replaced, new_path, text, keep, seen, source_seen, text
        )
        if merged is not None and result is not None and not result.conflict:
            self.bases.saw(new_path, pid, result.doc_id, None, merged[2])
            self.kernel.inode(source.ino)  # it cached the saver's bytes, not the merge
        elif based is not None and based.doc_id == replaced and result is not None:
            await self._merge_after_replace(source, new_path, pid, based, result, attrs)

    async def _merge_after_replace(
        self, source: FileNode, new_path: str, pid: int, based: Base, result: CommitResult,
        attrs: FileAttrs,
    ) -> None:  # fmt: skip
        """A document renamed over the file its process read landed over a change this
        mount had not heard of yet (its guard found it; the change is a version now): that
        change is merged back by a second write, as for any save (``merge_late``)."""
        if not result.conflict or result.replaced_hash is None:
            return
        ours_data = self.cache.get(result.doc_id, result.updated_at)

        if ours_data is None:
            return
        try:
            ours = ours_data.decode("utf-8")
        except UnicodeDecodeError:
            return
        base_data = await self._base_bytes(result.doc_id, new_path, based)
        late = await self.contents.merge_late(new_path, base_data, ours, attrs, result)
        if late is None:
            return
        text, merged = late
        data = text.encode("utf-8")
        self.bases.saw(new_path, pid, merged.doc_id, None, ours_data)
        if source.doc_id != merged.doc_id:
            return  # moved on meanwhile: its own events show it
        source.updated_at = merged.updated_at
        self.cache.put(merged.doc_id, merged.updated_at, data)
        buffer = self.state.buffers.get(source.ino)
        if buffer is None:
            source.size = len(data)  # read from the cache at the merged version
        elif isinstance(buffer, FileBuffer) and not buffer.dirty:
            self.contents.take_others_content(source, FileBuffer.of_row(data, merged.updated_at))
            source.size = len(data)
        source.kernel_version = None
        self.kernel.attributes(source.ino)
        self.kernel.inode(source.ino)

    async def _replace_document(
        self,
        source: FileNode,
        source_id: UUID,
        replaced: UUID,
        new_path: str,
        text: str | None,
        keep: list[str],
        seen: datetime | None,
        source_seen: datetime | None = None,
        merged_text: str | None = None,
    ) -> CommitResult | None:
        """``rename`` of a document over another: IronClaw's write of the target path with
        the source's content, then its delete of the source, in one transaction.  The target
        keeps its identity and history; the file now stands for the target's row.  ``seen``
        is the target's version this mount last showed: if another writer changed it since,
        that change is kept (as for any save) and logged.  ``text`` given, ``source_seen``
        is the source row's version it stands for (a renamed-away original's, as this mount
        last showed it): the row is deleted only at that version, so another writer's
        change to it meanwhile is kept.  ``text`` None, the stored content moves, read
        under the row's lock.  ``merged_text``: ``text`` is a merge with another writer's
        change, not the source's bytes (the caches then hold the merge)."""
        attrs = FileAttrs(source.custom_mode, source.client_mtime_ns or source.mtime_ns)
        source_at = source_seen
        if text is None and source.doc_id == source_id:
            cached = self.cache.get(source_id, source.updated_at)  # spares a round trip
            if cached is not None:
                text, source_at = cached.decode("utf-8"), source.updated_at
        result = await self.lookups.run_db(
            self.store.replace_document, source_id, replaced, new_path, text, attrs, keep,
            index_now=not self.lookups.reindex_deferred(), expected=seen, source_at=source_at,
        )  # fmt: skip
        if result is not None:
            self.lookups.count_commit(result)
        if result is not None and result.conflict:
            log.warning(
                "%r changed in the database after this mount last showed it; the other "
                "change is kept as %s and the renamed file is the current content",
                new_path,
                result.conflict,
            )
        self.lookups.request_reindex(replaced)
        self.cache.drop(replaced)
        if result is None:
            log.warning(
                "%s vanished from the database during rename", self.lookups.describe_node(source)
            )
            return None
        data = self.cache.get(source_id, source.updated_at) if source.doc_id else None
        if merged_text is not None:
            data = merged_text.encode("utf-8")  # the row is the merge, not the source's bytes
        self.cache.drop(source_id)
        kernel_current = merged_text is None and source.kernel_version == source.updated_at
        self.state.tree.bind_document(source, result.doc_id)
        source.updated_at = result.updated_at
        if data is not None:
            self.cache.put(result.doc_id, result.updated_at, data)
        if kernel_current:
            source.kernel_version = result.updated_at
        source.client_mtime_ns = source.mtime_ns
        source.ctime_ns = self.clock()
        if not self.lookups.reindex_deferred() and result.changed:
            self.lookups.announce(result.doc_id)
        log.debug(
            "%r replaced by a rename: its row %s keeps its identity%s; the source row %s is "
            "deleted",
            new_path, result.doc_id, ", previous content versioned" if result.versioned else "",
            source_id,
        )  # fmt: skip
        return result

    async def _rename_dir(
        self, source: DirNode, new_path: str, target: Node | None, keep: list[str]
    ) -> None:
        old_path = self.state.tree.path_of(source)
        replaced = self.state.tree.path_of(target) if isinstance(target, DirNode) else None
        if self.lookups.deferring():
            # The paths of every document below are rewritten with the next transaction;
            # each moved file takes its row's new version from the answer (_adopt_moves),
            # and no other call of this mount reaches the database before it has (run_db).
            self.lookups.defer(MoveDir(old_path, new_path, replaced), *(KeepDir(p) for p in keep))
            self.saves.folder_moved(old_path, new_path)  # rows waiting below move with it
            source.explicit = source.explicit or (isinstance(target, DirNode) and target.explicit)
            return
        moved = await self.lookups.run_db(
            self.store.rename_directory, old_path, new_path, replaced, keep
        )
        self.saves.folder_moved(old_path, new_path)
        self.lookups.adopt_moved(moved)
        source.explicit = source.explicit or (isinstance(target, DirNode) and target.explicit)

    async def _document_to_scratch(self, source: Node, target: Node | None) -> None:
        """vim/emacs ``x -> x~``: hide the document under the scratch name, keep its row."""
        if isinstance(source, DirNode):
            raise FsError(
                errno.EPERM,
                "a directory of documents cannot take a scratch name: its documents would "
                "leave memory; pick a name that is not an editor or sync-tool pattern",
            )
        assert isinstance(source, FileNode)
        await self.contents.commit(source)  # pending changes reach the row first
        buffer = self.state.buffers.get(source.ino)
        if buffer is not None:
            data = buffer.snapshot()
        elif source.doc_id is not None:
            data = await self.contents.committed_bytes(source)
        else:
            data = b""
        await self._replace_target(target)
        if source.doc_id is not None:
            self.saves.detach(self.state.tree.path_of(source), source)
            self.state.tree.unbind_document(source)
            log.debug(
                "%s took a scratch name; its row stays until a new file takes its place",
                self.lookups.describe_node(source),
            )
        source.scratch = True
        self.contents.saved(source)
        self.state.set_buffer(source, ScratchBuffer(self.spill, data))

    def _into_tool_folder(self, parent: DirNode, name: str) -> bool:
        """Whether ``name`` in ``parent`` is inside (or is) a tool folder."""
        if self.tools is None:
            return False
        if parent is self.state.tree.root:
            return name in self.rules.tool_folders
        top: Node = parent
        while top.parent is not None and top.parent is not self.state.tree.root:
            top = top.parent
        return top.scratch and top.name in self.rules.tool_folders

    async def _folder_leaves_memory(self, source: DirNode, target: Node | None) -> None:
        """A folder of documents moved into a tool folder (Obsidian's delete to ``.trash``):
        every document below becomes a tool file with its content; the rows go once the
        tool folder has kept them (``leaving_memory``, sent by ``sync_tools``)."""
        await self._replace_target(target)
        for node in list(self.state.tree.iter_files(source)):
            if node.scratch:
                continue
            await self.contents.commit(node)  # pending changes reach the row first
            buffer = self.state.buffers.get(node.ino)
            if buffer is not None:
                data = buffer.snapshot()
            elif node.doc_id is not None:
                data = await self.contents.committed_bytes(node)
            else:
                data = b""
            if node.doc_id is not None:
                self.leaving_memory.append(
                    Delete(node.doc_id, node.updated_at, self.state.tree.path_of(node))
                )
                self.cache.drop(node.doc_id)
                self.state.tree.unbind_document(node)
            node.scratch = True
            self.contents.saved(node)
            self.state.set_buffer(node, ScratchBuffer(self.spill, data))
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

    async def _scratch_to_document(
        self, source: Node, new_path: str, target: Node | None, pid: int = 0
    ) -> None:
        """A temporary renamed onto a document name: the rename is the commit.  Renamed by
        a process that read the document (``sed -i``, an editor) over another writer's
        change it did not read, the two are merged (``memfs.merge``)."""
        if isinstance(source, DirNode):
            await self._commit_scratch_dir(source, new_path, target)
            return
        if not isinstance(source, FileNode):
            raise FsError(errno.EPERM, "a symbolic link cannot become a document")
        if source.extra_links:
            raise FsError(errno.EPERM, "a hard-linked scratch file cannot become a document")
        try:
            data, text = self._scratch_text(
                source, f"renaming {self.lookups.describe_node(source)} to {new_path!r}"
            )
        except FsError as exc:
            log.error("%s; the file keeps its scratch name", exc.reason)
            raise
        attrs = FileAttrs(source.custom_mode, source.client_mtime_ns)
        doc_id, done = await self._scratch_row(source, new_path, target, text, data, attrs)
        if done:
            return
        result, data, merged = await self._commit_scratch(
            doc_id, new_path, target, text, data, attrs, pid
        )
        if merged:
            self.kernel.inode(source.ino)  # it cached the saver's bytes, not the merge
        log.debug(
            "committed %r (%s) from the temporary %r: %s%s", new_path, result.doc_id,
            source.name, "created" if result.created else "updated",
            ", previous content versioned" if result.versioned else "",
        )  # fmt: skip
        self._become_document(source, result, data)

    async def _scratch_row(
        self,
        source: FileNode,
        new_path: str,
        target: Node | None,
        text: str,
        data: bytes,
        attrs: FileAttrs,
    ) -> tuple[UUID | None, bool]:
        """The row a temporary renamed to ``new_path`` becomes: the document it was renamed
        away from (moved back, or written over the target, which is then done: True), the
        target's, or one a sync tool's backup left to claim; None for a new document."""
        doc_id = source.origin_doc_id
        if doc_id is None:
            if isinstance(target, FileNode) and not target.scratch:
                doc_id = target.doc_id
            if doc_id is None:  # e.g. rsync --backup: x -> x~, tmp -> x
                claimed = self.saves.claim(new_path)
                doc_id = claimed[0] if claimed is not None else None
            return doc_id, False
        replaced = target.doc_id if isinstance(target, FileNode) and not target.scratch else None
        seen = target.updated_at if isinstance(target, FileNode) else None
        if replaced is None:
            replaced, seen = self.saves.replaced_by(new_path, doc_id) or (None, seen)
        self.saves.release(source)
        if replaced is not None and replaced != doc_id:
            # A renamed-away document moved over another one: IronClaw's write of the
            # target with this content, then its delete of this row.
            result = await self._replace_document(
                source, doc_id, replaced, new_path, text, [], seen, source.updated_at
            )
            if result is not None:
                self._become_document(source, result, data)
                return doc_id, True
            return None, False
        moved = await self.lookups.run_db(
            self.store.rename_document, doc_id, new_path,
            None if replaced == doc_id else replaced, attrs, [], replaced_seen=seen,
        )  # fmt: skip
        self.lookups.request_reindex(doc_id)
        return (doc_id if moved is not None else None), False

    async def _commit_scratch(
        self,
        doc_id: UUID | None,
        new_path: str,
        target: Node | None,
        text: str,
        data: bytes,
        attrs: FileAttrs,
        pid: int,
    ) -> tuple[CommitResult, bytes, bool]:
        """A temporary's content (``text``, its bytes ``data``) committed at ``new_path``
        as row ``doc_id``: merged with another writer's change the renaming process did not
        read.  The result, the bytes now stored, and whether they are a merge (not the
        process's bytes)."""
        expected, ours = None, text
        shown = target.updated_at if isinstance(target, FileNode) else None
        merged = await self._merge_saver_base(doc_id, new_path, pid, text, shown)
        based = self.bases.base(new_path, pid) if doc_id is not None else None
        if based is None or based.doc_id != doc_id:
            based = None
        if doc_id is not None and shown is not None and self.bases.tracks(doc_id):
            self.bases.superseded(doc_id, shown, self.cache.get(doc_id, shown))
        found = (
            await self.contents.commit_merged(doc_id, new_path, merged, attrs) if doc_id else None
        )
        if merged is not None and found is not None:
            result, text, data = found, merged[0], merged[0].encode("utf-8")
        else:
            merged = None
            if based is not None:
                expected = shown  # a change the mount has not heard of is told, merged below
            result = await self.lookups.commit_document(doc_id, new_path, text, attrs, expected)
            if based is not None and result.conflict and result.replaced_hash is not None:
                base_data = await self._base_bytes(result.doc_id, new_path, based)
                late = await self.contents.merge_late(new_path, base_data, ours, attrs, result)
                if late is not None:
                    (text, result), merged = late, (late[0], None)
                    data = text.encode("utf-8")
        if merged is not None and not result.conflict:
            self.bases.saw(new_path, pid, result.doc_id, None, ours.encode("utf-8"))
            return result, data, True
        self.bases.saw(new_path, pid, result.doc_id, result.updated_at,
                       digest=bytes_hash(data) if pid > 0 else None)  # fmt: skip
        return result, data, False

    async def _merge_renamed(
        self, source: FileNode, replaced: UUID, new_path: str, pid: int, shown: datetime | None
    ) -> tuple[str, Any, bytes] | None:
        """A document written by a process that read ``new_path`` (node's write-file-atomic,
        a temporary with an ordinary name) renamed over it after another writer's change:
        the merged text, the version merged with, and the process's own bytes; or None."""
        if source.doc_id is None or not self.bases.tracks(replaced):
            return None
        data = self.cache.get(source.doc_id, source.updated_at)
        if data is None:
            found = await self.lookups.run_db(self.store.read_content, source.doc_id)
            if found is None or found.version != source.updated_at:
                return None
            data = found.data
        try:
            ours = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        merged = await self._merge_saver_base(replaced, new_path, pid, ours, shown)
        return (merged[0], merged[1], data) if merged is not None else None

    async def _merge_saver_base(
        self, doc_id: UUID | None, path: str, pid: int, ours: str, shown: object
    ) -> tuple[str, object] | None:
        """A renamed save merged with another writer's change since what process ``pid``
        read (its base), or None: no base known, no change heard of, or an overlap."""
        if doc_id is None or not mergeable(path):
            return None
        base = self.bases.base(path, pid)
        if base is None or base.doc_id not in (doc_id, None):
            return None
        if base.doc_id is None:
            log.debug("%r: renamed over by process %d, which found no file there", path, pid)
            return await self.contents.merge_with_row(doc_id, path, b"", None, ours)
        if base.data is None and base.version == shown:
            return None  # the mount has heard of no change since that read
        data = await self._base_bytes(doc_id, path, base)
        if data is None or len(data) > MERGE_LIMIT:
            return None
        shown = base.version if base.data is None else None
        return await self.contents.merge_with_row(doc_id, path, data, shown, ours)

    async def _base_bytes(self, doc_id: UUID, path: str, base: Base) -> bytes | None:
        """The bytes of a process's base, if they can be had (by hash from the rows)."""
        data = base.data if base.data is not None else self.cache.get(doc_id, base.version)
        if data is None and base.digest is not None:
            data = await self.contents.stored_base(doc_id, path, base.digest)
        return data

    def _scratch_text(self, node: FileNode, what: str) -> tuple[bytes, str]:
        """A scratch file's bytes and their text, or EILSEQ if they cannot be a document."""
        buffer = self.state.buffers.get(node.ino)
        data = buffer.snapshot() if buffer is not None else b""
        return data, _as_text(data, what)

    def _become_document(self, node: FileNode, result: CommitResult, data: bytes) -> None:
        node.scratch = False
        node.doc_id = None
        self.state.tree.bind_document(node, result.doc_id)
        node.updated_at = result.updated_at
        node.size = len(data)
        if node.client_mtime_ns is None:
            node.mtime_ns = node.ctime_ns = to_ns(result.updated_at)
        self.cache.put(result.doc_id, result.updated_at, data)
        # Its writers' base is the row it became: an O_APPEND open right after (no read in
        # between reloads the buffer) merges a change not heard of yet against it.
        self.state.set_buffer(node, FileBuffer.of_row(data, result.updated_at))
        node.kernel_version = None
        self.saves.untrack(node.ino)
        self.contents.saved(node)

    async def _commit_scratch_dir(
        self, source: DirNode, new_path: str, target: Node | None
    ) -> None:
        """unison's temporary directory renamed into place: its documents in one transaction."""
        dirs: list[tuple[DirNode, str]] = [(source, new_path)]
        files: list[tuple[FileNode, str, bytes, str]] = []
        stack = [(source, new_path)]
        while stack:
            directory, path = stack.pop()
            for name, child in directory.children.items():
                child_path = f"{path}/{name}"
                if isinstance(child, DirNode):
                    if self.rules.classify(name) is Kind.DOCUMENT:
                        dirs.append((child, child_path))
                        stack.append((child, child_path))
                elif isinstance(child, FileNode) and self.rules.classify(name) is Kind.DOCUMENT:
                    what = f"{child_path!r} in a directory renamed into place"
                    data, text = self._scratch_text(child, what)
                    files.append((child, child_path, data, text))
        await self._replace_target(target)
        items = [
            (None, path, text, FileAttrs(node.custom_mode, node.client_mtime_ns))
            for node, path, _, text in files
        ]
        keep = [path for _, path in dirs]
        results = await self.lookups.run_db(self.store.commit_documents, items, keep)
        for directory, _ in dirs:
            directory.scratch = False
            directory.explicit = True
        for (node, _, data, _), result in zip(files, results, strict=True):
            self.lookups.count_commit(result)
            self._become_document(node, result, data)
            if result.changed:  # commit_documents re-chunked them in its transaction
                self.lookups.announce(result.doc_id)

    # -- tool folders (memfs.vfs.tool_folders) ---------------------------------------------

    async def sync_tools(self) -> bool:
        """Write what changed in the tool folders; False (and a log line) if it failed:
        what was not written stays in memory and goes with the next operation's write."""
        if self.tools is None or self.lookups.read_only:
            return True
        try:
            await self.tools.sync(self.lookups)
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
        if self.tools is None or self.lookups.read_only:
            return
        if self.leaving_memory or self.leaving_dirs or not self.tools.persisted_all(self.lookups):
            await self.sync_tools()
        if self.tools.pending:  # another mount's change waited for a file to be closed
            await self.refresh_tools()

    async def refresh_tools(self) -> int:
        """Take in other mounts' changes to the tool folders (told by the change feed, or
        looked for by the polling loop)."""
        if self.tools is None:
            return 0
        if not self.lookups.read_only and (
            self.leaving_memory or self.leaving_dirs or not self.tools.persisted_all(self.lookups)
        ):
            await self.sync_tools()  # a write that failed earlier goes first
        try:
            return await self.tools.refresh(self.lookups)
        except FsError as exc:
            log.warning("tool folders: other mounts' changes not read (%s)", exc.reason)
            return 0

    # -- tentative scratch -----------------------------------------------------------------

    async def promote_due(self, now: float | None = None) -> int:
        """Promote tentative scratch files closed and not renamed for the grace period."""
        moment = self.monotonic() if now is None else now
        promoted = 0
        for ino in self.saves.due(moment):
            async with self.state.ns_lock:
                node = self.state.tree.inodes.get(ino)
                if not isinstance(node, FileNode) or not node.scratch or node.parent is None:
                    continue
                if node.open_count or node.extra_links or node.parent.scratch:
                    continue
                if self.rules.classify(node.name) is not Kind.TENTATIVE:
                    continue
                path = self.state.tree.path_of(node)
                try:
                    data, text = self._scratch_text(node, f"promoting {path!r}")
                except FsError as exc:
                    log.info("%s; it stays in memory only", exc.reason)
                    continue
                attrs = FileAttrs(node.custom_mode, node.client_mtime_ns)
                try:
                    result = await self.lookups.commit_document(None, path, text, attrs)
                except DatabaseUnavailable as exc:
                    self.saves.postpone(ino, moment)  # tried again later
                    self.contents.keep_copy(node, data, exc.reason)
                    raise
                self._become_document(node, result, data)
                promoted += 1
                log.info(
                    "%r matched rsync's temporary pattern but was not renamed within %.0fs: "
                    "saved as a document",
                    path,
                    TENTATIVE_GRACE,
                )
        return promoted

    async def shutdown(self) -> list[str]:
        """At unmount: promote every tentative file, then commit every dirty document.

        Returns what could not be saved: each is in the recovery area (``memfs recover``).
        """
        try:
            await self.promote_due(math.inf)
        except FsError as exc:
            log.error("promoting tentative files at unmount failed: %s", exc)
            for ino in self.saves.tentative():
                node = self.state.tree.inodes.get(ino)
                buffer = self.state.buffers.get(ino)
                if isinstance(node, FileNode) and isinstance(buffer, ScratchBuffer):
                    self.contents.keep_copy(node, buffer.snapshot(), f"unmount: {exc.reason}")
        await self.contents.commit_all()
        try:
            await self.lookups.flush_changes()
        except FsError as exc:
            log.error("removals and moves were not sent at unmount: %s", exc.reason)
        if self.reindexer is not None:
            await self.reindexer.finish()
        if self.recovery is not None:
            return self.recovery.kept()
        return [self.lookups.describe_node(node) for node in self.state.unsaved.values()]
