"""``memfs recover``: changes a mount could not save, listed, restored or discarded."""

from __future__ import annotations

from pathlib import Path

from memfs.commands.arguments import Parser, database_flags, json_flag
from memfs.commands.base import Command, Invocation
from memfs.errors import EXIT_FAILED, EXIT_OK


def arguments(parser: Parser) -> None:
    database_flags(parser)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--restore", action="store_true", help="save the kept changes")
    what.add_argument("--discard", action="store_true", help="delete the kept changes")
    what.add_argument("--to", type=Path, metavar="DIR",
                      help="write what running mounts of the workspace hold in memory only "
                      "(unsaved and not kept) into DIR")  # fmt: skip
    parser.add_argument("--force", action="store_true",
                        help="with --restore: also restore copies of documents saved again "
                        "since")  # fmt: skip
    json_flag(parser)


def run(call: Invocation) -> int:
    from memfs.workspace_tasks import drain_mounts, recover

    args = call.args
    settings = call.settings()
    if args.to is not None:
        report = drain_mounts(settings, args.to)
        report.emit(args.json)
        return EXIT_FAILED if report.counts.get("failed") else EXIT_OK
    action = "restore" if args.restore else ("discard" if args.discard else "list")
    report = recover(settings, action, force=args.force)
    report.emit(args.json)
    left = report.counts.get("still_kept", 0) + report.counts.get("superseded_still_kept", 0)
    return EXIT_FAILED if left else EXIT_OK


COMMAND = Command(
    name="recover",
    summary="list, restore or discard changes a mount could not save",
    description="""
Changes a mount could not commit (database down, full or refusing at unmount, or a daemon
killed while retrying) are kept on local disk per workspace. Without options this lists
them; --restore saves them as ordinary writes (the content they replace becomes a
version); --discard deletes them.""",
    examples="""
memfs recover
memfs recover --restore
memfs recover --to ~/unsaved""",
    arguments=arguments,
    run=run,
)
