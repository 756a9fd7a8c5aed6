"""``memfs serve webdav|mcp``: serve a workspace where FUSE does not reach: WebDAV for
Finder and Explorer, MCP for agents without a mount."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path

from memfs.commands.arguments import Parser, mount_flags, server_flags, settings_flag
from memfs.commands.base import Command, Invocation
from memfs.commands.common import check_embedded
from memfs.config import Settings
from memfs.errors import EXIT_USAGE, CommandError

#: The front doors ``memfs serve`` opens (``memfs mount`` is the FUSE one).
FRONTS = ("webdav", "mcp")
#: Per front, the variables its address and its credentials file come from when the
#: command line does not give them (a server profile, ``memfs install-unit --serve``).
SERVE_VARIABLES = {
    "webdav": ("MEMFS_WEBDAV_LISTEN", "MEMFS_WEBDAV_AUTH"),
    "mcp": ("MEMFS_MCP_HTTP", "MEMFS_MCP_TOKEN_FILE"),
}


def arguments(parser: Parser) -> None:
    parser.add_argument("front", choices=FRONTS, help="the protocol to serve")
    server_flags(parser, "--listen", "--auth", (
        "webdav: where to listen (default 127.0.0.1:8765; any address but loopback needs "
        "--auth)",
        "webdav: users who may connect: one user:password per line, in a file only its "
        "owner can read (HTTP Basic)"))  # fmt: skip
    server_flags(parser, "--http", "--token-file", (
        "mcp: serve MCP's streamable HTTP at http://HOST:PORT/mcp, not stdio (any address "
        "but loopback needs --token-file)",
        "mcp --http: the bearer token every request must carry, in a file only its owner "
        "can read"))  # fmt: skip
    settings_flag(parser, "memfs settings by -o name")
    mount_flags(parser)


def run(call: Invocation) -> int:
    from memfs import logs

    args = call.args
    mine, theirs = (("--http", "--token-file"), ("--listen", "--auth"))
    if args.front == "webdav":
        mine, theirs = theirs, mine
    for flag in theirs:
        if getattr(args, flag.lstrip("-").replace("-", "_")) is not None:
            other = "webdav" if args.front == "mcp" else "mcp"
            raise CommandError(f"{flag} is for `memfs serve {other}`, not {args.front} "
                               f"(its own: {', '.join(mine)})", EXIT_USAGE)  # fmt: skip
    _from_profile(args)
    settings = call.settings()
    check_embedded(settings)
    logs.configure(call.level, file=settings.log_file)
    if args.front == "mcp":
        return _serve_mcp(call, settings)
    from memfs.front_checks import parse_listen
    from memfs.webdav.server import read_users, serve_webdav

    listen = parse_listen(args.listen or "127.0.0.1:8765")
    users = read_users(args.auth) if args.auth is not None else None
    return serve_webdav(settings, listen, users, on_ready=_ready("WebDAV", listen[0]))


def _from_profile(args: argparse.Namespace) -> None:
    """The address and credentials file a server profile gives (``SERVE_VARIABLES``),
    where the command line gives none."""
    where, secret = SERVE_VARIABLES[args.front]
    address, credentials = ("listen", "auth") if args.front == "webdav" else ("http", "token_file")
    if getattr(args, address) is None and os.environ.get(where):
        setattr(args, address, os.environ[where])
    if getattr(args, credentials) is None and os.environ.get(secret):
        setattr(args, credentials, Path(os.environ[secret]))


def _ready(front: str, host: str) -> Callable[[int], None]:
    """Tells systemd (a ``Type=notify`` unit) the server listens, and where."""

    def ready(port: int) -> None:
        from memfs import systemd

        systemd.notify(f"READY=1\nSTATUS={front} at {host}:{port}")

    return ready


def _serve_mcp(call: Invocation, settings: Settings) -> int:
    from memfs.front_checks import parse_listen
    from memfs.mcp.serve import read_token, serve_mcp

    args = call.args
    if args.token_file is not None and args.http is None:
        raise CommandError("--token-file is for --http (stdio needs no token)", EXIT_USAGE)
    http = parse_listen(args.http, "--http") if args.http else None
    token = read_token(args.token_file) if args.token_file is not None else None
    ready = _ready("MCP over HTTP", http[0]) if http else None
    return serve_mcp(settings, http, token, on_ready=ready)


COMMAND = Command(
    name="serve",
    summary="serve a workspace over WebDAV (Finder, Explorer, rclone) or MCP (agents)",
    description="""
Serves the same workspace `memfs mount` does, with the same rules (IronClaw's rows,
versions, merges, read-only, scopes), to WebDAV clients, until SIGTERM or Ctrl-C. It listens
on 127.0.0.1:8765 unless --listen says otherwise; any address but loopback needs --auth.

`memfs serve mcp` speaks the Model Context Protocol on stdin and stdout (an MCP host starts
it as a command), or streamable HTTP with --http; it offers IronClaw's memory tools
(memory_write, memory_read, memory_search, memory_tree), every document as a memory://
resource, and the agent's prompt.""",
    examples="""
memfs serve webdav
memfs serve webdav --listen 127.0.0.1:9000 --user-id alice
memfs serve webdav --listen 0.0.0.0:8765 --auth ~/.config/memfs/webdav-users
memfs serve mcp --database-url sqlite:$HOME/.ironclaw/reborn-local-dev.db
memfs serve mcp --http 127.0.0.1:8766""",
    arguments=arguments,
    run=run,
    logs_itself=True,
)
