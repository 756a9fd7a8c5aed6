"""pyfuse3 adapter: translate kernel requests to ``Filesystem`` calls and errors to errno.

Nothing here decides filesystem semantics; see ``memfs.vfs``.  Every handler goes through
``_guard``: an ``FsError`` becomes its errno, any other exception is logged with its
traceback and becomes EIO, so a bug fails one request instead of ending the mount.

xattr policy: memfs stores no extended attributes.  ``getxattr`` and friends answer ENOSYS
once; the kernel then stops asking (no ``security.capability`` round trip before every
write) and tells callers EOPNOTSUPP, which vim, emacs, rsync and cp all accept.

Open flags beyond pyfuse3's four: with the project's pyfuse3 (``patches/pyfuse3``, built by
``scripts/setup``), a reader's open asks for no ``flush`` at close (``noflush``) and a
folder's open lets the kernel keep its listing (``cache_readdir`` with ``keep_cache``); the
model says which (``flushes``, ``listing_cached``, ``listing_kept``).  With another pyfuse3
neither is set.
"""

from __future__ import annotations

import errno
import functools
import logging
import urllib.parse
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, ParamSpec, TypeVar

import pyfuse3

from memfs.errors import FsError
from memfs.paths import decode_name
from memfs.stats import MountStats
from memfs.vfs import Attributes, Filesystem

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")


#: Whether this pyfuse3 takes ``noflush`` and ``cache_readdir`` (the project's patch).
OPEN_FLAGS = hasattr(pyfuse3.FileInfo(), "noflush")

#: Requests whose first two arguments are a directory inode and a name in it.
_BY_ENTRY = frozenset({"lookup", "mkdir", "rmdir", "create", "unlink", "symlink", "mknod"})
#: Requests whose first argument is an open file's handle.
_BY_HANDLE = frozenset({"read", "write", "flush", "fsync", "release"})


def _name(raw: object) -> str:
    return raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else str(raw)


def _subject(fs: Filesystem, op: str, args: tuple[Any, ...]) -> str:
    """The file a failed request was about, for its log line."""
    lookups = fs.lookups
    if op in _BY_ENTRY:
        return lookups.describe_entry(args[0], _name(args[1]))
    if op == "rename":
        old = lookups.describe_entry(args[0], _name(args[1]))
        return f"{old} -> {lookups.describe_entry(args[2], _name(args[3]))}"
    if op == "link":
        target = lookups.describe_entry(args[1], _name(args[2]))
        return f"{lookups.describe_inode(args[0])} -> {target}"
    if op in _BY_HANDLE:
        return lookups.describe_handle(args[0])
    if args and isinstance(args[0], int) and op not in ("readdir", "releasedir", "fsyncdir"):
        return lookups.describe_inode(args[0])
    return "the mount"


def _guard(  # noqa: C901 - one errno per exception family, each a line
    handler: Callable[P, Coroutine[Any, Any, R]],
) -> Callable[P, Coroutine[Any, Any, R]]:
    name = handler.__name__

    @functools.wraps(handler)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        stats = args[0].stats  # type: ignore[attr-defined]
        if stats is not None:
            stats.request(name)
        try:
            return await handler(*args, **kwargs)
        except FsError as exc:
            if stats is not None:
                stats.error(name, exc.errno)
            if exc.errno in (errno.ENOENT, errno.EEXIST):
                level = logging.DEBUG
            else:
                level = logging.ERROR if exc.errno == errno.EIO else logging.INFO
            if log.isEnabledFor(level):
                ops: MemfsOperations = args[0]  # type: ignore[assignment]
                log.log(level, "%s %s: %s", name, _subject(ops.fs, name, tuple(args[1:])), exc)
            raise pyfuse3.FUSEError(exc.errno) from None
        except pyfuse3.FUSEError as exc:
            if stats is not None:
                stats.error(name, exc.errno)
            raise
        except Exception:
            ops = args[0]  # type: ignore[assignment]
            if stats is not None:
                stats.error(name, errno.EIO)
            log.exception(
                "unexpected error in %s %s; answering EIO",
                name,
                _subject(ops.fs, name, tuple(args[1:])),
            )
            raise pyfuse3.FUSEError(errno.EIO) from None

    return wrapper


