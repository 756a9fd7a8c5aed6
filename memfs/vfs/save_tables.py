"""The tables of editors' saves: what waits where while a program saves a document.

``EditorSaves`` holds the renamed-away originals (by the path their row is at) and the
tentative files (by inode, with when each falls due); ``SaverBases`` holds what each
process last read or wrote of each document, the base of a three-way merge
(``memfs.merge``) when its next save lands over another writer's change.  Rename saves and
``O_TRUNC`` rewrites start from an empty file, so a base is found by path and process, not
by handle.  The protocol that fills and reads them is ``memfs.vfs.saves``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple
from uuid import UUID

from memfs.scratch import TENTATIVE_GRACE
from memfs.tree import FileNode

#: How many (path, process) bases are remembered: a version id each; bytes only where no
#: row or cache entry holds them any more (a merged save's own bytes, a version another
#: writer replaced), up to ``BASE_BYTES`` in all (the oldest go first).
BASES_KEPT = 4096
BASE_BYTES = 16 << 20
#: The share of the mount's content budget (``--cache-bytes``) the bases' bytes may take:
#: one part in ``BASES_SHARE`` (16 MiB of the default 64 MiB).
BASES_SHARE = 4
#: Contents of one document kept as it is served, for an unknown base to be inferred from.
SERVED_KEPT = 4


class Base(NamedTuple):
    """What one process read or wrote of a document: the row version, or the bytes."""

    #: None: the process looked the path up and found no document (``absent``).
    doc_id: UUID | None
    version: Any
    data: bytes | None
    #: Read (not written) by the process: a later read does not replace it.
    read: bool = False
    #: IronClaw's hash of the bytes (None: not known): when neither the cache nor ``data``
    #: holds them any more, the merge finds them among the version rows by it.
    digest: str | None = None
    #: The process found no document at the path and holds emacs's lock file of it
    #: (``.#name``, made as its buffer first changed): the buffer started from an empty
    #: file, and a read before its save (emacs compares the file with the buffer) is not
    #: its base.
    editing: bool = False
    #: A read by a process that had found no document at the path before it.
    after_absent: bool = False


class SaverBases:
    """The base of each process's next save of each document (bounded, oldest forgotten)."""

    def __init__(
        self,
        kept: int = BASES_KEPT,
        max_bytes: int = BASE_BYTES,
        process_of: Callable[[int], int] = lambda thread: thread,
    ) -> None:
        self._kept = kept
        #: The process a thread belongs to (FUSE names the calling thread).  A base is kept
        #: for the thread and, as a fallback, for its process: a thread that read nothing
        #: of a document saves what its process last read or wrote of it (node and VS Code,
        #: rclone, Go programs read on one thread and write from another).
        self._process_of = process_of
        self._max_bytes = max_bytes
        self._bytes = 0
        self._bases: OrderedDict[tuple[str, int], Base] = OrderedDict()
        #: The keys of each document's bases (``superseded`` looks at those alone).
        self._by_doc: dict[UUID, set[tuple[str, int]]] = {}
        #: Bytes of a version some base is at, kept when they left the content cache
        #: (``retain``): while the row is still at that version a base keeps its version
        #: (no round trip to merge an unchanged row); when the row leaves it they are the
        #: base's bytes (``superseded``).
        self._retained: dict[tuple[UUID, Any], bytes] = {}
        #: The last ``SERVED_KEPT`` contents of each document the mount served or wrote
        #: (``served``), oldest first: the base of a save whose writer read nothing of the
        #: document is inferred among them (``Contents.inferred_base``).  Within the byte
        #: budget, and the first to go when it is full.
        self._served: OrderedDict[tuple[UUID, Any], bytes] = OrderedDict()
        self._served_bytes = 0
        #: The versions ``_served`` holds of each document, oldest first (no scan of all).
        self._served_of: dict[UUID, list[Any]] = {}

    def saw(  # noqa: PLR0913 - a base is a writer, a row version and its bytes
        self,
        path: str,
        pid: int,
        doc_id: UUID | None,
        version: Any,
        data: bytes | None = None,
        digest: str | None = None,
    ) -> None:
        """Process ``pid`` wrote ``path`` at ``version`` (``data``: bytes no row version
        holds; ``digest``: their hash): its next save is based on that.  Unknown processes
        (0) and documents without a row are not kept."""
        if pid <= 0 or doc_id is None:
            return
        self._put((path, pid), Base(doc_id, version, data, digest=digest))

    def read(  # noqa: PLR0913 - a base is a writer, a row version and its bytes
        self,
        path: str,
        pid: int,
        doc_id: UUID | None,
        version: Any,
        digest: Callable[[], str | None] = lambda: None,
        data: Callable[[], bytes | None] | None = None,
    ) -> None:
        """Process ``pid`` read ``path`` at ``version`` (``digest``: its hash, asked for
        only when kept; ``data``: with no version, the bytes no row holds, asked for
        only when kept).  Its first read
        since it last wrote the document is its base: an editor reads a file once and may
        read it again just before it writes (vim's backup copy), after another writer's
        change it never showed its user."""
        if pid <= 0 or doc_id is None:
            return
        known = self._bases.get((path, pid))
        if known is not None and known.read and known.doc_id == doc_id:
            return
        if known is not None and known.editing:
            return
        after = known is not None and known.doc_id is None
        if data is not None:
            self._put((path, pid), Base(doc_id, version, data(), read=True, after_absent=after))
            return
        self._put((path, pid), Base(doc_id, version, None, read=True, digest=digest(),
                                    after_absent=after))  # fmt: skip

    def absent(self, path: str, pid: int) -> None:
        """Process ``pid`` looked ``path`` up and found no document: what it writes there
        before it reads the document is based on an empty file, so a document another
        writer made meanwhile is merged with it, not replaced."""
        if pid <= 0:
            return
        if (path, pid) in self._bases:
            return  # it read or wrote the document (vim looks its name up after ``x -> x~``)
        self._put((path, pid), Base(None, None, b""))

    def editing(self, path: str, pid: int) -> None:
        """Process ``pid`` made emacs's lock file of ``path`` (``.#name``), which emacs
        does as its buffer first changes.  If it had found no document there, its buffer
        started from an empty file: a read before it saves does not replace that base, and
        a read since it found none is undone (emacs, locking a file another writer made
        since it looked, first reads it to compare it with the buffer; were that read its
        base, the document the agent made meanwhile would look deleted by the save)."""
        known = self._bases.get((path, pid))
        if known is not None and known.doc_id is None:
            self._put((path, pid), known._replace(editing=True))
        elif known is not None and known.read and known.after_absent:
            self._put((path, pid), Base(None, None, b"", editing=True))

    def _put(self, key: tuple[str, int], base: Base) -> None:
        self._put_one((key[0], -self._process_of(key[1])), base)  # the process's: negative
        self._put_one(key, base)

    def _put_one(self, key: tuple[str, int], base: Base) -> None:
        self._drop(key)
        self._bases[key] = base
        if base.doc_id is not None:
            self._by_doc.setdefault(base.doc_id, set()).add(key)
        self._bytes += len(base.data or b"")
        while len(self._bases) > self._kept or self._bytes > self._max_bytes:
            self._drop(next(iter(self._bases)))

    def _drop(self, key: tuple[str, int]) -> None:
        old = self._bases.pop(key, None)
        if old is not None:
            self._bytes -= len(old.data or b"")
            keys = self._by_doc.get(old.doc_id) if old.doc_id is not None else None
            if keys is not None and old.doc_id is not None:
                keys.discard(key)
                if not keys:
                    del self._by_doc[old.doc_id]
                if old.data is None and not self._at(old.doc_id, old.version):
                    self._unretain(old.doc_id, old.version)

    def _at(self, doc_id: UUID, version: Any) -> bool:
        """Whether a base is at ``version`` of ``doc_id`` by its version alone."""
        return any(
            self._bases[key].data is None and self._bases[key].version == version
            for key in self._by_doc.get(doc_id, ())
        )

    def _unretain(self, doc_id: UUID, version: Any) -> None:
        data = self._retained.pop((doc_id, version), None)
        if data is not None:
            self._bytes -= len(data)

    def retain(self, doc_id: UUID, version: Any, data: bytes) -> None:
        """The content cache let go of ``doc_id`` at ``version``: kept if a base is at
        that version (within the bases' byte budget, the oldest bases going first)."""
        if (doc_id, version) in self._retained or not self._at(doc_id, version):
            return
        self._retained[(doc_id, version)] = data
        self._bytes += len(data)
        while self._bytes > self._max_bytes and self._bases:
            self._drop(next(iter(self._bases)))

    def retained(self, doc_id: UUID, version: Any) -> bytes | None:
        """The bytes of ``doc_id`` at ``version`` the cache let go of, if a base keeps them
        or they were served lately."""
        found = self._retained.get((doc_id, version))
        return found if found is not None else self._served.get((doc_id, version))

    def served(self, doc_id: UUID, version: Any, data: bytes) -> None:
        """The mount served (or wrote) ``doc_id`` at ``version``: kept among its last
        ``SERVED_KEPT`` contents (every cache put: no scan of the other documents')."""
        key = (doc_id, version)
        if key in self._served or version is None or len(data) > self._max_bytes // 8:
            return
        mine = self._served_of.setdefault(doc_id, [])
        while len(mine) >= SERVED_KEPT:
            self._unserve((doc_id, mine[0]))
        self._served[key] = data
        mine.append(version)
        self._served_bytes += len(data)
        while self._served and self._bytes + self._served_bytes > self._max_bytes:
            self._unserve(next(iter(self._served)))

    def _unserve(self, key: tuple[UUID, Any]) -> None:
        self._served_bytes -= len(self._served.pop(key))
        mine = self._served_of[key[0]]
        mine.remove(key[1])
        if not mine:
            del self._served_of[key[0]]

    def served_versions(self, doc_id: UUID) -> list[Base]:
        """The contents of ``doc_id`` served lately, as bases by version, newest first."""
        return [Base(doc_id, v, None) for v in reversed(self._served_of.get(doc_id, []))]

    def tracks(self, doc_id: UUID) -> bool:
        """Whether some process's base is a version of ``doc_id``."""
        return doc_id in self._by_doc

    def superseded(self, doc_id: UUID, version: Any, data: bytes | None) -> None:
        """Row ``doc_id`` leaves ``version`` (``data``: its bytes, None if not at hand):
        the bases at that version keep the bytes, or their hash, or are forgotten.

        Each base is changed where it stands (a dead process's base does not become the
        newest), and only then do the oldest go past the byte budget: the live writer's
        base, the newest, keeps its bytes."""
        if data is None:
            data = self._retained.get((doc_id, version))
        for key in list(self._by_doc.get(doc_id, ())):
            base = self._bases.get(key)
            if base is None or base.data is not None or base.version != version:
                continue
            if data is None and base.digest is None:
                self._drop(key)
            elif data is not None:
                self._bases[key] = base._replace(data=data)  # keeps its place in the order
                self._bytes += len(data)
        while self._bytes > self._max_bytes and self._bases:
            self._drop(next(iter(self._bases)))

    def candidates(self, path: str, doc_id: UUID) -> list[Base]:
        """Every process's base of ``doc_id`` at ``path``, newest first (an unknown base
        is inferred from them: ``Contents.inferred_base``)."""
        keys = self._by_doc.get(doc_id, set())
        return [self._bases[k] for k in reversed(self._bases) if k in keys and k[0] == path]

    def base(self, path: str, pid: int) -> Base | None:
        """What thread ``pid`` read or wrote of ``path`` last; if nothing, its process."""
        if pid <= 0:
            return None
        found = self._bases.get((path, pid))
        if found is None:
            found = self._bases.get((path, -self._process_of(pid)))
        return found


