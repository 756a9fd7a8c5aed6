"""The merge owner: every decision between a save and another writer's change, in one place.

A save lands over a row another writer may have changed since the saver started.  What the
live document then holds is decided here, for every save path (a plain close, a temporary
renamed into place, a rename over a document, ``>>``, tool folders), by these rules, in
this order (the lock order is ``memfs.vfs.state``'s; nothing here takes a lock):

1. **The base** is what the writer started from: what its process read last (its first
   read since it last wrote: ``SaverBases``), its bytes kept while any base is at that
   version (``SaverBases.retain``: legacy IronClaw keeps no version of the agent's own
   UPDATE, so a hash alone finds nothing).  A writer whose bytes do not extend what it
   read but extend an earlier content served here (a sync tool's copy: rsync, rclone),
   or that read nothing (the shell's ``>`` after a ``cat``), is based on the longest such
   content (``inferred_base``, ``rebased``); bytes that add no line the row lacks (a
   ``cp`` of a kept version) have no base and replace the document.
2. **The rule** is ``memfs.merge``'s three-way merge of base, the row now and the save:
   both sides' lines where they do not overlap; the save alone where they overlap, the
   other change kept as a version (``merge_texts``).  Whole values (JSON, ``.system/``,
   ``.config``) and sides over ``MERGE_LIMIT`` are never merged.
3. **The write** is guarded on the version its base was: a row changed since is merged
   with the save inside the write's transaction, the row locked (``merge_function``, run
   by the engine: ``CommitResult.merged``), so no reader ever sees the save without the
   other writer's lines and no third writer lands between the merge's read and its
   write.  A base known by IronClaw's hash alone (no cache holds its bytes) is read by
   the engine in that same transaction, from the row's versions (``merge_by_hash``); a
   writer that found no document, read nothing, or extends an earlier content than it
   read is older than the row whatever its version (``SaveOptions.stale_base``).  A save
   is one engine call.  Only the renamed and rename-over saves (``SavePatterns``) still
   merge after their write, by late rounds based on what the round before wrote, up to
   ``LATE_MERGES`` (``merge_late``); each of those rounds is itself merged under the lock.
4. **A conditional save** (``FileBuffer.only_at``: an ETag's ``If-Match``, MCP's
   ``expected_content_hash``) is never merged: a row changed since its version, heard
   of or found under the row lock, refuses it whole (``refuse_changed``: ESTALE, the
   transaction rolled back), so the writer that asked for exactly that version hears so.
5. **The safety net**: whenever a save is stored as anything but its writer's bytes,
   those bytes are kept, before the save is acknowledged, in memfs's own storage
   (``memfs.vfs.safety_net``), listed as ``.versions/<file>/as-saved_*``.  The rule
   above may be wrong; the net is not a rule.

What the buffers hold (their base, its version, whether another writer changed the row
while open) stays with ``Contents``, which asks here; ``SavePatterns`` asks here for the
renamed and rename-over saves.
"""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar
from uuid import UUID

from memfs.db.interface import (
    ByHash,
    CommitResult,
    FileAttrs,
    MergeWith,
    SaveOptions,
)
from memfs.db.records import Write
from memfs.errors import WriteRefused
from memfs.merge import MERGE_LIMIT, merge, mergeable
from memfs.vfs.base import log
from memfs.vfs.roles import Caching, Committing, SaverTables, StoreAccess
from memfs.vfs.safety_net import SafetyNet
from memfs.vfs.save_tables import Base


def stale_save(path: str) -> WriteRefused:
    """A conditional save refused: the document is no longer at the version given."""
    return WriteRefused(
        errno.ESTALE, "a conditional save",
        f"{path!r} changed since the version given (another writer's save came first); "
        "nothing written",
    )  # fmt: skip


T = TypeVar("T")

#: How many times in a row a save merges other writers' changes that landed as it wrote.
#: Each round is one guarded write; an agent appending every 20 ms beat four rounds on a
#: loaded machine (CI: 7 of 666 lines only in versions), so sixteen.
LATE_MERGES = 16


