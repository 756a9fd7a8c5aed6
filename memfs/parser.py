"""The ``memfs`` argument parser: the top level, and each command's from its module
(``memfs.commands``).

Flags come from ``memfs.options`` (mount settings) so flags, ``-o`` keys and variables
agree; shell completion and the man page are generated from it.  Errors are one line naming the
command, with a suggestion for a mistyped flag.  Stdlib only.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from memfs.commands import COMMANDS
from memfs.commands.arguments import Formatter, Parser, flag_type
from memfs.errors import EXIT_USAGE, CommandError
from memfs.options import LOG_LEVELS, parse_level

PROG = "memfs"


class _Version(argparse.Action):
    """``--version``: worked out only when asked (it runs fusermount3 and postgres)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from memfs.versions import report

        sys.stdout.write(report() + "\n")  # stdout, as argparse's own version action
        parser.exit()


def build_parser() -> Parser:
    parser = Parser(
        prog=PROG,
        description="Mount an IronClaw agent's PostgreSQL memory as a directory, and work on "
        "that memory without a mount.",
        epilog="Run `memfs COMMAND --help` for a command's options and examples.\n"
        "Exit codes: 0 done, 1 something failed, 2 usage or setting error, 3 database "
        "unreachable or unusable, 4 mount point or FUSE unusable.",
        formatter_class=Formatter,
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="memfs's version and its parts' (pyfuse3, libfuse, psycopg, "
                        "the embedded PostgreSQL), then exit")  # fmt: skip
    level_help = (f"how much to log: {', '.join(LOG_LEVELS)} (default: info for mount, warning "
                  "for the other commands) [env: MEMFS_LOG_LEVEL]")  # fmt: skip
    parser.add_argument("--log-level", type=flag_type(parse_level), help=level_help)
    common = Parser(add_help=False)
    common.add_argument("--log-level", type=flag_type(parse_level), help=level_help,
                        default=argparse.SUPPRESS)  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=Parser)  # fmt: skip

    for command in COMMANDS:
        parser_of = sub.add_parser(
            command.name,
            help=command.summary,
            description=f"{command.summary[0].upper()}{command.summary[1:]}.\n\n"
            f"{command.description.strip()}",
            epilog="examples:\n"
            + "\n".join(f"  {line}" for line in command.examples.strip().splitlines()),
            formatter_class=Formatter,
            parents=[common],
        )
        command.arguments(parser_of)
    return parser


def _subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            chosen: argparse.ArgumentParser = action.choices[name]
            return chosen
    return parser


def parse(parser: Parser, argv: Sequence[str]) -> argparse.Namespace:
    """Parse; an unknown flag is reported by its own command, with a suggestion."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = _subparser(parser, getattr(args, "command", None))
        known = [s for a in command._actions for s in a.option_strings]
        flag = extras[0].split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        command.error(f"unrecognized argument {extras[0]!r}{hint}")
    return args


def mount_helper_argv(argv: Sequence[str]) -> list[str]:
    """mount(8)'s ``mount.fuse.memfs SOURCE DIR [-o opts] [-n -s -f -v] [-t type]`` as
    ``memfs mount DIR -o opts``."""
    positional: list[str] = []
    options: list[str] = []
    items = iter(argv)
    for item in items:
        if item == "-o":
            options.append(next(items, ""))
        elif item == "-t":
            next(items, None)
        elif item.startswith("-o"):
            options.append(item[2:])
        elif item in ("-n", "-s", "-f", "-v", "--"):
            continue
        else:
            positional.append(item)
    if len(positional) != 2:
        raise CommandError(
            "as a mount helper, memfs takes: SOURCE DIR [-o options]", exit_code=EXIT_USAGE
        )
    command = ["mount", positional[1]]
    for text in options:
        command += ["-o", text]
    return command
