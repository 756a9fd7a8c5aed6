"""The ``memfs`` command line: the parser, the chosen command's run (``memfs.commands``), one
error line per failure.

Every command's work lives elsewhere and is imported when the command runs, so ``memfs
--version`` and ``--help`` load nothing but the stdlib.  Errors the user can act on are
``CommandError``s (one line, an exit code from ``memfs.errors``); anything else is reported
as an internal error in one line, its traceback logged at debug level.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from memfs.commands import BY_NAME, Invocation
from memfs.commands.arguments import Parser
from memfs.errors import CommandError
from memfs.failures import describe_failure
from memfs.options import SettingError, parse_level
from memfs.parser import build_parser, mount_helper_argv, parse
from memfs.private import PASSWORD_WARNING, PRIVATE_UMASK, hide_passwords

log = logging.getLogger("memfs")


def main(argv: Sequence[str] | None = None) -> int:
    as_helper = argv is None and Path(sys.argv[0]).name.startswith("mount.")
    argv = list(sys.argv[1:] if argv is None else argv)
    level = os.environ.get("MEMFS_LOG_LEVEL", "")
    os.umask(PRIVATE_UMASK)  # logs, recovery copies, pid files, exports: the owner's alone
    if hide_passwords(argv):
        sys.stderr.write(PASSWORD_WARNING + "\n")
    try:
        if as_helper:
            argv = mount_helper_argv(argv)
        parser = build_parser()
        args = parse(parser, argv)
        # A mount logs its progress; a command speaks only when something is wrong.
        default = "info" if args.command == "mount" else "warning"
        try:
            level = getattr(args, "log_level", None) or parse_level(level or default)
        except SettingError as exc:
            raise SettingError(f"MEMFS_LOG_LEVEL={level!r}: {exc}") from None
        return _run(parser, args, level)
    except BrokenPipeError:  # `memfs status | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (Exception, KeyboardInterrupt) as exc:
        code, line = describe_failure(exc)
        sys.stderr.write(f"memfs: {line}\n")
        if not isinstance(exc, (CommandError, SettingError, KeyboardInterrupt)):
            log.debug("details", exc_info=True)
        return code


def _run(parser: Parser, args: argparse.Namespace, level: str) -> int:
    command = BY_NAME[args.command]
    if not command.logs_itself:
        from memfs import logs

        logs.configure(level, daemon_format=False)
    return command.run(Invocation(args, parser, level))


if __name__ == "__main__":
    sys.exit(main())