class RowMerge(NamedTuple):
    """A save merged with the row as it was read: the merged text, the row's version
    and the row's bytes (the base of a late round if yet another change lands first)."""

    text: str
    version: Any
    theirs: bytes


class SaverBase(NamedTuple):
    """What a save's writers started from (``FileBuffer``'s base): its bytes (None: not
    at hand), IronClaw's hash of them (None: unknown) and the row's version it was (None:
    no row holds it); ``row``: the row's version the mount shows; ``told``: another
    writer's change was told of since it was read."""

    data: bytes | None
    digest: str | None
    version: Any
    row: Any
    told: bool

    @property
    def heard(self) -> bool:
        """The mount heard of a change of the row since the base."""
        return self.version != self.row or self.told


class MergeLookups(StoreAccess, Caching, SaverTables, Committing, Protocol):
    """What merges ask of the lookups: the store, the bytes a merge is based on
    (``bases``: what each process read or wrote; ``cache``: committed contents by
    version), IronClaw's write of a document, and the safety net."""

    safety_net: SafetyNet


class Merges:
    """The merge decisions of one mount (see the rules above)."""

    def __init__(self, lookups: MergeLookups) -> None:
        #: Database access and the commit of IronClaw's write; its ``bases`` (what each
        #: process read or wrote) and ``cache`` (committed contents by version) hold the
        #: bytes a merge is based on.
        self.lookups = lookups

    async def run_db(self, fn: Callable[..., T], *args: Any) -> T:
        """A bounded database call (``Lookups.run_db``)."""
        return await self.lookups.db.run_db(fn, *args)

    def inferred_base(self, doc_id: UUID, path: str, ours: str) -> Base | None:
        """The base of a save whose writer read nothing of the document (rsync's
        temporary, written from a copy another process made; the shell's ``>`` after a
        ``cat``): the longest content served here lately, or read or written by a process,
        that the saved bytes extend (start with, up to a line's end), or None.  The saver
        then only added lines to it, so another writer's lines since are merged, not
        pushed out to a version.  The longest: a shorter one would take the lines both
        have as the saver's, and write them twice.  No SQL: only bytes at hand."""
        data = ours.encode("utf-8")
        best: tuple[int, Base] | None = None
        bases = self.lookups.bases
        for base in bases.served_versions(doc_id) + bases.candidates(path, doc_id):
            got = self.bytes_of(base)
            if not got or len(got) >= len(data) or len(got) > MERGE_LIMIT:
                continue  # the same bytes add nothing: a copy (``cp`` of a kept version)
            if not data.startswith(got) or not (got.endswith(b"\n") or data[len(got)] == 0x0A):
                continue
            if best is None or len(got) > best[0]:
                best = (len(got), base)
        if best is None:
            return None
        newest = self._newest_served(doc_id)
        if newest is not None and newest.startswith(data[: best[0]]):
            added = set(data[best[0] :].splitlines())
            if added <= set(newest[best[0] :].splitlines()):
                # The bytes add nothing the row lacks: a copy of the row (``cp`` of a kept
                # version, a restore), not lines added to an earlier content: no base.
                return None
        log.debug("%r: its writer's base inferred: %d bytes it extends", path, best[0])
        return best[1]

    def _newest_served(self, doc_id: UUID) -> bytes | None:
        """The newest content of ``doc_id`` this mount served or wrote, if at hand."""
        for base in self.lookups.bases.served_versions(doc_id):
            data = self.bytes_of(base)
            if data is not None:
                return data
        return None

    def rebased(self, doc_id: UUID, path: str, own: bytes | None, ours: str) -> bytes | None:
        """The base of a save whose writer read ``own`` (None: nothing known): ``own``,
        unless the saved bytes do not extend it but do extend an earlier content some
        process read here, which ``own`` extends too.  A sync tool reads the destination
        only to compare it (rsync's basis file, rclone's checksum); its bytes come from a
        copy made before: based on what it read, its save would delete the other writer's
        lines since that copy."""
        data = ours.encode("utf-8")
        if own is not None and data.startswith(own):
            return own
        return self._rebase(path, own, self.earlier_content(doc_id, path, ours))

    def earlier_content(self, doc_id: UUID, path: str, ours: str) -> bytes | None:
        """The bytes of the content a save's bytes extend (``inferred_base``), if any."""
        earlier = self.inferred_base(doc_id, path, ours)
        return self.bytes_of(earlier) if earlier is not None else None

    @staticmethod
    def _rebase(path: str, own: bytes | None, earlier: bytes | None) -> bytes | None:
        """``rebased``'s choice, given the earlier content the save extends: that content
        if what its writer read (``own``) extends it too, else ``own``."""
        if earlier is not None and (own is None or own.startswith(earlier)):
            if own is not None:
                log.debug("%r: the save extends an earlier content than its writer read: "
                          "based on that", path)  # fmt: skip
            return earlier
        return own

    def bytes_of(self, found: Base) -> bytes | None:
        """The bytes of a process's base: kept with it, or in the content cache."""
        if found.data is not None or found.doc_id is None:
            return found.data
        cached = self.lookups.cache.get(found.doc_id, found.version)
        if cached is not None:
            return cached
        return self.lookups.bases.retained(found.doc_id, found.version)

    async def stored_base(self, doc_id: UUID, path: str, digest: str) -> bytes | None:
        """A base whose bytes no cache holds any more, from the row or its version rows
        (by IronClaw's hash of it), or None (logged) if neither holds it."""
        data = await self.run_db(self.lookups.store.content_by_hash, doc_id, digest)
        if data is None or len(data) > MERGE_LIMIT:
            _base_not_kept(path)
            return None
        log.debug("%r: its writer's base fetched from the version rows", path)
        return data

    async def merge_with_row(
        self, doc_id: UUID, path: str, base_data: bytes, base_version: Any, ours: str
    ) -> RowMerge | None:
        """``ours`` merged with the row as it is now, based on ``base_data`` (the row at
        ``base_version``, None: no row version holds it); None if there is nothing to
        merge or the changes overlap."""
        found = await self.run_db(self.lookups.store.read_content, doc_id)
        if found is None or found.version == base_version:
            return None
        merged = self.merge_texts(path, base_data, found.data, ours)
        return RowMerge(merged, found.version, found.data) if merged is not None else None

    def merge_function(self, path: str, base_data: bytes | None, ours: str) -> MergeWith | None:
        """The merge the engine runs under the row lock when the row changed since the
        save's base (``base_data``: None, unknown, or the path never merged): ``ours``
        merged with the row as it stands, read and written in one transaction, so no
        third writer lands between (rule 3)."""
        if base_data is None or not mergeable(path) or len(base_data) > MERGE_LIMIT:
            return None

        def merge_with_row(theirs: bytes, by_hash: ByHash) -> str | None:
            return self.merge_texts(path, base_data, theirs, ours)

        return merge_with_row

    def merge_by_hash(self, doc_id: UUID, path: str, digest: str, ours: str) -> MergeWith | None:
        """The merge under the row lock of a save whose base is known by IronClaw's hash
        alone (no cache holds its bytes): the engine reads them from the row's versions
        in the save's transaction, only if the row did change (rule 3)."""
        if not mergeable(path):
            return None
        data = ours.encode("utf-8")
        earlier = self.earlier_content(doc_id, path, ours)  # at hand: before the engine call

        def merge_with_row(theirs: bytes, by_hash: ByHash) -> str | None:
            own = by_hash(digest)
            if own is None or len(own) > MERGE_LIMIT:
                _base_not_kept(path)
                return None
            base = own if data.startswith(own) else self._rebase(path, own, earlier)
            return None if base is None else self.merge_texts(path, base, theirs, ours)

        return merge_with_row

    def save_merge(
        self, doc_id: UUID, path: str, base: SaverBase, ours: str
    ) -> tuple[MergeWith | None, bool]:
        """How a save of ``ours`` over row ``doc_id`` merges, under the row lock, with
        another writer's change (rules 1-3): the merge, and whether the save's base is
        older than the row whatever its version (``SaveOptions.stale_base``: its writer
        read nothing, heard of a change since, or extends an earlier content)."""
        if not mergeable(path):
            return None, False
        if base.data is None and base.digest is None:
            # Its writer read nothing (the shell's ``>`` after a ``cat``): the content its
            # bytes extend, if another writer changed the row since.
            inferred = self.inferred_base(doc_id, path, ours)
            data = self.bytes_of(inferred) if inferred is not None else None
            if inferred is None or data is None:
                return None, False
            shown = inferred.version if inferred.data is None else None
            return self.merge_function(path, data, ours), shown != base.row or base.told
        if base.data is None:
            assert base.digest is not None
            return self.merge_by_hash(doc_id, path, base.digest, ours), base.heard
        rebased = self.rebased(doc_id, path, base.data, ours)
        stale = base.heard or rebased is not base.data
        return self.merge_function(path, rebased, ours), stale

    @staticmethod
    def refuse_changed(path: str) -> MergeWith:
        """The engine's answer to a conditional save over a row another writer changed
        since its version (rule 4): the save refused under the row lock, nothing written."""

        def refuse(theirs: bytes, by_hash: ByHash) -> str | None:
            raise stale_save(path)

        return refuse

    async def committed_merge(
        self, path: str, ours: str, result: CommitResult
    ) -> tuple[str, CommitResult] | None:
        """A write whose engine merged it with another writer's change (``result.merged``):
        the writer's bytes kept by the safety net (rule 4), and the text stored; None if the
        engine wrote the save as it was."""
        if result.merged is None:
            return None
        if result.merged != ours:
            await self.lookups.safety_net.keep(path, ours, result.merged, "merged with "
                                               "another writer's change")  # fmt: skip
        return result.merged, result

    @staticmethod
    def merge_texts(path: str, base_data: bytes, theirs_data: bytes, ours: str) -> str | None:
        """The three-way merge of a save (logged), or None: not text, too large, or the
        changes overlap."""
        try:
            base, theirs = base_data.decode("utf-8"), theirs_data.decode("utf-8")
        except UnicodeDecodeError:
            return None
        if len(theirs_data) > MERGE_LIMIT or len(ours) > MERGE_LIMIT:
            log.info("%r: changed by another writer meanwhile; too large to merge (over %d "
                     "bytes): the save wins, the other change is kept",
                     path, MERGE_LIMIT)  # fmt: skip
            return None
        outcome = merge(base, theirs, ours)
        if outcome.text is None:
            lines = ", ".join(f"{a}-{b}" if a != b else str(a) for a, b in outcome.overlaps)
            log.warning("%r: this save and another writer's change overlap (lines %s of the "
                        "save): the save wins, the other change is kept as a version", path,
                        lines)  # fmt: skip
            return None
        log.info("%r: merged with another writer's change (%s)", path, outcome.how)
        return outcome.text

    async def _merge_replaced(  # noqa: PLR0913 - the save, its base, the result and the safety net's flag
        self, path: str, base_data: bytes | None, ours: str, attrs: FileAttrs,
        result: CommitResult, *, keep: bool = False,
    ) -> tuple[str, CommitResult] | None:  # fmt: skip
        """The save landed over another writer's change the mount had not heard of yet
        (the change feed is milliseconds behind): that change, kept as a version, is merged
        in by a second write based on the save's own.  The merged text and that write's
        result, or None (no base, the change not found, nothing to add, an overlap)."""
        if base_data is None or result.replaced_hash is None or not mergeable(path):
            return None
        theirs = await self.run_db(self.lookups.store.content_by_hash, result.doc_id,
                                   result.replaced_hash)  # fmt: skip
        if theirs is None:
            return None
        merged = self.merge_texts(path, base_data, theirs, ours)
        if merged is None or merged == ours:
            return None
        if keep:  # ``ours`` is the writer's own bytes (later rounds': a merge)
            await self.lookups.safety_net.keep(path, ours, merged, "merged with another "
                                               "writer's change that landed first")  # fmt: skip
        again = await self._commit_guarded(Write(result.doc_id, path, merged), result.updated_at,
                                           attrs, ours.encode("utf-8"))  # fmt: skip
        if again is not None and again.merged is not None:
            return again.merged, again
        return (merged, again) if again is not None else None

    async def merge_late(
        self, path: str, base_data: bytes | None, ours: str, attrs: FileAttrs,
        result: CommitResult,
    ) -> tuple[str, CommitResult] | None:  # fmt: skip
        """``_merge_replaced``, again while yet another writer's change lands between a
        merged write and the one before it (a file many writers append to), up to
        ``LATE_MERGES`` rounds: each round is based on what the round before wrote."""
        late = await self._merge_replaced(path, base_data, ours, attrs, result, keep=True)
        rounds = 1
        while late is not None and late[1].conflict and rounds < LATE_MERGES:
            again = await self._merge_replaced(path, ours.encode("utf-8"), late[0], attrs,
                                               late[1])  # fmt: skip
            if again is None:
                break
            ours, late, rounds = late[0], again, rounds + 1
        if late is not None and late[1].conflict:
            log.warning("%r: other writers' changes kept landing for %d merged writes; the "
                        "last one is kept as a version", path, rounds)  # fmt: skip
        return late

    async def commit_merged(
        self, doc_id: UUID, path: str, merged: RowMerge | None, attrs: FileAttrs, ours: str
    ) -> tuple[str, CommitResult] | None:
        """Commit a merge (made against the row at ``merged.version``): the text stored
        and the commit's result, or None if there is none or IronClaw's rules refuse it
        (the other writer's lines may hold what a system-prompt file may not): the save
        alone is then written, as without a merge.  Yet another writer's change landing
        between the merge's read and its write (the agent every 20 ms) is merged in by
        the late rounds (``merge_late``), based on the row the merge read."""
        if merged is None:
            return None
        await self.lookups.safety_net.keep(path, ours, merged.text, "merged with another "
                                           "writer's change")  # fmt: skip
        result = await self._commit_guarded(Write(doc_id, path, merged.text), merged.version, attrs,
                                            merged.theirs)  # fmt: skip
        if result is None:
            return None
        if result.merged is not None:
            return result.merged, result
        if result.conflict and result.replaced_hash is not None:
            late = await self.merge_late(path, merged.theirs, merged.text, attrs, result)
            if late is not None:
                return late
        return merged.text, result

    async def _commit_guarded(
        self, write: Write, version: Any, attrs: FileAttrs, base: bytes | None
    ) -> CommitResult | None:
        """A merged text written over the row at ``version`` (whose bytes are ``base``):
        yet another change since is merged in under the row lock; None if IronClaw's
        rules refuse the text (logged)."""
        doc_id, path, text = write.doc_id, write.path, write.content
        merge = self.merge_function(path, base, text)
        try:
            how = SaveOptions(expected=version, merge=merge)
            return await self.lookups.commit_document(Write(doc_id, path, text), attrs, how)
        except WriteRefused as exc:
            log.warning("%r: the merge with another writer's change is refused (%s); this "
                        "save alone is written, the other change is kept as a version",
                        path, exc.reason)  # fmt: skip
            return None


def _base_not_kept(path: str) -> None:
    """Say that a save's base, known by hash alone, is neither cached nor kept (or too
    large): another writer's change is kept as a version instead of merged."""
    log.info("%r: what its writer read is neither cached nor kept as a version; a change by "
             "another writer meanwhile is kept as a version, not merged", path)  # fmt: skip
