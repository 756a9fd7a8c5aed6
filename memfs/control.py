"""The daemon's control socket: what ``memfs umount`` and ``memfs recover --to`` ask a
running mount, before anything is detached.

One Unix socket per mount, beside its pid file, mode 0600 in the private runtime folder:
a request is one JSON line, the answer one JSON line.

* ``{"op": "prepare-unmount"}``: save every unsaved file now (the database, else a copy in
  the recovery area); answers ``{"unkept": [...], "kept": [...]}``.  ``unkept`` names files
  whose content is in the daemon's memory only: unmounting now would lose them, so
  ``memfs umount`` refuses.
* ``{"op": "drain", "to": DIR}``: write the content of every file not saved to the
  database into ``DIR/<workspace path>`` (0600), which counts as kept; answers
  ``{"written": [...], "failed": [...]}``.
* ``{"op": "force-unmount"}``: detach now; the daemon stays alive (and answers here) until
  every file is saved or kept somewhere, retrying every few seconds.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import trio

log = logging.getLogger(__name__)

#: Longest request line accepted.
MAX_REQUEST = 64 * 1024

Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


def socket_for(pidfile: Path) -> Path:
    """The control socket of the mount whose pid file is ``pidfile``."""
    return pidfile.with_suffix(".sock")


#: A Unix socket's path holds at most 107 bytes; a longer one is reached through the
#: folder's descriptor (``/proc/self/fd/N/name``).
_SUN_PATH_MAX = 107


@contextlib.contextmanager
def _reachable(path: Path) -> Iterator[str]:
    """A path to bind or connect ``path`` by, however long the folder's path is."""
    if len(os.fsencode(path)) <= _SUN_PATH_MAX:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


async def serve_control(
    path: Path, handler: Handler, *, task_status: Any = trio.TASK_STATUS_IGNORED
) -> None:
    """Answer requests on ``path`` until cancelled (the socket file is removed then).
    A socket that cannot be made is logged, never the end of the mount (``memfs umount``
    then just signals the daemon, as before)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    sock = trio.socket.socket(trio.socket.AF_UNIX, trio.socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        with _reachable(path) as where:
            await sock.bind(where)
        os.chmod(path, 0o600)
        sock.listen(8)
    except OSError as exc:
        log.error("no control socket at %s (%s): `memfs umount` cannot ask first", path, exc)
        sock.close()
        task_status.started()
        return
    finally:
        os.umask(old)
    listener = trio.SocketListener(sock)

    async def answer(stream: trio.SocketStream) -> None:
        async with stream:
            data = b""
            while b"\n" not in data and len(data) < MAX_REQUEST:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    break
                data += chunk
            try:
                request = json.loads(data.split(b"\n", 1)[0])
                if not isinstance(request, dict):
                    raise ValueError("not an object")
                reply = await handler(request)
            except (ValueError, KeyError, TypeError) as exc:
                reply = {"error": f"bad request: {exc}"}
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stream.send_all(json.dumps(reply).encode() + b"\n")

    try:
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                stream = await listener.accept()
                nursery.start_soon(answer, stream)
    finally:
        listener.socket.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def ask(path: Path, request: dict[str, Any], timeout: float) -> dict[str, Any] | None:
    """Send one request to a daemon's control socket; None if no daemon answers there."""
    if not path.exists():
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            with _reachable(path) as where:
                conn.connect(where)
            conn.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        except (ConnectionRefusedError, FileNotFoundError):
            return None
    reply = json.loads(data) if data.strip() else None
    return reply if isinstance(reply, dict) else None
