"""``memfs serve webdav``: serve a workspace to machines FUSE does not reach."""

from __future__ import annotations

from pathlib import Path

from memfs.commands.arguments import Parser, mount_flags
from memfs.commands.base import Command, Invocation
from memfs.commands.common import check_embedded

#: The front doors ``memfs serve`` opens (``memfs mount`` is the FUSE one).
FRONTS = ("webdav",)


def arguments(parser: Parser) -> None:
    parser.add_argument("front", choices=FRONTS, help="the protocol to serve")
    parser.add_argument("--listen", metavar="HOST:PORT", default="127.0.0.1:8765",
                        help="where to listen (default 127.0.0.1:8765; any address but "
                        "loopback needs --auth)")  # fmt: skip
    parser.add_argument("--auth", type=Path, metavar="FILE",
                        help="users who may connect: one user:password per line, in a file "
                        "only its owner can read (HTTP Basic)")  # fmt: skip
    parser.add_argument("-o", dest="mount_options", action="append", default=[],
                        metavar="KEY=VALUE,...", help="memfs settings by -o name")  # fmt: skip
    mount_flags(parser)


def run(call: Invocation) -> int:
    from memfs import logs
    from memfs.webdav.server import parse_listen, read_users, serve_webdav

    settings = call.settings()
    listen = parse_listen(call.args.listen)
    users = read_users(call.args.auth) if call.args.auth is not None else None
    check_embedded(settings)
    logs.configure(call.level, file=settings.log_file)
    return serve_webdav(settings, listen, users)


COMMAND = Command(
    name="serve",
    summary="serve a workspace over WebDAV (Finder, Explorer, davfs2, rclone)",
    description="""
Serves the same workspace `memfs mount` does, with the same rules (IronClaw's rows,
versions, merges, read-only, scopes), to WebDAV clients, until SIGTERM or Ctrl-C. It listens
on 127.0.0.1:8765 unless --listen says otherwise; any address but loopback needs --auth.""",
    examples="""
memfs serve webdav
memfs serve webdav --listen 127.0.0.1:9000 --user-id alice
memfs serve webdav --listen 0.0.0.0:8765 --auth ~/.config/memfs/webdav-users""",
    arguments=arguments,
    run=run,
    logs_itself=True,
)
