"""WsgiDAV's provider interface over the workspace by path (``memfs.vfs.by_path``).

A thin adapter, as ``memfs.fuse_ops`` is for FUSE: each WebDAV method becomes the same
operation the mount makes (a PUT is one save, one transaction; a MOVE is ``rename``, so a
document moved over another keeps the target's identity and versions), and the model's
refusal (its errno) becomes the HTTP status a client understands, with one line saying why.
WsgiDAV speaks the protocol (PROPFIND, LOCK, conditional requests); nothing here does.
"""

from __future__ import annotations

import errno
import hashlib
import io
import logging
import mimetypes
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar
from urllib.parse import quote

from wsgidav.dav_error import (
    HTTP_BAD_REQUEST,
    HTTP_CONFLICT,
    HTTP_FORBIDDEN,
    HTTP_INSUFFICIENT_STORAGE,
    HTTP_INTERNAL_ERROR,
    HTTP_METHOD_NOT_ALLOWED,
    HTTP_NOT_FOUND,
    HTTP_PRECONDITION_FAILED,
    HTTP_REQUEST_ENTITY_TOO_LARGE,
    HTTP_SERVICE_UNAVAILABLE,
    DAVError,
    PRECONDITION_CODE_PropfindFiniteDepth,
)
from wsgidav.dav_provider import DAVCollection, DAVNonCollection, DAVProvider

from memfs.errors import FsError
from memfs.vfs.by_path import Entry, PathOperations
from memfs.vfs.content import DOCUMENT_MAX_BYTES
from memfs.webdav.sessions import Sessions

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The HTTP status of each refusal of the model (its errno); anything else is a 500.
STATUS_OF_ERRNO = {
    errno.ENOENT: HTTP_NOT_FOUND,
    errno.ENOTDIR: HTTP_CONFLICT,
    errno.EISDIR: HTTP_CONFLICT,
    errno.ENOTEMPTY: HTTP_CONFLICT,
    errno.EEXIST: HTTP_PRECONDITION_FAILED,
    errno.ESTALE: HTTP_PRECONDITION_FAILED,
    errno.EINVAL: HTTP_BAD_REQUEST,
    errno.EILSEQ: HTTP_BAD_REQUEST,
    errno.ENAMETOOLONG: HTTP_BAD_REQUEST,
    errno.EACCES: HTTP_FORBIDDEN,
    errno.EPERM: HTTP_FORBIDDEN,
    errno.EROFS: HTTP_FORBIDDEN,
    errno.EFBIG: HTTP_REQUEST_ENTITY_TOO_LARGE,
    errno.ENOSPC: HTTP_INSUFFICIENT_STORAGE,
    errno.EIO: HTTP_SERVICE_UNAVAILABLE,
    errno.ETIMEDOUT: HTTP_SERVICE_UNAVAILABLE,
    errno.EAGAIN: HTTP_SERVICE_UNAVAILABLE,
    errno.ENOTSUP: HTTP_METHOD_NOT_ALLOWED,
}


def workspace_path(dav_path: str) -> str:
    """The workspace path of a WebDAV path (``/a/b.md`` → ``a/b.md``, ``/`` → ``""``)."""
    return dav_path.strip("/")


@contextmanager
def answered(what: str) -> Iterator[None]:
    """The model's refusal as the HTTP status it means, with its one line (logged, and
    the body the client sees); never a traceback."""
    try:
        yield
    except FsError as exc:
        status = STATUS_OF_ERRNO.get(exc.errno, HTTP_INTERNAL_ERROR)
        line = f"{what}: {exc.reason or errno.errorcode.get(exc.errno, exc.errno)}"
        if status >= 500:
            log.warning("%s", line)
        else:
            log.info("%s", line)
        raise DAVError(status, context_info=line) from None


