"""The contract suite's other fronts: the same operations as ``PathOperations``, made as
WebDAV requests to the WebDAV server's application (WsgiDAV over ``MemoryProvider``, as
``memfs serve webdav`` builds it) over the same workspace (``DavOps``), and as system
calls on a FUSE mount of it (``FuseOps``: ``MemfsOperations`` under pyfuse3, as ``memfs
mount`` mounts it).

The requests go through httpx's WSGI transport, in a worker thread (the provider calls
back into the workspace's trio run, as it does from cheroot's threads): every request is
the server's whole protocol stack but the socket, which litmus, davfs2 and rclone cover
(``tests/webdav``).  A refusal comes back as the HTTP status the provider gave it
(``FrontRefusal``): a test's expected errno is met when the front answers the status that
errno maps to (``STATUS_OF_ERRNO``).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import stat
from collections.abc import AsyncIterator, Callable
from datetime import UTC
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote
from xml.etree import ElementTree

import httpx
import pytest
import trio
from wsgidav.wsgidav_app import WsgiDAVApp

from memfs.errors import FsError
from memfs.vfs import Filesystem
from memfs.vfs.by_path import Entry
from memfs.webdav.provider import STATUS_OF_ERRNO, MemoryProvider
from memfs.webdav.server import dav_config
from memfs.webdav.sessions import Sessions

T = TypeVar("T")

#: The front a contract test runs through.
FRONTS = ("model", "webdav", "fuse")
DAV = "{DAV:}"


#: Where the protocol answers before the provider is asked, (errno, method) -> the
#: statuses WebDAV gives instead of the errno's own: a PUT or MKCOL whose folder is missing
#: is 409 (RFC 4918 9.7.1, 9.3.1) and a MKCOL of an existing name 405 (9.3.1); a PUT on a
#: folder is WsgiDAV's 405; a folder moved into itself, or the root removed or moved, is
#: 403; a path through a file maps to no resource (404; 409 for a write).
PROTOCOL_ANSWERS: dict[tuple[int, str], set[int]] = {
    (errno.ENOENT, "PUT"): {409}, (errno.ENOENT, "MKCOL"): {409},
    (errno.EEXIST, "MKCOL"): {405}, (errno.EISDIR, "PUT"): {405},
    (errno.EINVAL, "MOVE"): {403}, (errno.EINVAL, "DELETE"): {403},
    (errno.ENOTDIR, "GET"): {404}, (errno.ENOTDIR, "PROPFIND"): {404},
    (errno.ENOTDIR, "PUT"): {409}, (errno.ENOTDIR, "MKCOL"): {409},
}  # fmt: skip


#: Where the kernel answers before the mount is asked, (errno, call) -> its errno: the
#: mount's root cannot be removed (EBUSY) or renamed (EBUSY, or EXDEV into itself); a file
#: renamed over a folder is EISDIR whatever the folder is.
KERNEL_ANSWERS: dict[tuple[int, str], set[int]] = {
    (errno.EINVAL, "rmdir"): {errno.EBUSY}, (errno.EINVAL, "rename"): {errno.EBUSY, errno.EXDEV},
    (errno.EPERM, "rename"): {errno.EISDIR},
}  # fmt: skip


class KernelRefusal(FsError):
    """A system call on the FUSE mount that failed: its errno, and the call."""

    def __init__(self, code: int, call: str, line: str) -> None:
        super().__init__(code, line)
        self.call = call

    def means(self, code: int) -> bool:
        """The errno itself, or the kernel's own answer for it (``KERNEL_ANSWERS``)."""
        return self.errno == code or self.errno in KERNEL_ANSWERS.get((code, self.call), set())


