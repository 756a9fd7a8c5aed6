"""``memfs serve webdav``: the workspace a mount serves, over WebDAV.

The same steps as the mount (``memfs.serving``: open, assemble, listen for other writers,
load, run the workspace's background work), with WsgiDAV on cheroot in place of the
kernel.  The HTTP server runs in threads of its own and reaches the workspace through
``Sessions``; the trio run owns the workspace and ends it (every save committed) when the
server stops.  It listens on loopback unless it is given users (``--auth``).
"""

from __future__ import annotations

import logging
import signal
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from memfs.assembly import Opened
from memfs.config import Settings
from memfs.errors import CommandError
from memfs.front_checks import read_private, refuse_exposed
from memfs.serving import load_workspace, serve_opened
from memfs.webdav.provider import MemoryProvider
from memfs.webdav.sessions import Sessions

log = logging.getLogger(__name__)

#: Where ``memfs serve webdav`` listens unless told (``--listen HOST:PORT``).
DEFAULT_LISTEN = ("127.0.0.1", 8765)
#: Requests answered at once (each waits for the workspace, not for the CPU).
SERVER_THREADS = 16


def read_users(path: Path) -> dict[str, dict[str, str]]:
    """``--auth FILE``: one ``user:password`` per line; the file must be its owner's
    alone (it holds passwords), and hold at least one user."""
    users: dict[str, dict[str, str]] = {}
    for number, line in enumerate(read_private(path, "--auth").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        user, sep, password = line.partition(":")
        if not sep or not user or not password:
            raise CommandError(f"--auth {path}, line {number}: expected user:password")
        users[user.strip()] = {"password": password}
    if not users:
        raise CommandError(f"--auth {path}: no user in it")
    return users


def dav_config(provider: MemoryProvider, users: dict[str, dict[str, str]] | None) -> dict[str, Any]:
    """WsgiDAV's configuration: the workspace at ``/``, locks and dead properties kept
    in memory (Finder and Windows lock before they write; Windows sets its file times as
    properties), Basic authentication where there are users, no HTML browser."""
    return {
        "provider_mapping": {"/": provider},
        "http_authenticator": {
            "domain_controller": None,  # WsgiDAV's simple one, over simple_dc below
            "accept_basic": True,
            "accept_digest": False,
            "default_to_digest": False,
        },
        "simple_dc": {"user_mapping": {"*": users if users else True}},
        "property_manager": True,
        "lock_storage": True,
        "hotfixes": {"emulate_win32_lastmod": True},
        "dir_browser": {"enable": False},
        "verbose": 1,
        "logging": {"enable": False},
        "suppress_version_info": True,
    }


def serve_webdav(
    settings: Settings,
    listen: tuple[str, int] = DEFAULT_LISTEN,
    users: dict[str, dict[str, str]] | None = None,
    on_ready: Callable[[int], None] | None = None,
) -> int:
    """Serve until SIGTERM or SIGINT; return a process exit code.  ``on_ready`` is told
    the port once the server listens (the one chosen, where ``listen`` asked for 0)."""
    refuse_exposed("--listen", listen[0], bool(users), "--auth FILE (user:password lines)")
    return serve_opened(
        settings, lambda opened: _WebDav(settings, opened, listen, users, on_ready).run
    )


@dataclass(frozen=True)
class _WebDav:
    """One WebDAV server's run over one workspace."""

    settings: Settings
    opened: Opened
    listen: tuple[str, int]
    users: dict[str, dict[str, str]] | None
    on_ready: Callable[[int], None] | None

    async def run(self) -> int:
        from cheroot import wsgi
        from wsgidav.wsgidav_app import WsgiDAVApp

        served = await load_workspace(self.settings, self.opened)
        sessions = Sessions(served.parts.fs, trio.lowlevel.current_trio_token())
        provider = MemoryProvider(sessions, read_only=self.settings.read_only)
        app = WsgiDAVApp(dav_config(provider, self.users))
        server = wsgi.Server(self.listen, app, numthreads=SERVER_THREADS, server_name="memfs")
        server.prepare()  # binds now: a port in use is said here, in one line
        port = server.bind_addr[1]
        log.info("serving the workspace over WebDAV at http://%s:%d/", self.listen[0], port)
        if self.on_ready is not None:
            self.on_ready(port)
        try:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async with trio.open_nursery() as nursery:
                    await served.run_tasks(nursery)
                    nursery.start_soon(_stop_on_signal, signals, server)
                    await trio.to_thread.run_sync(server.serve)
                    nursery.cancel_scope.cancel()
        finally:
            code = await served.end()
            log.info("WebDAV server stopped")
        return code


async def _stop_on_signal(signals: AsyncIterator[int], server: Any) -> None:
    """The first SIGTERM or SIGINT stops the HTTP server (its requests finish first)."""
    async for signum in signals:
        log.info("received %s: stopping the WebDAV server", signal.Signals(signum).name)
        await trio.to_thread.run_sync(server.stop)
        return
