"""The content of an open document: one buffer per inode, shared by all its handles.

Writes are validated as they arrive so binary data is refused at the ``write`` that brings
it (EILSEQ) and never corrupts the buffer; only a multi-byte character cut off at the very
end of the buffer is allowed to wait for the next write (``cp`` writes in 128 KiB blocks
that can split a character).  ``commit_text`` does the final strict check.
"""

from __future__ import annotations

import codecs
import errno
import os
import tempfile
from pathlib import Path
from typing import Any

import trio

from memfs.errors import FsError
from memfs.merge import MERGE_LIMIT

_MAX_CHAR = 4


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


class FileBuffer:
    """Bytes of one document while open, plus whether they differ from the database."""

    def __init__(
        self,
        data: bytes,
        *,
        dirty: bool = False,
        truncated: bool = False,
        base: bytes | None = None,
        base_version: Any = None,
    ) -> None:
        self._data: bytes | bytearray = data
        self.dirty = dirty
        #: What the writers of this buffer started from (the content it was loaded with,
        #: then each commit's), and the row version holding exactly it (None: none does,
        #: e.g. after a merge): the base of a three-way merge (``memfs.merge``).
        self.base = base
        self.base_version = base_version
        #: IronClaw's hash of the base when its bytes were no longer at hand as a writer
        #: adopted it (``base`` None): the merge fetches them from the version rows.
        self.base_digest: str | None = None
        #: A new file only ever written through ``O_APPEND`` descriptors: if another writer
        #: made the document meanwhile, its lines go after theirs, as on one disk.
        self.appends_only = False
        #: The path its writer found no document at (``SaverBases.absent``): based on an
        #: empty file there, a save that meets a row made meanwhile goes after its lines.
        self.absent_path: str | None = None
        #: Another writer changed the row while this buffer was open for writing.
        self.others_changed = False
        #: A conditional save's version (WebDAV's ``If-Match``, MCP's
        #: ``expected_content_hash``): the commit writes only over the row at this
        #: version, and refuses (ESTALE, nothing written) where another writer's change
        #: came first, never merging with it (``Commits``).  None: an ordinary save.
        self.only_at: object | None = None
        #: The version of a merged row its writers do not see yet: committed while a
        #: descriptor still wrote, so the buffer kept their bytes (``_show_merged``); the
        #: last writer's close shows the row.
        self.unshown_merge: object | None = None
        #: The process that last opened it for writing (0: unknown), whose base the next
        #: commit becomes (``SaverBases``).
        self.writer = 0
        #: The only change not yet committed is a truncation (``open(O_TRUNC)``, ftruncate):
        #: a shell's ``>`` closes that descriptor before it writes, and a flush then must not
        #: make the emptying an IronClaw write of its own (``Contents.flush``).
        self.truncated_only = dirty and truncated
        #: Bumped by every change; a commit clears ``dirty`` only if nothing changed meanwhile.
        self.generation = 0
        #: Serialises commits of this document.
        self.lock = trio.Lock()

    @classmethod
    def of_row(cls, data: bytes, version: Any) -> FileBuffer:
        """A clean buffer holding the row at ``version``: its writers' base, so a save
        over another writer's change merges (none over ``MERGE_LIMIT``)."""
        return cls(data, base=data if len(data) <= MERGE_LIMIT else None, base_version=version)

    def __len__(self) -> int:
        return len(self._data)

    def read(self, offset: int, size: int) -> bytes:
        return bytes(self._data[offset : offset + size])

    def snapshot(self) -> bytes:
        return bytes(self._data)

    def _mutable(self) -> bytearray:
        if not isinstance(self._data, bytearray):
            self._data = bytearray(self._data)
        return self._data

    def _touch(self) -> None:
        self.dirty = True
        self.generation += 1

    def check_write(self, offset: int, data: bytes) -> None:
        """Refuse a write that would leave NUL bytes or invalid UTF-8 in the buffer."""
        if b"\x00" in data:
            raise FsError(errno.EILSEQ, f"NUL byte at offset {offset + data.index(0)}")
        size = len(self._data)
        if offset > size:
            raise FsError(
                errno.EILSEQ,
                f"write at offset {offset} past the end ({size} bytes) would leave NUL bytes",
            )
        # Start the check at the first byte of the character that contains ``offset``.
        start = offset
        while start > 0 and offset - start < _MAX_CHAR and _is_continuation(self._data[start - 1]):
            start -= 1
        if start > 0 and offset - start < _MAX_CHAR and self._data[start - 1] >= 0xC0:
            start -= 1  # the lead byte of a character this write continues
        end = offset + len(data)
        tail_end = end
        while (
            tail_end < size
            and tail_end - end < _MAX_CHAR
            and _is_continuation(self._data[tail_end])
        ):
            tail_end += 1
        window = bytes(self._data[start:offset]) + data + bytes(self._data[end:tail_end])
        at_end = tail_end >= size
        decoder = codecs.getincrementaldecoder("utf-8")("strict")
        try:
            decoder.decode(window, final=not at_end)
        except UnicodeDecodeError as exc:
            raise FsError(
                errno.EILSEQ, f"invalid UTF-8 at offset {start + exc.start}: {exc.reason}"
            ) from None

    def write(self, offset: int, data: bytes) -> int:
        self.check_write(offset, data)
        buf = self._mutable()
        buf[offset : offset + len(data)] = data
        self._touch()
        self.truncated_only = False
        return len(data)

    def truncate(self, size: int) -> None:
        current = len(self._data)
        if size > current:
            raise FsError(
                errno.EILSEQ,
                f"extending a document to {size} bytes would fill it with NUL bytes",
            )
        if size < current:
            self.truncated_only = self.truncated_only or not self.dirty
            del self._mutable()[size:]
            self._touch()

    def replace(self, data: bytes) -> None:
        """Drop the content (O_TRUNC without reading) or reload it from the database."""
        self._data = data
        self._touch()
        self.truncated_only = False

    def mark_clean(self, generation: int) -> bool:
        """Clear ``dirty`` if no change arrived since ``generation`` was committed."""
        if self.generation == generation:
            self.dirty = self.truncated_only = False
        return not self.dirty

    def commit_text(self) -> tuple[str, int]:
        """(text, generation) to commit; EILSEQ if the whole buffer is not valid text.

        Decoded straight from the buffer: no intermediate copy of a large document."""
        data = self._data
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise FsError(
                errno.EILSEQ, f"invalid UTF-8 at byte {exc.start}: {exc.reason}"
            ) from None
        if "\x00" in text:
            raise FsError(errno.EILSEQ, f"NUL byte at offset {data.index(0)}")
        return text, self.generation


