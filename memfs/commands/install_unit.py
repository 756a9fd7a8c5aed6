"""``memfs install-unit NAME DIR``: a systemd user unit for a mount profile, or with
``--serve webdav|mcp`` for a server profile (``memfs serve``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from memfs.commands.arguments import Parser, mount_flags, server_flags, settings_flag
from memfs.commands.base import Command, Invocation
from memfs.commands.common import check_urls, command_line_values
from memfs.commands.serve import SERVE_VARIABLES
from memfs.errors import EXIT_FAILED, EXIT_USAGE, CommandError
from memfs.options import SettingError


def arguments(parser: Parser) -> None:
    parser.add_argument("name", help="profile name (the unit is memfs@NAME)")
    parser.add_argument("mountpoint", type=Path, nargs="?",
                        help="where the profile mounts (not with --serve)")  # fmt: skip
    parser.add_argument("--serve", choices=("webdav", "mcp"),
                        help="a server profile instead of a mount: memfs-serve@NAME runs "
                        "memfs serve webdav, or memfs serve mcp over HTTP")  # fmt: skip
    server_flags(parser, "--listen", "--auth", (
        "--serve: where it listens (webdav's default 127.0.0.1:8765; mcp needs it)",
        "--serve: webdav's user:password file, or mcp's bearer token file (needed for any "
        "address but loopback)"))  # fmt: skip
    settings_flag(parser, "mount settings, as for memfs mount")
    mount_flags(parser, skip=("log_file",))
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="more variables for the profile "
                        "(e.g. EMBEDDING_ENABLED=true)")  # fmt: skip
    parser.add_argument("--no-enable", action="store_true", help="write the files only")


def run(call: Invocation) -> int:
    from memfs.config import default_config_dir
    from memfs.options import environment_lines
    from memfs.systemd import SERVE_UNIT_NAME, UNIT_NAME, install_unit

    args = call.args
    values = command_line_values(args)
    check_urls(values.get("database_url"), values.get("listen_url"))
    lines = _front_lines(args) + environment_lines(values)
    for item in args.env:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise SettingError(f"--env takes KEY=VALUE, not {item!r}")
        lines.append(item)
    template = SERVE_UNIT_NAME if args.serve else UNIT_NAME
    unit = template.replace("@.service", f"@{args.name}")
    result = install_unit(args.name, lines, config_home=default_config_dir(),
                          template=template, enable=not args.no_enable)  # fmt: skip
    print(f"memfs: wrote {result.unit} and {result.env_file} (mode 0600)")
    if result.enable_error:
        sys.stderr.write(
            f"memfs: could not enable {unit}: {result.enable_error}; once a user "
            f"systemd runs, start it with: systemctl --user enable --now {unit}\n"
        )
        return EXIT_FAILED
    if args.no_enable:
        print(f"memfs: start it with: systemctl --user enable --now {unit}")
    return 0


def _front_lines(args: argparse.Namespace) -> list[str]:
    """The profile's front: its mount point, or the server ``memfs serve`` runs (the
    variables it reads its ``--listen``/``--auth`` or ``--http``/``--token-file`` from)."""
    if args.serve is None:
        if args.mountpoint is None:
            raise CommandError("install-unit NAME DIR: where the profile mounts (or "
                               "--serve webdav|mcp for a server)", EXIT_USAGE)  # fmt: skip
        for flag in ("listen", "auth"):
            if getattr(args, flag) is not None:
                raise CommandError(f"--{flag} is for --serve profiles", EXIT_USAGE)
        return [f"MEMFS_MOUNTPOINT={args.mountpoint.expanduser().absolute()}"]
    if args.mountpoint is not None:
        raise CommandError(f"--serve {args.serve} mounts nothing: no DIR "
                           f"(got {args.mountpoint})", EXIT_USAGE)  # fmt: skip
    if args.serve == "mcp" and args.listen is None:
        raise CommandError("--serve mcp needs --listen HOST:PORT (an MCP host starts "
                           "memfs serve mcp on stdio itself)", EXIT_USAGE)  # fmt: skip
    from memfs.front_checks import parse_listen

    where, auth = SERVE_VARIABLES[args.serve]
    lines = [f"MEMFS_FRONT={args.serve}"]
    if args.listen is not None:
        parse_listen(args.listen)  # a mistake is said now, not at the unit's start
        lines.append(f"{where}={args.listen}")
    if args.auth is not None:
        lines.append(f"{auth}={args.auth.expanduser().absolute()}")
    return lines


COMMAND = Command(
    name="install-unit",
    summary="install a systemd user unit for a profile",
    description="""
Writes ~/.config/systemd/user/memfs@.service and ~/.config/memfs/NAME.env (mode 0600: every
setting, secrets included, stays off the command line), then enables and starts
memfs@NAME. With --serve webdav or --serve mcp it writes memfs-serve@.service instead, a
server profile that runs `memfs serve` (MCP over HTTP) with the same settings.""",
    examples="""
memfs install-unit notes ~/memory --user-id alice --env EMBEDDING_ENABLED=true
memfs install-unit notes ~/memory -o read_only --no-enable
memfs install-unit finder --serve webdav --user-id alice
memfs install-unit agents --serve mcp --listen 127.0.0.1:8766""",
    arguments=arguments,
    run=run,
)
