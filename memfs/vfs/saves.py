"""Editors' saves, end to end: how a document keeps its identity while a program saves it.

Programs save in three ways besides writing a file in place, and each passes a document
through a name that is not a document:

* **Renamed-away originals** (vim and emacs: ``x -> x~``, then a new ``x``).  The row stays
  untouched in the database and the renamed node remembers it (``origin_doc_id``), listed
  in ``save_tables.EditorSaves`` under the path the row is at (``document_to_scratch``).
  The next file created at that path *claims* the row (``created``), so the whole save is
  one UPDATE of the same document.  Unlinking the backup with no new file deletes the row
  (``replacing.Replacements.delete_abandoned_origin``); renaming it back restores it; if
  the daemon stops mid-save, the row is as it was.  The path follows the row: a move of a
  folder above it here moves it (``EditorSaves.folder_moved``); and a row the tree shows
  again (another writer wrote or moved it) is a live document, no longer waiting: it is
  never claimed or replaced from the old path.
* **Temporaries renamed into place** (``sed -i``, node's write-file-atomic, unison's
  folders): the rename is the commit (``scratch_to_document``), merged with another
  writer's change the renaming process did not read (``memfs.merge``, over the base
  ``SaverBases`` kept for that process); a document renamed over another likewise
  (``rename_file_over``).
* **Tentative names** (rsync's ``.x.AbC123``, other writers' dotfiles): scratch while
  open; renamed to a document name, the rename is the commit; left closed and not renamed
  for ``TENTATIVE_GRACE`` seconds, the file was meant to stay and becomes a document
  (``promote_due``).

``SavePatterns`` decides all of it; ``namespace.Names`` tells it what a create or a rename
is about to make, and the tables it keeps live in ``save_tables`` (the mount's lookups
hold them, so reads and other writers' events reach them too).
"""

from __future__ import annotations

import errno
import math
from datetime import datetime
from typing import Protocol
from uuid import UUID

from memfs.db import records
from memfs.db.records import CommitResult, FileAttrs, Replacement, SaveOptions, Write
from memfs.errors import DatabaseUnavailable, FsError
from memfs.ironclaw.hashing import bytes_hash
from memfs.merge import MERGE_LIMIT, mergeable
from memfs.scratch import TENTATIVE_GRACE, Kind, ScratchRules
from memfs.tree import DirNode, FileNode, Node, to_ns
from memfs.vfs.base import log
from memfs.vfs.buffers import FileBuffer, ScratchBuffer, ScratchSpill
from memfs.vfs.commits import Commits
from memfs.vfs.merging import Merges, RowMerge
from memfs.vfs.replacing import Replacements
from memfs.vfs.roles import (
    Caching,
    Clocked,
    Committing,
    Describing,
    SaverTables,
    Stateful,
    StoreAccess,
    Telling,
)
from memfs.vfs.safety_net import SafetyNet
from memfs.vfs.save_tables import Base
from memfs.vfs.writer_bases import WriterBases

#: The prefix of emacs's lock file of a file it edits (``.#name``, a symbolic link).
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


class SaveLookups(
    Stateful, StoreAccess, Caching, SaverTables, Clocked, Committing, Describing, Telling, Protocol
):
    """What editors' save patterns ask of the lookups: the mount's state, store and caches,
    the editors' saves, the clock, IronClaw's write and what it tells, names for log
    lines, the scratch rules and where scratch content spills, and the safety net."""

    rules: ScratchRules
    spill: ScratchSpill
    safety_net: SafetyNet