class EditorSaves:
    """Renamed-away originals by the path they left, and tentative files' deadlines."""

    def __init__(self, monotonic: Callable[[], float], shown: Callable[[UUID], bool]) -> None:
        self.monotonic = monotonic
        #: Whether the tree shows a document bound to the row (a live document again).
        self.shown = shown
        #: The waiting rows' nodes, by the path the row is at.
        self._originals: dict[str, FileNode] = {}
        #: Tentative inodes and when each falls due (None: open, not due).
        self._tentative: dict[int, float | None] = {}

    # -- renamed-away originals ------------------------------------------------------------

    def detach(self, path: str, node: FileNode) -> None:
        """``node`` left the document name ``path`` for a scratch name; its row waits."""
        assert node.doc_id is not None
        node.origin_doc_id = node.doc_id
        self._originals[path] = node

    def waits_as_left(self, doc_id: UUID, path: str, version: datetime | None) -> bool:
        """Whether the row ``doc_id`` waits at ``path`` as this mount left it (the version it
        showed): a read of the workspace meanwhile still finds it there, and showing it
        again would undo this mount's own rename (a document moved into ``.trash`` came
        back beside it until the next poll: CI, Obsidian's vault on ``ironclaw.db``)."""
        node = self._originals.get(path)
        return node is not None and node.origin_doc_id == doc_id and node.updated_at == version

    def _waiting(self, path: str) -> FileNode | None:
        """The node whose row waits at ``path``; a row shown again is released."""
        node = self._originals.get(path)
        if node is None or node.origin_doc_id is None:
            return None
        if self.shown(node.origin_doc_id):
            self.release(node)
            return None
        return node

    def claim(self, path: str) -> tuple[UUID, datetime | None] | None:
        """A new document at ``path`` (created, or a temporary renamed there) takes over
        the row waiting there: its id and the version the save is based on."""
        node = self._waiting(path)
        if node is None or node.origin_doc_id is None:
            return None
        del self._originals[path]
        claimed = (node.origin_doc_id, node.updated_at)
        node.origin_doc_id = None
        return claimed

    def replaced_by(self, path: str, doc_id: UUID | None) -> tuple[UUID, datetime | None] | None:
        """Another document (``doc_id``) moved to ``path``: the row waiting there, other
        than its own, is the one the move replaces (its id and the version shown)."""
        node = self._waiting(path)
        if node is None or node.origin_doc_id is None or node.origin_doc_id == doc_id:
            return None
        replaced = (node.origin_doc_id, node.updated_at)
        self.release(node)
        return replaced

    def release(self, node: FileNode) -> None:
        """``node`` no longer stands for a waiting row (restored, deleted, taken over)."""
        for path, waiting in list(self._originals.items()):
            if waiting is node:
                del self._originals[path]
        node.origin_doc_id = None

    def folder_moved(self, old: str, new: str) -> None:
        """This mount moved the folder ``old`` to ``new``: the rows waiting below it moved
        with it (the scratch backups did too)."""
        below = old + "/"
        for path in [p for p in self._originals if p.startswith(below)]:
            self._originals[new + path[len(old) :]] = self._originals.pop(path)

    def row_deleted(self, doc_id: UUID) -> None:
        """Another writer deleted a row: nothing waits for it any more."""
        for node in list(self._originals.values()):
            if node.origin_doc_id == doc_id:
                self.release(node)

    # -- tentative names -------------------------------------------------------------------

    def track(self, ino: int, *, idle: bool) -> None:
        """A tentative file, created or renamed to a tentative name (due after the grace
        period if nothing holds it open)."""
        self._tentative[ino] = self.monotonic() + TENTATIVE_GRACE if idle else None

    def untrack(self, ino: int) -> None:
        """No longer tentative (became a document, renamed away, or freed)."""
        self._tentative.pop(ino, None)

    def opened(self, ino: int) -> None:
        if ino in self._tentative:
            self._tentative[ino] = None  # never promoted while open

    def closed(self, ino: int) -> None:
        """Its last descriptor closed: due after the grace period."""
        if ino in self._tentative:
            self._tentative[ino] = self.monotonic() + TENTATIVE_GRACE

    def postpone(self, ino: int, moment: float) -> None:
        """Its promotion failed: tried again a grace period after ``moment``."""
        self._tentative[ino] = moment + TENTATIVE_GRACE

    def due(self, moment: float) -> list[int]:
        """Tentative inodes closed and not renamed since before ``moment`` minus the
        grace period, taken off the table (the caller promotes or postpones them)."""
        ready = [ino for ino, at in self._tentative.items() if at is not None and at <= moment]
        for ino in ready:
            del self._tentative[ino]
        return ready

    def tentative(self) -> list[int]:
        """Every tentative inode (unmount promotes them all)."""
        return list(self._tentative)
