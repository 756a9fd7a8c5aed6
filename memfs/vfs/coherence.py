"""Other writers' changes: apply change-feed events (or a full resync) to the tree.

Events come from the LISTEN thread (``memfs.feed``) or, without the trigger, from polling.
Each one updates the tree and queues kernel invalidations, so ``ls``, ``stat`` and ``cat``
show the new state at once, even for pages the kernel had cached.  A file with unsaved
local changes is never overwritten here: its next commit detects the newer row and keeps
both (see ``DocumentStore.commit_document``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any
from uuid import UUID

import trio

from memfs.db.interface import DocRow
from memfs.errors import FsError
from memfs.paths import loadable_path
from memfs.tree import FileNode, to_ns
from memfs.vfs.base import log
from memfs.vfs.buffers import FileBuffer
from memfs.vfs.parts import ModelParts

#: After a resync that took T, the next poll waits at least this many T (``poll_changes``).
POLL_SHARE = 5


class OtherWriters:
    """Keeps one mounted filesystem's tree in step with the database."""

    def __init__(self, fs: ModelParts) -> None:
        #: The shared services and lookups; the commits and the names are asked for
        #: another writer's content read under a save, and for tool folders' changes.
        self.lookups = fs.lookups
        self.committed = fs.committed
        self.names = fs.names
        #: Other writers' changes applied so far.
        self.external_changes = 0
        #: The workspace's fingerprint as of ``baseline``, for polling (no trigger).
        self._fingerprint: tuple[int, str] | None = None
        #: Set to poll now, not at the next tick (a watch on the database's files).
        self._woken = trio.Event()

    async def apply_changes(self, events: list[dict[str, Any]]) -> None:
        """Apply a batch of change-feed events (``op``, ``id``, ``path``, ``origin`` ...), in
        order, with one query for all their rows.

        Under a write storm every mount receives every other mount's events; fetching each
        row separately would make the feed fall seconds behind.  The state applied is each
        document's current row (None: deleted), so only the last event per id matters.
        """
        fs = self.lookups
        if any(event.get("op") == "TOOLS" for event in events):
            await self.names.refresh_tools()  # another mount changed a tool folder
        if any(event.get("op") == "RESYNC" for event in events):
            await self.resync()
            return
        latest = fs.store.changed_documents(events)
        if not latest:
            return
        log.debug("change feed: %d document(s) changed", len(latest))
        live = [d for d, gone in latest.items() if not gone]
        before = self._shown(live)
        rows = await fs.db.run_db(fs.store.document_rows, live) if live else {}
        async with fs.state.ns_lock:
            await self._reread_changed_here(before, rows)
            for doc_id in latest:
                self.external_changes += 1
                row = rows.get(doc_id)
                if row is None:
                    fs.apply_deletion(doc_id)
                else:
                    await self._external_upsert(row)
        fs.documents_changed()

    async def baseline(self) -> None:
        """Take the workspace's fingerprint; called before the filesystem loads its tree,
        so a change made after this point, even before the first poll, makes the first
        poll differ (one harmless extra resync at worst)."""
        fs = self.lookups
        self._fingerprint = await fs.db.run_db(fs.store.fingerprint)

    async def resync(self) -> None:
        """Reload every path and attribute and reconcile (after a reconnect, or polling).

        Where the engine lists every document's version more cheaply than its whole row
        (``document_versions``: the polled engines), only the rows whose version or path
        differs from what the mount shows are read whole; the rest of the reconciliation
        is the same either way (``_reconcile``)."""
        fs = self.lookups
        before = self._shown_all()
        versions = await fs.db.run_db_scan(fs.store.document_versions)
        if versions is None:
            rows = await fs.db.run_db_scan(fs.store.load_documents)
            present = {row.id for row in rows}
        else:
            present = {doc_id for doc_id, _, _ in versions}
            differ = [d for d, path, at in versions if before.get(d) != (at, path)]
            found = await fs.db.run_db_scan(fs.store.document_rows, differ) if differ else {}
            present.difference_update(d for d in differ if d not in found)  # gone meanwhile
            rows = sorted(found.values(), key=lambda row: row.updated_at, reverse=True)
            rows.sort(key=lambda row: row.path)
        fs.documents_changed()  # whatever changed unseen, searches look again
        async with fs.state.ns_lock:
            await self._reconcile(before, rows, present)
        log.debug("resynchronised %d documents (%d read whole)", len(present), len(rows))

    async def _reconcile(
        self,
        before: dict[UUID, tuple[datetime | None, str] | None],
        rows: list[DocRow],
        present: set[UUID],
    ) -> None:
        """Show ``rows`` (by path, newest first: at least every row whose version or path
        differs from ``before``) and remove the documents not in ``present`` (every id the
        database lists); under the namespace lock."""
        fs = self.lookups
        by_id = {row.id: row for row in rows}
        reread = await self._reread_changed_here(before, by_id, everything=True)
        if reread:
            present.difference_update(reread)
            present.update(d for d in reread if d in by_id)
            rows = sorted(by_id.values(), key=lambda row: row.updated_at, reverse=True)
            rows.sort(key=lambda row: row.path)
        shown: set[str] = set()
        for row in rows:  # by path, newest first: a duplicated path shows its newest row
            if row.path in shown:
                present.discard(row.id)
                continue
            shown.add(row.path)
            if row.id not in reread and before.get(row.id) == (row.updated_at, row.path):
                continue  # shown as the row is, and not changed here since
            await self._external_upsert(row)
        for doc_id in [d for d in fs.state.tree.docs if d not in present]:
            fs.apply_deletion(doc_id)

    def _shown(self, doc_ids: Iterable[UUID]) -> dict[UUID, tuple[datetime | None, str] | None]:
        """What this mount shows of each document, its version and path (None: nothing),
        taken before reading rows whose application waits for the namespace lock."""
        return {doc_id: self._shown_now(doc_id) for doc_id in doc_ids}

    def _shown_all(self) -> dict[UUID, tuple[datetime | None, str] | None]:
        """``_shown`` of every document, from one walk of the tree."""
        return self.lookups.state.tree.shown_documents()

    def _shown_now(self, doc_id: UUID) -> tuple[datetime | None, str] | None:
        fs = self.lookups
        node = fs.state.tree.docs.get(doc_id)
        if node is None or node.parent is None:
            return None
        return node.updated_at, fs.state.tree.path_of(node)

    async def _reread_changed_here(
        self,
        before: dict[UUID, tuple[datetime | None, str] | None],
        rows: dict[UUID, DocRow],
        *,
        everything: bool = False,
    ) -> set[UUID]:
        """Read again the rows of documents this mount changed (saved, renamed, moved with
        a folder, removed, created, or read anew) while ``rows`` were on their way; called
        under the namespace lock.

        Those rows may be older than what the mount shows now: applying one would roll the
        file back to another writer's earlier version, with its size and cached content
        (the next program to read and save the file would erase the save made here), move
        it back to its old folder, or bring back a file just removed.  With ``everything``
        (a resync), documents created here meanwhile count too, or the resync would take
        them for deleted.  Returns the documents whose rows were read again.
        """
        fs = self.lookups
        if everything:
            now = self._shown_all()
            changed = [d for d, shown in before.items() if now.get(d) != shown]
            changed += [d for d in fs.state.tree.docs if d not in before]
        else:
            changed = [d for d, shown in before.items() if self._shown_now(d) != shown]
        if not changed:
            return set()
        log.debug("re-reading %d row(s) changed here while they were read", len(changed))
        fresh = await fs.db.run_db(fs.store.document_rows, changed)
        for doc_id in changed:
            rows.pop(doc_id, None)
        rows.update(fresh)
        return set(changed)

    async def _external_upsert(self, row: DocRow) -> None:
        fs = self.lookups
        node = fs.state.tree.docs.get(row.id)
        if not loadable_path(row.path):
            if node is not None:
                fs.apply_deletion(row.id)
            return
        if node is None:
            if fs.saves.waits_as_left(row.id, row.path, row.updated_at):
                return  # renamed away here; a new file, its removal or the move decides
            holder = fs.state.tree.resolve(row.path)
            if isinstance(holder, FileNode) and self._older_duplicate(holder, row):
                # A second row for a shown path (IronClaw's NULL agent_id lets that happen):
                # show the newest, as a fresh mount and every save (which writes the newest
                # row) do.
                log.warning(
                    "duplicate rows for %r: now showing the newer %s instead of %s",
                    row.path,
                    row.id,
                    holder.doc_id,
                )
                fs.state.tree.bind_document(holder, row.id)
                fs.cache.drop(row.id)
                await self._external_content(holder, row)
                return
            fs.state.mark_contended(row.path)
            if holder is not None:
                return  # a local file or directory holds that name; its commit decides
            added = fs.state.tree.load_document((
                row.id, row.path, row.size, row.created_at, row.updated_at,
                row.attrs.mode, row.attrs.mtime_ns,
            ))  # fmt: skip
            if added is not None and added.parent is not None:
                fs.touch_dir(added.parent)
                fs.kernel.entry(added.parent.ino, added.name)
                fs.kernel.inode(added.parent.ino)
            return
        old_path = fs.state.tree.path_of(node)
        if row.path != old_path:
            fs.state.mark_contended(old_path, row.path)
            self._external_move(node, row.path)
        if row.updated_at != node.updated_at:
            await self._external_content(node, row)

    def _older_duplicate(self, node: FileNode, row: DocRow) -> bool:
        """Whether ``node`` shows an older row of ``row``'s path and may switch to it."""
        fs = self.lookups
        if node.doc_id is None or node.doc_id == row.id or node.updated_at is None:
            return False
        buffer = fs.state.buffers.get(node.ino)
        if isinstance(buffer, FileBuffer) and buffer.dirty:
            return False  # its save writes the newest row anyway
        newer: bool = row.updated_at > node.updated_at
        return newer

    def _external_move(self, node: FileNode, new_path: str) -> None:
        fs = self.lookups
        parent_path, _, name = new_path.rpartition("/")
        new_parent = fs.state.tree.ensure_dir(parent_path, fs.clock())
        if new_parent is None or name in new_parent.children:
            log.warning("cannot show %r moved by another writer: the name is taken", new_path)
            self._left_behind(node)
            return
        old_parent, old_name = node.parent, node.name
        fs.state.tree.move(node, new_parent, name)
        if old_parent is not None:
            fs.kernel.entry(old_parent.ino, old_name)
            fs.kernel.inode(old_parent.ino)
            fs.prune_implied(old_parent)
        fs.kernel.entry(new_parent.ino, name)
        fs.kernel.inode(new_parent.ino)

    def _left_behind(self, node: FileNode) -> None:
        """The row ``node`` stood for went to a name taken here (a file being written): the
        old name holds no row any more and goes, unless it has changes of its own (then
        its save makes a document there anew).  Kept, it would stand for nothing: a reader
        opening it would create an empty document nobody wrote."""
        self.lookups.state.take_out_unchanged(node)

    async def _external_content(self, node: FileNode, row: DocRow) -> None:
        fs = self.lookups
        buffer = fs.state.buffers.get(node.ino)
        if fs.state.has_changes(node):
            # A save through the mount is based on the version the file was opened at;
            # its commit merges the newer row (``memfs.merge``) or keeps both.
            if isinstance(buffer, FileBuffer):
                buffer.others_changed = True
            log.info(
                "%s changed in the database while open for writing here; its save merges "
                "the two, or keeps both",
                fs.describe_node(node),
            )
            return
        if node.doc_id is not None and fs.bases.tracks(node.doc_id):  # readers' bases keep it
            fs.bases.superseded(node.doc_id, node.updated_at,
                                fs.cache.get(node.doc_id, node.updated_at))  # fmt: skip
        node.updated_at = row.updated_at
        node.client_mtime_ns = row.attrs.mtime_ns
        node.mtime_ns = row.attrs.mtime_ns or to_ns(row.updated_at)
        node.ctime_ns = to_ns(row.updated_at)
        if row.attrs.mode is not None:
            node.mode = (node.mode & ~0o7777) | row.attrs.mode
        node.kernel_version = None
        fs.mark_node_contended(node)
        if buffer is not None and node.open_count > 0:
            # Open here: the size stays the bytes the open files serve until the new bytes
            # replace them (no await between the two), or a reader meanwhile would be told
            # a size its reads do not fill (the kernel pads the page with NUL bytes).
            try:
                fresh = FileBuffer.of_row(await self.committed.read(node), node.updated_at)
            except FsError:
                fresh = FileBuffer(b"")
            if fs.state.has_changes(node):
                # Opened for writing and written while the row was read (the shell's `>`
                # right after a `cat`): those bytes are the file now, and their save
                # merges the row.  Replaced, they were lost without a trace (issue 54).
                now = fs.state.buffers.get(node.ino)
                if isinstance(now, FileBuffer):
                    now.others_changed = True
                fs.kernel.attributes(node.ino)
                return
            fs.state.take_others_content(node, fresh)
            node.size = len(fresh)
        else:
            fs.state.buffers.pop(node.ino, None)
            node.size = row.size
        fs.kernel.attributes(node.ino)  # the old size goes now, not when the queue gets to it
        fs.kernel.inode(node.ino)

    async def resync_when_diverged(self) -> None:
        """Background task: reload the tree whenever a deferred change of this mount was
        not made (its condition failed or the database refused it), so the mount shows
        what the database holds."""
        fs = self.lookups
        while True:
            await fs.db.until_diverged()
            try:
                await self.resync()
            except FsError as exc:
                log.warning("reloading after a change that was not made failed: %s", exc)
                fs.db.diverge()
                await trio.sleep(1.0)

    async def poll_changes(self, interval: float = 1.0) -> None:
        """Without the trigger: resync whenever the workspace's fingerprint changes, and
        look at the tool folders' (``ToolFolders.refresh``)."""
        fs = self.lookups
        last = self._fingerprint
        while True:
            took = 0.0
            try:
                current = await fs.db.run_db(fs.store.fingerprint)
                if current != last:  # None after a failed poll: resync, as the feed does
                    began = trio.current_time()
                    await self.resync()
                    took = trio.current_time() - began
                last = current
                await self.names.refresh_tools()  # no feed tells of other mounts' tool files either
            except FsError as exc:
                log.warning("polling for changes failed: %s", exc)
                last = None
            # A resync that took long (a large workspace, busy threads) is not made again at
            # once: the next waits five times as long, and a wake-up does not cut that
            # pause short (an agent writing twice a second would otherwise keep the daemon's
            # threads in back-to-back reads of the whole workspace: measured at 100,000
            # documents on the libSQL file, 1.4 s each, 12.6 s beside eight busy readers).
            if took * POLL_SHARE > interval:
                await trio.sleep(took * POLL_SHARE)
            else:
                with trio.move_on_after(interval):
                    await self._woken.wait()
            self._woken = trio.Event()

    def wake(self) -> None:
        """Poll now: the database's files changed (``memfs.db.libsql.watch``)."""
        self._woken.set()