class SavePatterns:
    """What a save by rename, by a renamed-away original or by a tentative name makes."""

    def __init__(
        self,
        lookups: SaveLookups,
        commits: Commits,
        writer_bases: WriterBases,
        replacing: Replacements,
        merges: Merges,
    ) -> None:
        #: What this part asks of the mount's lookups (``SaveLookups``).
        self.lookups = lookups
        self.state = lookups.state
        #: The save path: a renamed file's pending changes go first.
        self.commits = commits
        #: A new file's base: what its process read there.
        self.writer_bases = writer_bases
        #: Every decision between a save and another writer's change.
        self.merges = merges
        #: The rows a save puts something else in the place of.
        self.replacing = replacing

    # -- what a create or a rename tells -----------------------------------------------------

    def created(
        self, node: FileNode, path: str, kind: Kind, buffer: FileBuffer | ScratchBuffer, pid: int
    ) -> None:
        """A new file at ``path``: a document takes over the row of a renamed-away original
        waiting there (the version its save is based on) and its process's base; a
        tentative one is watched until it falls due."""
        if kind is Kind.TENTATIVE:
            self.lookups.saves.track(node.ino, idle=False)
        if kind is not Kind.DOCUMENT or not isinstance(buffer, FileBuffer):
            return
        claimed = self.lookups.saves.claim(path)
        if claimed is not None:
            node.doc_id, node.updated_at = claimed
            log.debug("%r takes over the row of its renamed-away original", path)
            self.writer_bases.adopt(buffer, claimed[0], path, pid)
        else:  # its process may have found no file here: another writer's may be new
            self.writer_bases.adopt(buffer, None, path, pid)

    def renamed(self, source: FileNode, kind: Kind) -> None:
        """A file took a new name: watched while that name is tentative, else not."""
        if source.scratch and kind is Kind.TENTATIVE:
            self.lookups.saves.track(source.ino, idle=source.open_count == 0)
        else:
            self.lookups.saves.untrack(source.ino)

    def linked(self, path: str, name: str, pid: int) -> None:
        """A symbolic link made at ``path``: an emacs lock file (``.#name``) tells that its
        process edits ``name`` (``SaverBases.editing``)."""
        if name.startswith(EMACS_LOCK) and pid > 0:
            self.lookups.bases.editing(path[: len(path) - len(name)] + name[len(EMACS_LOCK) :], pid)

    def folder_moved(self, old_path: str, new_path: str) -> None:
        """A folder moved here: the rows waiting below it for their editors' new files
        move with it."""
        self.lookups.saves.folder_moved(old_path, new_path)

    def replaced_at(
        self, target: Node | None, new_path: str, doc_id: UUID | None
    ) -> tuple[UUID | None, datetime | None]:
        """The row a rename to ``new_path`` replaces, and its version as shown here: the
        target document's, or a renamed-away original's waiting at that path."""
        replaced = target.doc_id if isinstance(target, FileNode) and not target.scratch else None
        seen = target.updated_at if isinstance(target, FileNode) else None
        if replaced is None:
            replaced, seen = self.lookups.saves.replaced_by(new_path, doc_id) or (None, seen)
        return replaced, seen

    # -- a document through a scratch name ------------------------------------------------

    async def document_to_scratch(self, source: Node, target: Node | None) -> None:
        """vim/emacs ``x -> x~``: hide the document under the scratch name, keep its row."""
        if isinstance(source, DirNode):
            raise FsError(
                errno.EPERM,
                "a directory of documents cannot take a scratch name: its documents would "
                "leave memory; pick a name that is not an editor or sync-tool pattern",
            )
        assert isinstance(source, FileNode)
        data = await self.commits.content_now(source)
        await self.replacing.replace_target(target)
        if source.doc_id is not None:
            self.lookups.saves.detach(self.state.tree.path_of(source), source)
            self.state.tree.unbind_document(source)
            log.debug(
                "%s took a scratch name; its row stays until a new file takes its place",
                self.lookups.describe_node(source),
            )
        source.scratch = True
        self.commits.unsaved.saved(source)
        self.state.set_buffer(source, ScratchBuffer(self.lookups.spill, data))

    async def scratch_to_document(
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
            self.lookups.kernel.inode(source.ino)  # it cached the saver's bytes, not the merge
        log.debug(
            "committed %r (%s) from the temporary %r: %s%s", new_path, result.doc_id,
            source.name, "created" if result.created else "updated",
            ", previous content versioned" if result.versioned else "",
        )  # fmt: skip
        self._become_document(source, result, data)

    async def _scratch_row(  # noqa: PLR0913 - a temporary's rename: what, where, over what, and its bytes
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
                claimed = self.lookups.saves.claim(new_path)
                doc_id = claimed[0] if claimed is not None else None
            return doc_id, False
        replaced, seen = self.replaced_at(target, new_path, doc_id)
        self.lookups.saves.release(source)
        if replaced is not None and replaced != doc_id:
            # A renamed-away document moved over another one: IronClaw's write of the
            # target with this content, then its delete of this row.
            result = await self.replacing.replace_document(
                source,
                Replacement(doc_id, replaced, new_path, text, source_at=source.updated_at),
                SaveOptions(expected=seen),
            )
            if result is not None:
                self._become_document(source, result, data)
                return doc_id, True
            return None, False
        over = None if replaced in (None, doc_id) else records.Overwritten(replaced, seen)
        moved = await self.lookups.db.run_db(
            self.lookups.store.rename_document, records.Rename(doc_id, new_path), attrs, over
        )
        self.lookups.request_reindex(doc_id)
        return (doc_id if moved is not None else None), False

    async def _commit_scratch(  # noqa: PLR0913 - a temporary's rename: what, where, over what, and its bytes
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
        based = self._base_for(new_path, pid, doc_id, text) if doc_id is not None else None
        if based is None or based.doc_id != doc_id:
            based = None
        if doc_id is not None and shown is not None and self.lookups.bases.tracks(doc_id):
            self.lookups.bases.superseded(doc_id, shown, self.lookups.cache.get(doc_id, shown))
        found = (
            await self.merges.commit_merged(doc_id, new_path, merged, attrs, ours)
            if doc_id
            else None
        )
        if found is not None:
            text, result = found
            data = text.encode("utf-8")
        else:
            merged = None
            if based is not None:
                expected = shown  # a change the mount has not heard of is told, merged below
            at_hand = self.merges.bytes_of(based) if based is not None else None
            merge = self.merges.merge_function(new_path, at_hand, ours)
            result = await self.lookups.commit_document(
                Write(doc_id, new_path, text), attrs, SaveOptions(expected=expected, merge=merge)
            )
            locked = await self.merges.committed_merge(new_path, ours, result)
            if locked is not None:
                text, merged = locked[0], RowMerge(locked[0], None, data)
                data = text.encode("utf-8")
            elif based is not None and result.conflict and result.replaced_hash is not None:
                base_data = await self._base_bytes(result.doc_id, new_path, based)
                late = await self.merges.merge_late(new_path, base_data, ours, attrs, result)
                if late is not None:
                    (text, result), merged = late, RowMerge(late[0], None, data)
                    data = text.encode("utf-8")
        if merged is not None and not result.conflict:
            self.lookups.bases.saw(new_path, pid, result.doc_id, None, ours.encode("utf-8"))
            return result, data, True
        self.lookups.bases.saw(new_path, pid, result.doc_id, result.updated_at,
                       digest=bytes_hash(data) if pid > 0 else None)  # fmt: skip
        return result, data, False

    async def _merge_renamed(
        self, source: FileNode, replaced: UUID, new_path: str, pid: int, shown: datetime | None
    ) -> tuple[RowMerge, bytes] | None:
        """A document written by a process that read ``new_path`` (node's write-file-atomic,
        a temporary with an ordinary name) renamed over it after another writer's change:
        the merge, and the process's own bytes; or None."""
        if source.doc_id is None or not self.lookups.bases.tracks(replaced):
            return None
        data = self.lookups.cache.get(source.doc_id, source.updated_at)
        if data is None:
            found = await self.lookups.db.run_db(self.lookups.store.read_content, source.doc_id)
            if found is None or found.version != source.updated_at:
                return None
            data = found.data
        try:
            ours = data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        merged = await self._merge_saver_base(replaced, new_path, pid, ours, shown)
        return (merged, data) if merged is not None else None

    async def _merge_saver_base(
        self, doc_id: UUID | None, path: str, pid: int, ours: str, shown: object
    ) -> RowMerge | None:
        """A renamed save merged with another writer's change since what process ``pid``
        read (its base), or None: no base known, no change heard of, or an overlap."""
        if doc_id is None or not mergeable(path):
            return None
        base = self._base_for(path, pid, doc_id, ours)
        if base is None or base.doc_id not in (doc_id, None):
            return None
        if base.doc_id is None:
            log.debug("%r: renamed over by process %d, which found no file there", path, pid)
            return await self.merges.merge_with_row(doc_id, path, b"", None, ours)
        if base.data is None and base.version == shown:
            return None  # the mount has heard of no change since that read
        data = await self._base_bytes(doc_id, path, base)
        if data is None or len(data) > MERGE_LIMIT:
            return None
        shown = base.version if base.data is None else None
        return await self.merges.merge_with_row(doc_id, path, data, shown, ours)

    def _base_for(self, path: str, pid: int, doc_id: UUID, ours: str) -> Base | None:
        """What process ``pid`` read or wrote of ``path``; if it read nothing (rsync writes
        from a copy another process made), the content it extends (``inferred_base``)."""
        base = self.lookups.bases.base(path, pid)
        if base is None:
            return self.merges.inferred_base(doc_id, path, ours)
        own = self.merges.bytes_of(base) if base.doc_id == doc_id else None
        if own is None:
            return base
        rebased = self.merges.rebased(doc_id, path, own, ours)
        return base if rebased is own or rebased is None else Base(doc_id, None, rebased)

    async def _base_bytes(self, doc_id: UUID, path: str, base: Base) -> bytes | None:
        """The bytes of a process's base, if they can be had (by hash from the rows)."""
        data = base.data if base.data is not None else self.lookups.cache.get(doc_id, base.version)
        if data is None:
            data = self.lookups.bases.retained(doc_id, base.version)
        if data is None and base.digest is not None:
            data = await self.merges.stored_base(doc_id, path, base.digest)
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
        self.lookups.cache.put(result.doc_id, result.updated_at, data)
        # Its writers' base is the row it became: an O_APPEND open right after (no read in
        # between reloads the buffer) merges a change not heard of yet against it.
        self.state.set_buffer(node, FileBuffer.of_row(data, result.updated_at))
        node.kernel_version = None
        self.lookups.saves.untrack(node.ino)
        self.commits.unsaved.saved(node)

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
                    if self.lookups.rules.classify(name) is Kind.DOCUMENT:
                        dirs.append((child, child_path))
                        stack.append((child, child_path))
                elif (
                    isinstance(child, FileNode)
                    and self.lookups.rules.classify(name) is Kind.DOCUMENT
                ):
                    what = f"{child_path!r} in a directory renamed into place"
                    data, text = self._scratch_text(child, what)
                    files.append((child, child_path, data, text))
        await self.replacing.replace_target(target)
        items = [
            (None, path, text, FileAttrs(node.custom_mode, node.client_mtime_ns))
            for node, path, _, text in files
        ]
        keep = [path for _, path in dirs]
        results = await self.lookups.db.run_db(self.lookups.store.commit_documents, items, keep)
        for directory, _ in dirs:
            directory.scratch = False
            directory.explicit = True
        for (node, _, data, _), result in zip(files, results, strict=True):
            self.lookups.count_commit(result)
            self._become_document(node, result, data)
            if result.changed:  # commit_documents re-chunked them in its transaction
                self.lookups.announce(result.doc_id)

    async def promote_due(self, now: float | None = None) -> int:
        """Promote tentative scratch files closed and not renamed for the grace period."""
        moment = self.lookups.monotonic() if now is None else now
        promoted = 0
        for ino in self.lookups.saves.due(moment):
            async with self.state.ns_lock:
                node = self.state.tree.inodes.get(ino)
                if not isinstance(node, FileNode) or not node.scratch or node.parent is None:
                    continue
                if node.open_count or node.extra_links or node.parent.scratch:
                    continue
                if self.lookups.rules.classify(node.name) is not Kind.TENTATIVE:
                    continue
                path = self.state.tree.path_of(node)
                try:
                    data, text = self._scratch_text(node, f"promoting {path!r}")
                except FsError as exc:
                    log.info("%s; it stays in memory only", exc.reason)
                    continue
                attrs = FileAttrs(node.custom_mode, node.client_mtime_ns)
                try:
                    result = await self.lookups.commit_document(Write(None, path, text), attrs)
                except DatabaseUnavailable as exc:
                    self.lookups.saves.postpone(ino, moment)  # tried again later
                    self.commits.unsaved.keep_copy(node, data, exc.reason)
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

    async def rename_file_over(  # noqa: PLR0913 - a rename over a document: where, over what, seen when, by whom
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
        await self.commits.commit(source)  # pending changes first: the rename carries them
        merged = await self._merge_renamed(source, replaced, new_path, pid, seen)
        text, source_seen = None, None
        if merged is not None:
            text, seen, source_seen = merged[0].text, merged[0].version, source.updated_at
        based = self._renamer_base(source, replaced, new_path, pid) if merged is None else None
        # The renamed bytes, while the cache holds them (the replace drops it): a late
        # merge after the replace is based on them.
        renamed = (
            self.lookups.cache.get(source.doc_id, source.updated_at) if based is not None else None
        )
        if merged is not None and text is not None:
            await self.lookups.safety_net.keep(
                new_path, merged[1].decode("utf-8", "replace"), text,
                "renamed over a document another writer changed: merged",
            )  # fmt: skip
        merge = self._renamer_merge(new_path, replaced, based, renamed)
        result = await self.replacing.replace_document(
            source,
            Replacement(source.doc_id, replaced, new_path, text, keep_dirs=keep,
                        source_at=source_seen),
            SaveOptions(expected=seen, merge=merge),
            text,
        )  # fmt: skip
        if result is not None and result.merged is not None and renamed is not None:
            # The target changed unheard of: merged under the row lock (rule 3).
            locked = await self.merges.committed_merge(new_path, renamed.decode("utf-8"), result)
            assert locked is not None
            self._show_late(source, new_path, pid, locked, renamed)
        elif merged is not None and result is not None and not result.conflict:
            self.lookups.bases.saw(new_path, pid, result.doc_id, None, merged[1])
            self.lookups.kernel.inode(source.ino)  # it cached the saver's bytes, not the merge
        elif merged is not None and result is not None and result.replaced_hash is not None:
            # Yet another change landed between the merge's read and the replace.
            assert text is not None
            late = await self.merges.merge_late(new_path, merged[0].theirs, text, attrs,
                                                  result)  # fmt: skip
            self.lookups.kernel.inode(source.ino)
            if late is not None:
                self._show_late(source, new_path, pid, late, merged[1])
        elif based is not None and based.doc_id == replaced and result is not None:
            await self._merge_after_replace(source, new_path, pid, based, result, attrs,
                                            renamed)  # fmt: skip

    def _renamer_merge(
        self, new_path: str, replaced: UUID, based: Base | None, renamed: bytes | None
    ) -> records.MergeWith | None:
        """The merge under the row lock of a document renamed over ``replaced`` by a
        process based on ``based``, its bytes ``renamed`` (None: not at hand)."""
        if based is None or based.doc_id != replaced or renamed is None:
            return None
        try:
            ours = renamed.decode("utf-8")
        except UnicodeDecodeError:
            return None
        return self.merges.merge_function(new_path, self.merges.bytes_of(based), ours)

    def _renamer_base(
        self, source: FileNode, replaced: UUID, new_path: str, pid: int
    ) -> Base | None:
        """What the renaming process read of the target (or, if nothing, the content the
        renamed bytes extend), with its bytes where they are at hand: the replace drops
        the cache, and a late merge needs them."""
        based = self.lookups.bases.base(new_path, pid)
        ours = self.lookups.cache.get(source.doc_id, source.updated_at) if source.doc_id else None
        if based is None and ours is not None:
            based = self.merges.inferred_base(replaced, new_path,
                                                ours.decode("utf-8", "replace"))  # fmt: skip
        if based is not None and based.data is None:
            cached = self.lookups.cache.get(replaced, based.version)
            if cached is None:
                cached = self.lookups.bases.retained(replaced, based.version)
            based = based._replace(data=cached) if cached is not None else based
        return based

    async def _merge_after_replace(  # noqa: PLR0913 - a late merge: its writer, its base, the result and the bytes
        self, source: FileNode, new_path: str, pid: int, based: Base, result: CommitResult,
        attrs: FileAttrs, renamed: bytes | None,
    ) -> None:  # fmt: skip
        """A document renamed over the file its process read landed over a change this
        mount had not heard of yet (its guard found it; the change is a version now): that
        change is merged back by a second write, as for any save (``merge_late``), based
        on the ``renamed`` bytes (the cache's, if the replace left them there)."""
        if not result.conflict or result.replaced_hash is None:
            return
        ours_data = self.lookups.cache.get(result.doc_id, result.updated_at)
        if ours_data is None:
            ours_data = renamed

        if ours_data is None:
            return
        try:
            ours = ours_data.decode("utf-8")
        except UnicodeDecodeError:
            return
        base_data = await self._base_bytes(result.doc_id, new_path, based)
        late = await self.merges.merge_late(new_path, base_data, ours, attrs, result)
        if late is not None:
            self._show_late(source, new_path, pid, late, ours_data)

    def _show_late(
        self, source: FileNode, new_path: str, pid: int, late: tuple[str, CommitResult],
        ours_data: bytes,
    ) -> None:  # fmt: skip
        """A late merge after a rename over a document: the process's base is its own
        bytes, and the renamed file shows the merged row."""
        text, merged = late
        data = text.encode("utf-8")
        self.lookups.bases.saw(new_path, pid, merged.doc_id, None, ours_data)
        if source.doc_id != merged.doc_id:
            return  # moved on meanwhile: its own events show it
        source.updated_at = merged.updated_at
        self.lookups.cache.put(merged.doc_id, merged.updated_at, data)
        buffer = self.state.buffers.get(source.ino)
        if buffer is None:
            source.size = len(data)  # read from the cache at the merged version
        elif isinstance(buffer, FileBuffer) and not buffer.dirty:
            self.state.take_others_content(source, FileBuffer.of_row(data, merged.updated_at))
            source.size = len(data)
        source.kernel_version = None
        self.lookups.kernel.attributes(source.ino)
        self.lookups.kernel.inode(source.ino)

    async def promote_all(self) -> None:
        """At unmount: every tentative file becomes a document; if the database cannot
        take them, each is kept in the recovery area."""
        try:
            await self.promote_due(math.inf)
        except FsError as exc:
            log.error("promoting tentative files at unmount failed: %s", exc)
            for ino in self.lookups.saves.tentative():
                node = self.state.tree.inodes.get(ino)
                buffer = self.state.buffers.get(ino)
                if isinstance(node, FileNode) and isinstance(buffer, ScratchBuffer):
                    self.commits.unsaved.keep_copy(
                        node, buffer.snapshot(), f"unmount: {exc.reason}"
                    )