class FrontRefusal(FsError):
    """A request the WebDAV front refused: its HTTP status, and the errno it stands for."""

    def __init__(self, status: int, method: str, path: str, line: str) -> None:
        codes = [code for code, mapped in STATUS_OF_ERRNO.items() if mapped == status]
        super().__init__(codes[0] if codes else errno.EIO, f"HTTP {status}: {line}")
        self.status, self.method, self.path = status, method, path

    def means(self, code: int) -> bool:
        """This refusal is what the front answers for ``code``: the errno's own status,
        the protocol's answer for it (``PROTOCOL_ANSWERS``), or, for a path with ``.``
        or ``..`` (EINVAL on the model), any refusal: a URL is resolved before it
        reaches the workspace, so such a path names another place in it, never one
        outside."""
        if self.status == STATUS_OF_ERRNO.get(code):
            return True
        if self.status in PROTOCOL_ANSWERS.get((code, self.method), set()):
            return True
        dotted = any(name in (".", "..") for name in self.path.split("/"))
        return code == errno.EINVAL and dotted and 400 <= self.status < 500


class DavOps:
    """``PathOperations``' calls, as a WebDAV client makes them (one client: one writer)."""

    def __init__(self, fs: Filesystem) -> None:
        provider = MemoryProvider(Sessions(fs, trio.lowlevel.current_trio_token()), read_only=False)
        app = WsgiDAVApp(dav_config(provider, None))
        self._http = httpx.Client(
            transport=httpx.WSGITransport(app=_pep3333(app)), base_url="http://dav"
        )

    def close(self) -> None:
        self._http.close()

    async def _request(
        self, method: str, path: str, ok: tuple[int, ...], **given: Any
    ) -> httpx.Response:
        target = "/" + quote(path.strip("/"))
        answer = await trio.to_thread.run_sync(lambda: self._http.request(method, target, **given))
        if answer.status_code not in ok:
            line = f"{method} {path}: {_said(answer)}"
            raise FrontRefusal(answer.status_code, method, path, line)
        return answer

    async def stat(self, path: str) -> Entry:
        answer = await self._request("PROPFIND", path, (207,), headers={"Depth": "0"})
        return _entries(answer)[0]

    async def exists(self, path: str) -> bool:
        try:
            await self.stat(path)
        except FrontRefusal as exc:
            if exc.status == 404:
                return False
            raise
        return True

    async def list(self, path: str = "") -> list[Entry]:
        answer = await self._request("PROPFIND", path, (207,), headers={"Depth": "1"})
        itself = path.strip("/")
        return sorted((e for e in _entries(answer) if e.path != itself), key=lambda e: e.name)

    async def read(self, path: str) -> bytes:
        if (await self.stat(path)).is_dir:
            raise FrontRefusal(STATUS_OF_ERRNO[errno.EISDIR], "GET", path, f"GET {path}: a folder")
        return (await self._request("GET", path, (200,))).content

    async def save(self, path: str, data: bytes, *, if_version: object = None) -> Entry:
        headers = {"If-Match": f'"{if_version}"'} if if_version is not None else {}
        await self._request("PUT", path, (200, 201, 204), content=data, headers=headers)
        return await self.stat(path)

    async def mkdir(self, path: str) -> Entry:
        await self._request("MKCOL", path, (201,))
        return await self.stat(path)

    async def remove(self, path: str) -> None:
        await self._request("DELETE", path, (200, 204))

    async def move(self, source: str, target: str, *, overwrite: bool = True) -> Entry:
        return await self._transfer("MOVE", source, target, overwrite)

    async def copy(self, source: str, target: str, *, overwrite: bool = True) -> Entry:
        return await self._transfer("COPY", source, target, overwrite)

    async def _transfer(self, method: str, source: str, target: str, overwrite: bool) -> Entry:
        headers = {"Destination": "http://dav/" + quote(target.strip("/")),
                   "Overwrite": "T" if overwrite else "F"}  # fmt: skip
        await self._request(method, source, (201, 204), headers=headers)
        return await self.stat(target)

    def __getattr__(self, name: str) -> Any:
        """What only the model offers (a node, metadata): the test is the model's."""
        pytest.skip(f"the WebDAV front has no {name}(): a model-only call")