class ScratchSpill:
    """Where scratch files overflow to once they outgrow memory.

    Scratch content is held in memory while a file is under ``file_cap`` bytes and the mount
    holds under ``memory_cap`` bytes of scratch in memory; past either, the file moves to an
    unlinked temporary file in ``directory`` (the runtime directory, usually a tmpfs).
    """

    def __init__(
        self, directory: Path, *, memory_cap: int = 64 << 20, file_cap: int = 4 << 20
    ) -> None:
        self.directory = directory
        self.memory_cap = memory_cap
        self.file_cap = file_cap
        self.in_memory = 0

    def open_file(self) -> int:
        self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, name = tempfile.mkstemp(prefix="scratch-", dir=self.directory)
        os.unlink(name)  # gone from the directory; freed when the fd closes
        return fd


class ScratchBuffer:
    """Content of a scratch file: any bytes, never committed, gone at unmount."""

    def __init__(self, spill: ScratchSpill, data: bytes = b"") -> None:
        self.spill = spill
        self._data = bytearray(data)
        self._fd: int | None = None
        self._size = len(data)
        spill.in_memory += len(data)
        self.dirty = False  # nothing to commit, ever
        self.generation = 0
        self.lock = trio.Lock()
        self._maybe_spill()

    def __len__(self) -> int:
        return self._size

    @property
    def spilled(self) -> bool:
        return self._fd is not None

    def _maybe_spill(self) -> None:
        if self._fd is not None:
            return
        if self._size > self.spill.file_cap or self.spill.in_memory > self.spill.memory_cap:
            fd = self.spill.open_file()
            os.pwrite(fd, self._data, 0)
            self.spill.in_memory -= len(self._data)
            self._data = bytearray()
            self._fd = fd

    def read(self, offset: int, size: int) -> bytes:
        if self._fd is not None:
            return os.pread(self._fd, max(0, min(size, self._size - offset)), offset)
        return bytes(self._data[offset : offset + size])

    def snapshot(self) -> bytes:
        return self.read(0, self._size)

    def write(self, offset: int, data: bytes) -> int:
        end = offset + len(data)
        if self._fd is not None:
            os.pwrite(self._fd, data, offset)
        else:
            if offset > len(self._data):
                self._data.extend(b"\x00" * (offset - len(self._data)))
            before = len(self._data)
            self._data[offset:end] = data
            self.spill.in_memory += len(self._data) - before
        self._size = max(self._size, end)
        self.generation += 1
        self._maybe_spill()
        return len(data)

    def truncate(self, size: int) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, size)
        else:
            before = len(self._data)
            if size < before:
                del self._data[size:]
            else:
                self._data.extend(b"\x00" * (size - before))
            self.spill.in_memory += len(self._data) - before
        self._size = size
        self.generation += 1
        self._maybe_spill()

    def release(self) -> None:
        """Free memory or the spill file (the node is gone)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.spill.in_memory -= len(self._data)
        self._data = bytearray()
        self._size = 0