class MemoryProvider(DAVProvider):  # type: ignore[misc]
    """The workspace's folders and documents as WebDAV resources."""

    def __init__(self, sessions: Sessions, *, read_only: bool) -> None:
        super().__init__()
        self.sessions = sessions
        self.read_only = read_only

    def is_readonly(self) -> bool:
        return self.read_only

    def custom_request_handler(
        self, environ: dict[str, Any], start_response: Any, default_handler: Any
    ) -> Any:
        """A PROPFIND of the whole tree (``Depth: infinity``, or no Depth) is refused as
        RFC 4918 allows (403, ``propfind-finite-depth``): on a large workspace it would
        answer with every document's properties at once.  Clients list a folder at a
        time (Depth 1)."""
        log.debug("%s %s (Depth %s)", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"),
                  environ.get("HTTP_DEPTH"))  # fmt: skip
        depth = str(environ.get("HTTP_DEPTH", "infinity")).lower()
        method = environ.get("REQUEST_METHOD")
        if method in ("DELETE", "MOVE") and not workspace_path(environ.get("PATH_INFO") or ""):
            line = f"{method} /: the workspace root cannot be removed or moved"
            log.info("%s", line)
            raise DAVError(HTTP_FORBIDDEN, context_info=line)
        if method == "PROPFIND" and depth == "infinity":
            log.info("PROPFIND %s at depth infinity refused", environ.get("PATH_INFO"))
            raise DAVError(HTTP_FORBIDDEN, err_condition=PRECONDITION_CODE_PropfindFiniteDepth)
        return default_handler(environ, start_response)

    def call(
        self, environ: dict[str, Any], what: str, use: Callable[[PathOperations], Awaitable[T]]
    ) -> T:
        """``use`` of this client's session, run in the workspace; ``what`` names the
        request in a refusal's line."""
        ops = self.sessions.of(environ)
        with answered(what):
            return self.sessions.run(use, ops)

    def get_resource_inst(self, path: str, environ: dict[str, Any]) -> Any:
        """The resource at ``path``, or None where nothing is (WsgiDAV's 404; also the
        root's parent, which WsgiDAV asks for as None)."""
        if path is None:
            return None
        ops = self.sessions.of(environ)
        try:
            entry = self.sessions.run(ops.stat, workspace_path(path))
        except FsError as exc:
            if exc.errno in (errno.ENOENT, errno.ENOTDIR):
                return None
            with answered(path):
                raise
        return self.resource(path, entry, environ)

    def resource(self, path: str, entry: Entry, environ: dict[str, Any]) -> Any:
        if entry.is_dir:
            return Folder(path, environ, entry, self)
        return Document(path, environ, entry, self)


def _etag(entry: Entry) -> str:
    """The document's version as an entity tag (a file kept in memory only: its size
    and time, which change with every write)."""
    if entry.version is None:
        return f"m{entry.mtime_ns:x}-{entry.size:x}"
    return hashlib.sha256(entry.version.isoformat().encode()).hexdigest()[:32]


class _Upload(io.BytesIO):
    """A PUT's body on its way in; past the document limit it is refused at once (413)
    rather than read whole."""

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def write(self, data: Any) -> int:
        if self.tell() + len(data) > DOCUMENT_MAX_BYTES:
            line = f"{self.path}: larger than a document may be ({DOCUMENT_MAX_BYTES} bytes)"
            log.info("%s", line)
            raise DAVError(HTTP_REQUEST_ENTITY_TOO_LARGE, context_info=line)
        return super().write(data)

    def close(self) -> None:
        """Kept readable for ``end_write``: WsgiDAV closes the stream before it."""


class _Resource:
    """What a document and a folder share: the entry the request found, and the way to
    the workspace."""

    path: str
    environ: dict[str, Any]

    def __init__(
        self, path: str, environ: dict[str, Any], entry: Entry, provider: MemoryProvider
    ) -> None:
        super().__init__(path, environ)  # type: ignore[call-arg]  # WsgiDAV's resource
        self.entry = entry
        self.memory = provider

    def _call(self, what: str, use: Callable[[PathOperations], Awaitable[T]]) -> T:
        return self.memory.call(self.environ, what, use)

    def get_creation_date(self) -> float:
        return self.entry.mtime_ns / 1e9

    def get_last_modified(self) -> float:
        return self.entry.mtime_ns / 1e9

    def delete(self) -> None:
        path = self.entry.path
        self._call(f"DELETE {self.path}", lambda ops: ops.remove(path))
        self.remove_all_locks(recursive=True)  # type: ignore[attr-defined]

    def handle_move(self, dest_path: str) -> bool:
        """MOVE: ``rename`` (WsgiDAV has checked ``Overwrite`` and the locks already),
        so a document moved over another is IronClaw's write of the target, keeping its
        identity and history: what a Finder or Office save through a temporary name
        needs."""
        source, target = self.entry.path, workspace_path(dest_path)
        self._call(f"MOVE {self.path} -> {dest_path}",
                   lambda ops: _overwriting(ops, source, target, move=True))  # fmt: skip
        self.remove_all_locks(recursive=True)  # type: ignore[attr-defined]
        self._carry_properties(dest_path, move=True)
        return True

    def _carry_properties(self, dest_path: str, *, move: bool) -> None:
        """The client's dead properties (Windows' file times, litmus's) go with the
        resource, as WsgiDAV's own copy and move would take them."""
        props = self.memory.prop_manager
        if props is None:
            return
        here = self.get_ref_url()  # type: ignore[attr-defined]
        there = quote(self.memory.share_path + dest_path)
        if here.endswith("/") and not there.endswith("/"):
            there += "/"
        if move:
            props.move_properties(here, there, with_children=True, environ=self.environ)
        else:
            props.copy_properties(here, there, environ=self.environ)

    def handle_copy(self, dest_path: str, *, depth_infinity: bool) -> bool:
        source, target = self.entry.path, workspace_path(dest_path)
        self._call(f"COPY {self.path} -> {dest_path}",
                   lambda ops: _overwriting(ops, source, target, move=False))  # fmt: skip
        self._carry_properties(dest_path, move=False)
        return True


