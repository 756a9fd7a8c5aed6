"""What a buffer's writer started from: the base its save is merged on (rule 1 of
``memfs.vfs.merging``), taken at open from what its process read last."""

from __future__ import annotations

from typing import Any
from uuid import UUID

from memfs.cache import ContentCache
from memfs.ironclaw.hashing import bytes_hash
from memfs.merge import MERGE_LIMIT
from memfs.tree import FileNode
from memfs.vfs.base import log
from memfs.vfs.buffers import FileBuffer
from memfs.vfs.merging import Merges
from memfs.vfs.save_tables import Base, SaverBases
from memfs.vfs.state import Buffer, MountState


class WriterBases:
    """A buffer's base, from the saver bases of the process that opens it."""

    def __init__(
        self, state: MountState, cache: ContentCache, bases: SaverBases, merges: Merges
    ) -> None:
        self.state = state
        self.cache = cache
        #: What each process read or wrote of each document.
        self.bases = bases
        #: The bytes of a base known by version or hash.
        self.merges = merges

    def note(
        self, node: FileNode, buffer: Buffer, pid: int, *, writable: bool, truncate: bool
    ) -> None:
        """What process ``pid`` starts from: its first read since it last wrote the document
        (``SaverBases.read``).  A write is based on that, not on what the open loaded: vim
        rewrites a file it read minutes ago (``ftruncate`` and the whole buffer, or
        ``O_TRUNC``) after reading it once more for its backup.  Not called for an
        ``O_APPEND`` open: its writes go at the end of what it loaded, its base (another
        thread of the process may have read the file long ago: that is not this write's)."""
        if not isinstance(buffer, FileBuffer) or type(node) is not FileNode or node.scratch:
            return
        if node.doc_id is None or node.parent is None:
            return
        path = self.state.tree.path_of(node)
        if writable:
            buffer.writer = pid or buffer.writer
            if buffer.base is None or not buffer.dirty:
                self.adopt(buffer, node.doc_id, path, pid, rewrites=truncate)
        if truncate:
            return
        if buffer.dirty or buffer.unshown_merge is not None:
            # What it reads is no row: another descriptor's writes not committed yet, or
            # a writer's own bytes a merge it has not seen replaced in the database.
            # Based on the row instead, its save would undo the lines the bytes lack.
            bounded = len(buffer) <= MERGE_LIMIT  # a larger base is not kept: unknown
            self.bases.read(path, pid, node.doc_id, None,
                            data=lambda: buffer.snapshot() if bounded else None)  # fmt: skip
            return
        version = buffer.base_version or node.updated_at
        self.bases.read(path, pid, node.doc_id, version,
                        lambda: self._digest_of(node.doc_id, version, buffer))  # fmt: skip

    def _digest_of(self, doc_id: UUID | None, version: Any, buffer: FileBuffer) -> str | None:
        """IronClaw's hash of the document at ``version``, if its bytes are at hand."""
        data = buffer.base if buffer.base_version == version else None
        if data is None and doc_id is not None:
            data = self.cache.get(doc_id, version)
            data = data if data is not None else self.bases.retained(doc_id, version)
        return bytes_hash(data) if data is not None else None

    def adopt(
        self, buffer: FileBuffer, doc_id: UUID | None, path: str, pid: int, *,
        rewrites: bool = True,
    ) -> None:  # fmt: skip
        """A buffer written from empty takes the base of the process writing it (``doc_id``
        None: a new file).  A process that found no file there and read nothing since is
        based on an empty file if it ``rewrites`` the document (an open that keeps the
        content is based on the content it loaded)."""
        found = self.bases.base(path, pid)
        if found is None:
            return
        if found.doc_id is None:
            if doc_id is not None and not rewrites:
                return
            log.debug("%r written by process %d, which found no file there", path, pid)
            buffer.base, buffer.base_version, buffer.base_digest = b"", None, None
            buffer.absent_path = path
            return
        if doc_id is None:
            return
        if found.doc_id != doc_id:
            self._adopt_removed_base(buffer, found, path, pid)
            return
        if found.data is None and buffer.base is not None and found.version == buffer.base_version:
            return  # the buffer holds that very version
        log.debug("%r written by process %d, based on what it read at %s", path, pid,
                  found.version)  # fmt: skip
        data = self.merges.bytes_of(found)
        buffer.base_digest = None
        if data is None and found.digest is not None:  # fetched by its hash if a merge needs it
            buffer.base, buffer.base_version = None, found.version
            buffer.base_digest = found.digest
            return
        if data is None:
            log.info("%r: what process %d read last is no longer cached; a change by another "
                     "writer meanwhile is kept as a version, not merged", path, pid)  # fmt: skip
            return
        buffer.base = data if len(data) <= MERGE_LIMIT else None
        buffer.base_version = found.version if found.data is None else None

    def _adopt_removed_base(self, buffer: FileBuffer, found: Base, path: str, pid: int) -> None:
        """Process ``pid`` read another document at ``path``, removed or moved away since and
        this one made there (an append saved anew after another writer's removal): its save
        is based on the bytes it read, which no row of this document holds (a merge then
        always reads the row), or on today's rule if they are no longer at hand."""
        data = self.merges.bytes_of(found)
        if data is None or len(data) > MERGE_LIMIT:
            return
        log.debug("%r written by process %d, based on what it read of the document there "
                  "before this one", path, pid)  # fmt: skip
        buffer.base, buffer.base_version, buffer.base_digest = data, None, None
