"""``memfs install-unit NAME DIR``: a systemd user unit for a mount profile."""

from __future__ import annotations

import sys
from pathlib import Path

from memfs.commands.arguments import Parser, mount_flags
from memfs.commands.base import Command, Invocation
from memfs.commands.common import check_urls, command_line_values
from memfs.errors import EXIT_FAILED
from memfs.options import SettingError


def arguments(parser: Parser) -> None:
    parser.add_argument("name", help="profile name (the unit is memfs@NAME)")
    parser.add_argument("mountpoint", type=Path, help="where the profile mounts")
    parser.add_argument("-o", dest="mount_options", action="append", default=[],
                        metavar="KEY=VALUE,...",
                        help="mount settings, as for memfs mount")  # fmt: skip
    mount_flags(parser, skip=("log_file",))
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                        help="more variables for the profile "
                        "(e.g. EMBEDDING_ENABLED=true)")  # fmt: skip
    parser.add_argument("--no-enable", action="store_true", help="write the files only")


def run(call: Invocation) -> int:
    from memfs.config import default_config_dir
    from memfs.options import environment_lines
    from memfs.systemd import install_unit

    args = call.args
    values = command_line_values(args)
    check_urls(values.get("database_url"), values.get("listen_url"))
    lines = environment_lines(values)
    for item in args.env:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise SettingError(f"--env takes KEY=VALUE, not {item!r}")
        lines.append(item)
    result = install_unit(
        args.name, args.mountpoint.expanduser().absolute(), config_home=default_config_dir(),
        lines=lines, enable=not args.no_enable,
    )  # fmt: skip
    print(f"memfs: wrote {result.unit} and {result.env_file} (mode 0600)")
    if result.enable_error:
        sys.stderr.write(
            f"memfs: could not enable memfs@{args.name}: {result.enable_error}; once a user "
            f"systemd runs, start it with: systemctl --user enable --now memfs@{args.name}\n"
        )
        return EXIT_FAILED
    if args.no_enable:
        print(f"memfs: start it with: systemctl --user enable --now memfs@{args.name}")
    return 0


COMMAND = Command(
    name="install-unit",
    summary="install a systemd user unit for a profile",
    description="""
Writes ~/.config/systemd/user/memfs@.service and ~/.config/memfs/NAME.env (mode 0600: every
setting, secrets included, stays off the command line), then enables and starts
memfs@NAME.""",
    examples="""
memfs install-unit notes ~/memory --user-id alice --env EMBEDDING_ENABLED=true
memfs install-unit notes ~/memory -o read_only --no-enable""",
    arguments=arguments,
    run=run,
)