class Document(_Resource, DAVNonCollection):  # type: ignore[misc]
    """One document (or a file the workspace keeps in memory only: a scratch name)."""

    _upload: _Upload | None = None
    #: A GET's or HEAD's bytes, read once: the length sent is the length of what is sent
    #: (a save landing between a stat and a read, or ``.status``, made anew at each open,
    #: would otherwise be cut short or overrun).
    _content: bytes | None = None

    def get_content_length(self) -> int:
        if self.environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            return len(self._read())
        return self.entry.size

    def _read(self) -> bytes:
        if self._content is None:
            path = self.entry.path
            self._content = self._call(f"GET {self.path}", lambda ops: ops.read(path))
        return self._content

    def get_content_type(self) -> str:
        if self.entry.name.endswith(".md"):
            return "text/markdown; charset=utf-8"
        guessed, _ = mimetypes.guess_type(self.entry.name)
        return guessed or "application/octet-stream"

    def get_etag(self) -> str:
        return _etag(self.entry)

    def support_etag(self) -> bool:
        return True

    def support_ranges(self) -> bool:
        return True

    def get_content(self) -> io.BytesIO:
        return io.BytesIO(self._read())

    def begin_write(self, *, content_type: str | None = None) -> _Upload:
        self._upload = _Upload(self.path)
        return self._upload

    def end_write(self, *, with_errors: bool) -> None:
        upload, self._upload = self._upload, None
        if with_errors or upload is None:
            return
        # A conditional PUT (If-Match) was checked against this version: the save is
        # made only at it, so a save landing between the check and this one is never
        # overwritten unseen (412).
        based = self.entry.version if "HTTP_IF_MATCH" in self.environ else None
        path, data = self.entry.path, upload.getvalue()
        self.entry = self._call(
            f"PUT {self.path}", lambda ops: ops.save(path, data, if_version=based)
        )


class Folder(_Resource, DAVCollection):  # type: ignore[misc]
    """One folder: a path prefix of documents, or one kept empty."""

    def get_display_info(self) -> dict[str, str]:
        return {"type": "Folder"}

    def get_used_bytes(self) -> int:
        """RFC 4331's ``quota-used-bytes``: the files below, from the tree.  There is no
        ``quota-available-bytes``: the database sets no quota (the property is absent,
        as RFC 4331 allows)."""
        path = self.entry.path
        return self._call(f"PROPFIND {self.path}", lambda ops: ops.used_bytes(path))

    def get_etag(self) -> None:
        return None

    def support_etag(self) -> bool:
        return False

    def _members(self) -> list[Entry]:
        path = self.entry.path
        return self._call(f"PROPFIND {self.path}", lambda ops: ops.list(path))

    def get_member_names(self) -> list[str]:
        return [entry.name for entry in self._members()]

    def get_member_list(self) -> list[Any]:
        """Every member from one listing of the tree (a PROPFIND of depth 1 reads no
        row: the tree answers it)."""
        base = self.path.rstrip("/")
        return [
            self.memory.resource(f"{base}/{entry.name}", entry, self.environ)
            for entry in self._members()
        ]

    def get_member(self, name: str) -> Any:
        return self.memory.get_resource_inst(f"{self.path.rstrip('/')}/{name}", self.environ)

    def create_empty_resource(self, name: str) -> Document:
        """A new name: for a PUT, nothing is stored until its body is (``end_write``), so
        a body refused leaves no empty document behind; for a LOCK of an unmapped URL,
        the empty document RFC 4918 (7.3) says it makes."""
        path = f"{self.path.rstrip('/')}/{name}"
        where = workspace_path(path)
        if self.environ.get("REQUEST_METHOD") == "PUT":
            self._call(f"PUT {path}", lambda ops: ops.check_new(where))
            entry = Entry(where, is_dir=False, size=0, mtime_ns=time.time_ns(), version=None)
        else:
            entry = self._call(f"PUT {path}", lambda ops: ops.save(where, b""))
        return Document(path, self.environ, entry, self.memory)

    def create_collection(self, name: str) -> None:
        path = f"{self.path.rstrip('/')}/{name}"
        self._call(f"MKCOL {path}", lambda ops: ops.mkdir(workspace_path(path)))

    def support_recursive_delete(self) -> bool:
        return True

    def support_recursive_move(self, dest_path: str) -> bool:
        return True


async def _overwriting(ops: PathOperations, source: str, target: str, *, move: bool) -> Entry:
    """MOVE or COPY with ``Overwrite: T`` (WsgiDAV has refused ``F`` over an existing
    target already).  A document onto a document is the model's rename over it (the
    target keeps its identity and versions) or a save of the source's content into it;
    where a folder is on either side, the target goes first (RFC 4918 9.8.4, 9.9.3), as
    ``rename(2)`` would refuse a folder over a non-empty one."""
    if await ops.exists(target):
        existing, moving = await ops.stat(target), await ops.stat(source)
        if existing.is_dir or moving.is_dir:
            await ops.remove(target)
    if move:
        return await ops.move(source, target)
    return await ops.copy(source, target)
