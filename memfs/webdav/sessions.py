"""The workspace as the WebDAV server's threads reach it.

The server (cheroot) answers each request in a thread of its own; the workspace lives in
one trio run, which owns its state (``memfs.vfs.state``).  Every operation a request makes
is sent into that run (``trio.from_thread.run``) and waits there for its answer, so the
model sees one caller at a time per operation, exactly as the FUSE adapter's requests.

Each client (its address, its user and its program) is one writer for the merge: a save
is based on what that client last read, as a process's on the mount.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from memfs.vfs import Filesystem
from memfs.vfs.by_path import PathOperations

T = TypeVar("T")

#: Clients remembered as writers at once; the oldest is forgotten first.
MAX_SESSIONS = 256


class Sessions:
    """One ``PathOperations`` per client, and the way into the workspace's trio run."""

    def __init__(self, fs: Filesystem, token: trio.lowlevel.TrioToken) -> None:
        self.fs = fs
        self._token = token
        self._lock = threading.Lock()
        self._by_client: dict[tuple[str, str, str], PathOperations] = {}

    def of(self, environ: dict[str, Any]) -> PathOperations:
        """The session of the client that sent the request ``environ`` describes."""
        key = (
            str(environ.get("REMOTE_ADDR", "")),
            str(environ.get("wsgidav.auth.user_name") or ""),
            str(environ.get("HTTP_USER_AGENT", "")),
        )
        with self._lock:
            found = self._by_client.pop(key, None)
            if found is None:
                found = PathOperations(self.fs)
            self._by_client[key] = found  # the newest last
            while len(self._by_client) > MAX_SESSIONS:
                del self._by_client[next(iter(self._by_client))]
            return found

    def run(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` in the workspace's run; its answer or its exception."""
        return trio.from_thread.run(functools.partial(fn, *args, **kwargs), trio_token=self._token)
