"""What every command's arguments are built from: the parser class whose errors are one
line, and the flags declared once in ``memfs.options``.  Stdlib only, as every command
module's top level: ``memfs --help`` loads nothing else."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, NoReturn

from memfs.errors import EXIT_USAGE
from memfs.options import OPTIONS, SettingError


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line naming the command and the fix."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see: {self.prog} --help)\n")


class Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def flag_type(parse: Any) -> Any:
    """An argparse ``type`` from one of ``memfs.options``'s parsers (its error, one line)."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except SettingError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def add_option(parser: argparse.ArgumentParser, name: str) -> None:
    """The flag of the setting ``name``, as ``memfs.options`` declares it."""
    option = next(o for o in OPTIONS if o.name == name)
    flag = option.cli_flag
    if option.repeated:
        flag = flag.rstrip("s")  # --read-scope, --scratch-pattern: one per flag
    env = f" [env: {', '.join(option.env)}]" if option.env else ""
    if option.switch:
        parser.add_argument(flag, dest=name, action="store_true", default=None,
                            help=option.help + env)  # fmt: skip
    elif option.repeated:
        parser.add_argument(flag, dest=name, action="append", metavar=option.metavar,
                            type=flag_type(option.parse), help=option.help + env)  # fmt: skip
    else:
        parser.add_argument(flag, dest=name, metavar=option.metavar,
                            type=flag_type(option.parse), help=option.help + env)  # fmt: skip


def settings_flag(parser: argparse.ArgumentParser, help_text: str) -> None:
    """``-o KEY=VALUE,...``: settings by ``-o`` name (``memfs.options``), repeatable."""
    parser.add_argument("-o", dest="mount_options", action="append", default=[],
                        metavar="KEY=VALUE,...", help=help_text)  # fmt: skip


def server_flags(parser: argparse.ArgumentParser, address: str, secret: str,
                 helps: tuple[str, str]) -> None:  # fmt: skip
    """A server's address (``HOST:PORT``) and its credentials file (only its owner may
    read it: ``memfs.serving``) flags, under these names, with these helps."""
    parser.add_argument(address, metavar="HOST:PORT", default=None, help=helps[0])
    parser.add_argument(secret, type=Path, metavar="FILE", help=helps[1])


def mount_flags(parser: argparse.ArgumentParser, *, skip: tuple[str, ...] = ()) -> None:
    """Every mount setting's flag (``memfs mount``, ``memfs install-unit``)."""
    for option in OPTIONS:
        if option.flag and option.name not in skip:
            add_option(parser, option.name)


def database_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that choose the database and the workspace (every workspace command)."""
    for option in OPTIONS:
        if option.database:
            add_option(parser, option.name)


def json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="machine-readable output")
