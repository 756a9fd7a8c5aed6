"""The floor of any pyfuse3 filesystem: a read-only mount of a directory held in memory.

    python benchmarks/fuse_floor.py SOURCE MOUNTPOINT [--open-flags]

Loads SOURCE (files and directories) into dictionaries at start and serves it under
``MOUNTPOINT/mem`` with everything a kernel can cache cached: 60 s entry and attribute
timeouts, ``keep_cache`` on every open, no database, no locks, no bookkeeping; flush and
release are answered (doing nothing), as a filesystem that reports save errors at close
must.  Whatever a read workload costs on it is the cost of FUSE round trips through pyfuse3
and trio on this machine, which no writable pyfuse3 filesystem goes below.  ``bench_peers``
runs its read workloads on it next to memfs.  With ``--open-flags`` (the project's pyfuse3,
``patches/pyfuse3``) a read-only open asks for no flush and a directory's listing is kept
by the kernel, as memfs does: ``bench_floor`` measures both.  The requests answered are
counted by operation and written to standard error at the end.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import sys
from collections import Counter
from pathlib import Path

import pyfuse3
import trio

TIMEOUT = 60.0


class FloorFS(pyfuse3.Operations):
    def __init__(self, source: Path, open_flags: bool = False) -> None:
        super().__init__()
        self.open_flags = open_flags
        self.requests: Counter[str] = Counter()
        self.children: dict[int, dict[bytes, int]] = {pyfuse3.ROOT_INODE: {}}
        self.data: dict[int, bytes] = {}
        self.next_ino = pyfuse3.ROOT_INODE + 1
        top = self._mkdir(pyfuse3.ROOT_INODE, b"mem")
        self._load(source, top)

    def _mkdir(self, parent: int, name: bytes) -> int:
        ino = self.next_ino
        self.next_ino += 1
        self.children[ino] = {}
        self.children[parent][name] = ino
        return ino

    def _load(self, path: Path, ino: int) -> None:
        for entry in sorted(path.iterdir()):
            name = os.fsencode(entry.name)
            if entry.is_dir():
                self._load(entry, self._mkdir(ino, name))
            else:
                child = self.next_ino
                self.next_ino += 1
                self.data[child] = entry.read_bytes()
                self.children[ino][name] = child

    def _attr(self, ino: int) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = ino  # type: ignore[assignment]
        entry.entry_timeout = entry.attr_timeout = TIMEOUT
        if ino in self.children:
            entry.st_mode = stat.S_IFDIR | 0o755  # type: ignore[assignment]
            entry.st_nlink = 2
        else:
            entry.st_mode = stat.S_IFREG | 0o644  # type: ignore[assignment]
            entry.st_nlink = 1
            entry.st_size = len(self.data[ino])
        entry.st_uid, entry.st_gid = os.getuid(), os.getgid()
        entry.st_mtime_ns = entry.st_ctime_ns = entry.st_atime_ns = 1_700_000_000_000_000_000
        entry.st_blksize = 4096
        entry.st_blocks = (entry.st_size + 511) // 512
        return entry

    async def getattr(self, inode: int, ctx: object = None) -> pyfuse3.EntryAttributes:
        self.requests["getattr"] += 1
        return self._attr(inode)

    async def lookup(self, parent: int, name: bytes, ctx: object = None) -> pyfuse3.EntryAttributes:
        self.requests["lookup"] += 1
        ino = self.children.get(parent, {}).get(name)
        if ino is None:
            raise pyfuse3.FUSEError(errno.ENOENT)
        return self._attr(ino)

    async def opendir(self, inode: int, ctx: object) -> int | pyfuse3.FileInfo:
        self.requests["opendir"] += 1
        if self.open_flags:
            return pyfuse3.FileInfo(fh=inode, keep_cache=True, cache_readdir=True)  # type: ignore[arg-type]
        return inode

    async def readdir(self, fh: int, start_id: int, token: object) -> None:
        self.requests["readdir"] += 1
        entries = list(self.children[fh].items())
        for index in range(start_id, len(entries)):
            name, ino = entries[index]
            if not pyfuse3.readdir_reply(token, name, self._attr(ino), index + 1):  # type: ignore[arg-type]
                return

    async def open(self, inode: int, flags: int, ctx: object) -> pyfuse3.FileInfo:
        if flags & os.O_ACCMODE != os.O_RDONLY:
            raise pyfuse3.FUSEError(errno.EROFS)
        self.requests["open"] += 1
        info = pyfuse3.FileInfo(fh=inode, keep_cache=True)  # type: ignore[arg-type]
        if self.open_flags:
            info.noflush = True
        return info

    async def read(self, fh: int, off: int, size: int) -> bytes:
        self.requests["read"] += 1
        return self.data[fh][off : off + size]

    # A filesystem that can fail a save must answer flush, so that close() can report it;
    # left to pyfuse3's default (ENOSYS) the kernel would stop sending flush altogether.
    async def flush(self, fh: int) -> None:
        self.requests["flush"] += 1

    async def release(self, fh: int) -> None:
        self.requests["release"] += 1

    async def releasedir(self, fh: int) -> None:
        self.requests["releasedir"] += 1


def main() -> None:
    source, mountpoint = Path(sys.argv[1]), sys.argv[2]
    floor = FloorFS(source, open_flags="--open-flags" in sys.argv[3:])
    pyfuse3.init(floor, mountpoint, ["fsname=fusefloor", "ro"])
    try:
        trio.run(pyfuse3.main)
    finally:
        pyfuse3.close(unmount=True)
        print(json.dumps(dict(floor.requests)), file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