def _pep3333(app: Any) -> Any:
    """httpx's WSGI transport puts the decoded path in ``PATH_INFO``; PEP 3333 (and cheroot,
    and WsgiDAV reading it) has its UTF-8 bytes as latin-1 characters."""

    def wrapped(environ: dict[str, Any], start_response: Any) -> Any:
        environ["PATH_INFO"] = environ["PATH_INFO"].encode("utf-8").decode("latin-1")
        return app(environ, start_response)

    return wrapped


def only_rename_rules(front: str) -> None:
    """A test of ``rename(2)``'s refusals to replace: WebDAV's ``Overwrite: T`` deletes
    what is at the destination first (RFC 4918 9.9.3), which ``tests/webdav`` tests."""
    if front == "webdav":
        pytest.skip("WebDAV's Overwrite: T replaces the destination (RFC 4918 9.9.3)")


def _said(answer: httpx.Response) -> str:
    text = answer.text.strip().splitlines()
    return text[-1][:300] if text else answer.reason_phrase


def _entries(answer: httpx.Response) -> list[Entry]:
    """The entries of a multistatus answer (the ETag stands for the version: opaque)."""
    found = []
    for response in ElementTree.fromstring(answer.content).iter(f"{DAV}response"):
        href = unquote(response.findtext(f"{DAV}href") or "")
        prop = response.find(f"{DAV}propstat/{DAV}prop")
        assert prop is not None, answer.text
        is_dir = prop.find(f"{DAV}resourcetype/{DAV}collection") is not None
        modified = prop.findtext(f"{DAV}getlastmodified")
        mtime = parsedate_to_datetime(modified).astimezone(UTC) if modified else None
        etag = (prop.findtext(f"{DAV}getetag") or "").strip('"') or None
        found.append(Entry(
            path=href.strip("/"), is_dir=is_dir,
            size=int(prop.findtext(f"{DAV}getcontentlength") or 0),
            mtime_ns=int(mtime.timestamp() * 1e9) if mtime else 0,
            version=etag if not is_dir else None,  # type: ignore[arg-type]
        ))  # fmt: skip
    return found


#: ``renameat2``'s flag: fail with EEXIST rather than replace (``mv -n``; Linux 3.15).
RENAME_NOREPLACE = 1
_LIBC = ctypes.CDLL(None, use_errno=True)