class MemfsOperations(pyfuse3.Operations):
    """The FUSE face of a ``Filesystem``."""

    supports_dot_lookup = True
    enable_writeback_cache = False
    enable_acl = False

    def __init__(
        self, fs: Filesystem, attr_timeout: float = 1.0, stats: MountStats | None = None
    ) -> None:
        super().__init__()
        self.fs = fs
        self.attr_timeout = attr_timeout
        #: Requests and errors by operation (``memfs stats``).
        self.stats = stats

    def _entry(self, attrs: Attributes) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = attrs.ino  # type: ignore[assignment]
        entry.generation = 0
        entry.entry_timeout = self.attr_timeout
        entry.attr_timeout = self.attr_timeout
        entry.st_mode = attrs.mode  # type: ignore[assignment]
        entry.st_nlink = attrs.nlink
        entry.st_uid = attrs.uid
        entry.st_gid = attrs.gid
        entry.st_rdev = 0
        entry.st_size = attrs.size
        entry.st_blksize = 4096
        entry.st_blocks = (attrs.size + 511) // 512
        entry.st_atime_ns = attrs.atime_ns
        entry.st_mtime_ns = attrs.mtime_ns
        entry.st_ctime_ns = attrs.ctime_ns
        entry.st_birthtime_ns = attrs.birth_ns
        return entry

    # -- names and attributes ------------------------------------------------------------

    @_guard
    async def lookup(
        self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        try:
            # FUSE passes up to 1,024 bytes; longer-than-255 names exist only as search
            # queries under .search, so only decode here (creating enforces NAME_MAX).
            text = name.decode("utf-8")
        except UnicodeDecodeError:
            raise FsError(errno.ENOENT) from None
        node = await self.fs.lookup(parent_inode, text, ctx.pid)
        entry = self._entry(self.fs.attributes(node))
        if self.fs.volatile_name(node):
            entry.entry_timeout = entry.attr_timeout = 0
        return entry

    async def forget(self, inode_list: Sequence[tuple[int, int]]) -> None:
        try:
            self.fs.forget(list(inode_list))
        except Exception:  # forget must never raise (pyfuse3 contract)
            log.exception("forget failed")

    @_guard
    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        return self._entry(self.fs.getattr(inode))

    @_guard
    async def setattr(
        self,
        inode: int,
        attr: pyfuse3.EntryAttributes,
        fields: pyfuse3.SetattrFields,
        fh: int | None,
        ctx: pyfuse3.RequestContext,
    ) -> pyfuse3.EntryAttributes:
        attrs = await self.fs.setattr(
            inode,
            size=attr.st_size if fields.update_size else None,
            mode=attr.st_mode if fields.update_mode else None,
            uid=attr.st_uid if fields.update_uid else None,
            gid=attr.st_gid if fields.update_gid else None,
            mtime_ns=attr.st_mtime_ns if fields.update_mtime else None,
            fh=fh,
        )
        return self._entry(attrs)

    @_guard
    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        info = self.fs.statfs()
        data = pyfuse3.StatvfsData()
        data.f_bsize = data.f_frsize = info.block_size
        data.f_blocks = info.blocks
        data.f_bfree = data.f_bavail = info.blocks_free
        data.f_files = info.files
        data.f_ffree = data.f_favail = info.files_free
        data.f_namemax = info.name_max
        return data

    # -- directories ---------------------------------------------------------------------

    @_guard
    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int | pyfuse3.FileInfo:
        await self.fs.prepare_listing(inode)
        fh = self.fs.opendir(inode, kernel_caches=OPEN_FLAGS)
        if not self.fs.listing_cached(fh):
            return fh
        kept = self.fs.listing_kept(fh)  # without keep_cache the open drops a stale listing
        return pyfuse3.FileInfo(fh=fh, keep_cache=kept, cache_readdir=True)  # type: ignore[arg-type]

    @_guard
    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        for next_id, name, node in self.fs.readdir(fh, start_id):
            entry = self._entry(self.fs.attributes(node))
            if self.fs.volatile_name(node):  # READDIRPLUS entries are cached like lookups
                entry.entry_timeout = entry.attr_timeout = 0
            if not pyfuse3.readdir_reply(token, name.encode("utf-8"), entry, next_id):
                break
            if name not in (".", ".."):  # READDIRPLUS counts no lookup for these two
                self.fs.remember(node)

    @_guard
    async def releasedir(self, fh: int) -> None:
        self.fs.releasedir(fh)

    @_guard
    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        """A barrier for namespace changes left for the next transaction (removals, mkdir,
        directory renames): they are sent before it returns."""
        await self.fs.flush_changes()

    @_guard
    async def mkdir(
        self, parent_inode: int, name: bytes, mode: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        node = await self.fs.mkdir(parent_inode, decode_name(name), mode)
        return self._entry(self.fs.attributes(node))

    @_guard
    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        await self.fs.rmdir(parent_inode, decode_name(name))

    # -- files ---------------------------------------------------------------------------

    @_guard
    async def create(
        self,
        parent_inode: int,
        name: bytes,
        mode: int,
        flags: int,
        ctx: pyfuse3.RequestContext,
    ) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        fh, node = await self.fs.create(parent_inode, decode_name(name), mode, flags, ctx.pid)
        return pyfuse3.FileInfo(fh=fh), self._entry(self.fs.attributes(node))  # type: ignore[arg-type]

    @_guard
    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        fh, keep_cache = await self.fs.open(inode, flags, ctx.pid)
        info = pyfuse3.FileInfo(  # type: ignore[arg-type]
            fh=fh, keep_cache=keep_cache, direct_io=self.fs.direct_io(fh)
        )
        if OPEN_FLAGS:
            info.noflush = not self.fs.flushes(fh)
        return info

    @_guard
    async def read(self, fh: int, off: int, size: int) -> bytes:
        return await self.fs.read(fh, off, size)

    @_guard
    async def write(self, fh: int, off: int, buf: bytes) -> int:
        return await self.fs.write(fh, off, buf)

    @_guard
    async def flush(self, fh: int) -> None:
        await self.fs.flush(fh)

    @_guard
    async def fsync(self, fh: int, datasync: bool) -> None:
        await self.fs.fsync(fh)

    @_guard
    async def release(self, fh: int) -> None:
        await self.fs.release(fh)

    @_guard
    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        await self.fs.unlink(parent_inode, decode_name(name))

    @_guard
    async def rename(  # noqa: PLR0913 - pyfuse3's rename signature
        self,
        parent_inode_old: int,
        name_old: bytes,
        parent_inode_new: int,
        name_new: bytes,
        flags: int,
        ctx: pyfuse3.RequestContext,
    ) -> None:
        await self.fs.rename(
            parent_inode_old,
            decode_name(name_old),
            parent_inode_new,
            decode_name(name_new),
            noreplace=bool(flags & pyfuse3.RENAME_NOREPLACE),
            exchange=bool(flags & pyfuse3.RENAME_EXCHANGE),
            pid=ctx.pid,
        )

    @_guard
    async def symlink(
        self, parent_inode: int, name: bytes, target: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        node = await self.fs.symlink(parent_inode, decode_name(name), target, ctx.pid)
        return self._entry(self.fs.attributes(node))

    @_guard
    async def link(
        self, inode: int, new_parent_inode: int, new_name: bytes, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        node = await self.fs.link(inode, new_parent_inode, decode_name(new_name))
        return self._entry(self.fs.attributes(node))

    @_guard
    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        return self.fs.readlink(inode)

    # -- refused operations --------------------------------------------------------------

    @_guard
    async def mknod(
        self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: pyfuse3.RequestContext
    ) -> pyfuse3.EntryAttributes:
        raise FsError(errno.EPERM, "only regular files and directories can be created")

    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        raise pyfuse3.FUSEError(errno.ENOSYS)

    async def setxattr(
        self, inode: int, name: bytes, value: bytes, ctx: pyfuse3.RequestContext
    ) -> None:
        raise pyfuse3.FUSEError(errno.ENOSYS)

    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> Sequence[bytes]:
        raise pyfuse3.FUSEError(errno.ENOSYS)

    async def removexattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        raise pyfuse3.FUSEError(errno.ENOSYS)


def fsname_for(user_id: str) -> str:
    """The mount's source name in /proc/mounts: libfuse takes ASCII only, and a comma or
    a space would split its option list, so the user id is percent-encoded past those."""
    return "memfs:" + urllib.parse.quote(user_id, safe="@._-+=:")


def mount_options(
    fsname: str,
    *,
    allow_other: bool,
    debug: bool,
    read_only: bool = False,
    extra: list[str] | None = None,
) -> set[str]:
    """libfuse options: the kernel checks permissions, ``auto_unmount`` cleans up crashes."""
    options = {
        f"fsname={fsname}",
        "subtype=memfs",
        "default_permissions",
        "noatime",
        "auto_unmount",
    }
    if allow_other:
        options.add("allow_other")
    if debug:
        options.add("debug")
    if read_only:
        options.add("ro")
    options.update(extra or ())
    return options
