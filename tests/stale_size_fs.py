"""A one-file pyfuse3 filesystem whose size and bytes disagree, to show the kernel's part.

    python -m tests.stale_size_fs MOUNTPOINT

``f`` holds ``SERVED`` bytes while every attribute answer says ``REPORTED`` (more), as a
filesystem would whose cached size outlived the content it serves; attributes are never
cached and every open keeps the page cache.  ``tests/mount/test_readers.py`` reads it to
show what memfs must never let happen: the short read is zero-filled in the page cache,
and once the larger size is believed again the NUL bytes are read back as content.
"""

from __future__ import annotations

import errno
import os
import stat
import sys

import pyfuse3
import trio

FILE_INO = pyfuse3.ROOT_INODE + 1
SERVED = b"served bytes\n" * 4
REPORTED = len(SERVED) + 100


class StaleSizeFS(pyfuse3.Operations):
    def _attr(self, ino: int) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = ino  # type: ignore[assignment]
        entry.entry_timeout = entry.attr_timeout = 0
        if ino == pyfuse3.ROOT_INODE:
            entry.st_mode = stat.S_IFDIR | 0o755  # type: ignore[assignment]
            entry.st_nlink = 2
        else:
            entry.st_mode = stat.S_IFREG | 0o644  # type: ignore[assignment]
            entry.st_nlink = 1
            entry.st_size = REPORTED
        entry.st_uid, entry.st_gid = os.getuid(), os.getgid()
        entry.st_blksize = 4096
        return entry

    async def getattr(self, inode: int, ctx: object = None) -> pyfuse3.EntryAttributes:
        return self._attr(inode)

    async def lookup(self, parent: int, name: bytes, ctx: object = None) -> pyfuse3.EntryAttributes:
        if parent != pyfuse3.ROOT_INODE or name != b"f":
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._attr(FILE_INO)

    async def open(self, inode: int, flags: int, ctx: object) -> pyfuse3.FileInfo:
        return pyfuse3.FileInfo(fh=inode, keep_cache=True)  # type: ignore[arg-type]

    async def read(self, fh: int, off: int, size: int) -> bytes:
        # Attributes told while the read is on its way (another writer's change does
        # that): the kernel then keeps the size it had for the page it fills.
        pyfuse3.invalidate_inode(FILE_INO, attr_only=True)
        return SERVED[off : off + size]

    async def flush(self, fh: int) -> None:
        return None

    async def release(self, fh: int) -> None:
        return None


def main() -> None:
    pyfuse3.init(StaleSizeFS(), sys.argv[1], {"fsname=stalesize", "ro"})
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=True)


if __name__ == "__main__":
    main()