class FuseOps:
    """``PathOperations``' calls as a program makes them: system calls on a FUSE mount of
    the workspace (``MemfsOperations`` under pyfuse3, in the test's own trio run), each in
    a worker thread while the run serves the kernel's requests.  A namespace change is
    followed by ``fsyncdir`` of its folder, as a program that wants it durable does (the
    mount otherwise sends it with its next transaction)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _at(self, path: str) -> Path:
        names = [n for n in path.strip("/").split("/") if n]
        if any(name in (".", "..") for name in names):
            pytest.skip("the kernel resolves . and .. before the mount is asked")
        return self.root.joinpath(*names)

    async def _sys(self, what: str, call: Callable[[], T]) -> T:
        try:
            return await trio.to_thread.run_sync(call)
        except OSError as exc:
            code = exc.errno or errno.EIO
            raise KernelRefusal(code, what.partition(" ")[0], f"{what}: {exc.strerror}") from None

    def _entry(self, path: str, found: os.stat_result) -> Entry:
        is_dir = stat.S_ISDIR(found.st_mode)
        version = None if is_dir else (found.st_mtime_ns, found.st_size, found.st_ino)
        return Entry(path.strip("/"), is_dir, found.st_size, found.st_mtime_ns,
                     version)  # type: ignore[arg-type]  # fmt: skip

    async def _synced(self, *folders: Path) -> None:
        for folder in dict.fromkeys(folders):
            await self._sys(f"fsyncdir {folder}", lambda f=folder: _fsyncdir(f))

    async def stat(self, path: str) -> Entry:
        where = self._at(path)
        return self._entry(path, await self._sys(f"stat {path}", lambda: os.stat(where)))

    async def exists(self, path: str) -> bool:
        where = self._at(path)
        return await trio.to_thread.run_sync(os.path.lexists, where)

    async def list(self, path: str = "") -> list[Entry]:
        where = self._at(path)
        names = await self._sys(f"listdir {path}", lambda: sorted(os.listdir(where)))
        base = path.strip("/")
        return [await self.stat(f"{base}/{name}" if base else name) for name in names]

    async def read(self, path: str) -> bytes:
        where = self._at(path)
        return await self._sys(f"read {path}", where.read_bytes)

    async def save(self, path: str, data: bytes, *, if_version: object = None) -> Entry:
        if if_version is not None:
            pytest.skip("a system call has no conditional write (If-Match)")
        where = self._at(path)
        await self._sys(f"write {path}", lambda: _write_whole(where, data))
        return await self.stat(path)

    async def mkdir(self, path: str) -> Entry:
        where = self._at(path)
        await self._sys(f"mkdir {path}", lambda: os.mkdir(where))
        await self._synced(where.parent)
        return await self.stat(path)

    async def remove(self, path: str) -> None:
        where = self._at(path)
        if where == self.root:
            await self._sys("rmdir /", lambda: os.rmdir(where))
        elif await trio.to_thread.run_sync(where.is_dir):
            await self._sys(f"rm -r {path}", lambda: shutil.rmtree(where))
        else:
            await self._sys(f"unlink {path}", lambda: os.unlink(where))
        await self._synced(where.parent)

    async def move(self, source: str, target: str, *, overwrite: bool = True) -> Entry:
        old, new = self._at(source), self._at(target)
        flags = 0 if overwrite else RENAME_NOREPLACE
        await self._sys(f"rename {source} {target}", lambda: _renameat2(old, new, flags))
        await self._synced(old.parent, new.parent)
        return await self.stat(target)

    async def copy(self, source: str, target: str, *, overwrite: bool = True) -> Entry:
        old, new = self._at(source), self._at(target)

        def copy() -> None:
            if not overwrite and os.path.lexists(new):
                raise FileExistsError(errno.EEXIST, "exists")
            if old.is_dir():
                shutil.copytree(old, new, dirs_exist_ok=overwrite)
            else:
                shutil.copyfile(old, new)

        await self._sys(f"cp -r {source} {target}", copy)
        await self._synced(new.parent)
        return await self.stat(target)

    def __getattr__(self, name: str) -> Any:
        """What only the model offers (a node, metadata): the test is the model's."""
        pytest.skip(f"a FUSE mount has no {name}(): a model-only call")


def _write_whole(where: Path, data: bytes) -> None:
    """open(O_TRUNC), write everything, fsync, close, as a program that wants its bytes
    kept writes (the save's error comes with the fsync or the close; an empty new file is
    otherwise committed at its release, which the kernel sends after close returns)."""
    fd = os.open(where, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsyncdir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _renameat2(old: Path, new: Path, flags: int) -> None:
    at_fdcwd = -100
    done = _LIBC.renameat2(at_fdcwd, os.fsencode(old), at_fdcwd, os.fsencode(new), flags)
    if done != 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code))


@contextlib.asynccontextmanager
async def fuse_mounted(fs: Filesystem, stats: Any, mountpoint: Path) -> AsyncIterator[FuseOps]:
    """The workspace mounted at ``mountpoint`` as ``memfs mount`` mounts it (its
    operations class and options), served in this trio run until the block ends."""
    import pyfuse3

    from memfs.daemon import ATTR_TIMEOUT
    from memfs.fuse_ops import MemfsOperations, mount_options

    mountpoint.mkdir(parents=True, exist_ok=True)
    ops = MemfsOperations(fs, attr_timeout=ATTR_TIMEOUT, stats=stats)
    pyfuse3.init(ops, str(mountpoint), mount_options("memfs-contract", allow_other=False,
                                                     debug=False))  # fmt: skip
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(pyfuse3.main)
            try:
                yield FuseOps(mountpoint)
            finally:
                pyfuse3.terminate()
    finally:
        pyfuse3.close(unmount=True)
