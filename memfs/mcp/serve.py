"""``memfs serve mcp``: the workspace a mount serves, to MCP hosts, over stdio or HTTP.

The same steps as the mount and the WebDAV server (``memfs.serving``: open, assemble,
listen for other writers, load, run the workspace's background work), with the MCP server
(``memfs.mcp.server``) as the front.  Everything runs in one trio run: the SDK is built on
anyio, which runs on trio, so a tool call reaches the workspace without a thread.

stdio (the default) is what a host starts as a command: JSON-RPC on stdin and stdout, the
log on stderr (or ``--log-file``).  ``--http HOST:PORT`` serves MCP's streamable HTTP at
``/mcp`` on Hypercorn's trio worker: on loopback by default, and on any other address only
with ``--token-file`` (every request must then carry ``Authorization: Bearer <token>``).
The SDK's transport security checks ``Host`` and ``Origin`` (DNS rebinding).
"""

from __future__ import annotations

import hmac
import logging
import signal
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from memfs.assembly import Opened
from memfs.config import Settings
from memfs.errors import CommandError
from memfs.front_checks import read_private, refuse_exposed
from memfs.mcp.server import Changes, MemoryServer
from memfs.mcp.tools import MemoryTools
from memfs.paths import PROMPT_FILE
from memfs.serving import load_workspace, serve_opened
from memfs.vfs.by_path import PathOperations

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

MCP_PATH = "/mcp"


def read_token(path: Path) -> str:
    """``--token-file FILE``: the bearer token, in a file only its owner can read."""
    token = read_private(path, "--token-file").strip()
    if len(token) < 16:
        raise CommandError(f"--token-file {path}: the token is shorter than 16 characters")
    return token


def bearer_only(app: App, token: str) -> App:
    """``app`` for requests that carry the token; 401 for the others."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            given = dict(scope.get("headers") or []).get(b"authorization", b"")
            if not hmac.compare_digest(given, expected):
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"www-authenticate", b'Bearer realm="memfs"'),
                    (b"content-type", b"text/plain; charset=utf-8"),
                ]})  # fmt: skip
                await send({"type": "http.response.body", "body": b"a bearer token is needed\n"})
                return
        await app(scope, receive, send)

    return guarded


def serve_mcp(
    settings: Settings,
    http: tuple[str, int] | None = None,
    token: str | None = None,
    on_ready: Callable[[int], None] | None = None,
) -> int:
    """Serve until stdin closes (stdio), or SIGTERM or SIGINT; return an exit code.
    ``on_ready`` is told the port once HTTP listens."""
    if http is not None:
        refuse_exposed("--http", http[0], token is not None, "--token-file FILE (a bearer token)")
    return serve_opened(settings, lambda opened: _Mcp(settings, opened, http, token, on_ready).run)


@dataclass(frozen=True)
class _Mcp:
    """One MCP server's run over one workspace."""

    settings: Settings
    opened: Opened
    http: tuple[str, int] | None
    token: str | None
    on_ready: Callable[[int], None] | None = None

    async def run(self) -> int:
        served = await load_workspace(self.settings, self.opened)
        ops = PathOperations(served.parts.fs)
        tools = MemoryTools(ops, served.parts.search, self.opened.database.layout)
        changes = Changes(ops)
        front = MemoryServer(tools, changes, has_prompt=await ops.exists(PROMPT_FILE))
        try:
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async with trio.open_nursery() as nursery:
                    await served.run_tasks(nursery)
                    nursery.start_soon(changes.watch)
                    nursery.start_soon(_stop_on_signal, signals, nursery.cancel_scope)
                    if self.http is None:
                        await self._stdio(front)
                    else:
                        await self._http(front, self.http)
                    nursery.cancel_scope.cancel()
        finally:
            code = await served.end()
            log.info("MCP server stopped")
        return code

    async def _stdio(self, front: MemoryServer) -> None:
        from mcp.server.stdio import stdio_server

        log.info("serving the workspace over MCP on stdio")
        async with stdio_server() as (read, write):
            await front.server.run(read, write, front.server.create_initialization_options())
        log.info("the MCP host closed stdin")

    async def _http(self, front: MemoryServer, listen: tuple[str, int]) -> None:
        from hypercorn.config import Config
        from hypercorn.trio import serve
        from mcp.server.transport_security import TransportSecuritySettings

        host, port = listen
        shown = f"[{host}]" if ":" in host else host
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[f"{shown}:*", "127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=[f"http://{shown}:*", f"https://{shown}:*", "http://127.0.0.1:*",
                             "http://localhost:*", "http://[::1]:*"],
        )  # fmt: skip
        app: App = front.server.streamable_http_app(
            streamable_http_path=MCP_PATH, transport_security=security, host=host
        )
        if self.token is not None:
            app = bearer_only(app, self.token)
        config = Config()
        config.bind = [f"{shown}:{port}"]
        config.accesslog = None
        config.errorlog = logging.getLogger("memfs.mcp.http")
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(serve, app, config)  # type: ignore[arg-type]
            for bind in binds:
                log.info("serving the workspace over MCP at %s%s", bind, MCP_PATH)
            if self.on_ready is not None and binds:
                self.on_ready(int(binds[0].rsplit(":", 1)[1]))


async def _stop_on_signal(signals: Any, scope: trio.CancelScope) -> None:
    async for signum in signals:
        log.info("received %s: stopping the MCP server", signal.Signals(signum).name)
        scope.cancel()
        return
