"""``memfs log TEXT``: an entry appended to today's daily log, as IronClaw appends it."""

from __future__ import annotations

from memfs.commands.arguments import Parser, database_flags, json_flag
from memfs.commands.base import Command, Invocation
from memfs.errors import EXIT_OK, EXIT_USAGE, CommandError


def arguments(parser: Parser) -> None:
    parser.add_argument("text", nargs="+", help="the entry (words are joined by spaces)")
    database_flags(parser)
    parser.add_argument("--tz-offset", type=int, default=None, metavar="MINUTES",
                        help="minutes east of UTC (default: local time)")  # fmt: skip
    json_flag(parser)


def run(call: Invocation) -> int:
    from memfs.workspace_tasks import Report, daily_log

    args = call.args
    text = " ".join(args.text)
    if not text.strip():  # IronClaw's own tool refuses blank content too
        raise CommandError(
            "log: the entry is empty; nothing appended: give the text, e.g. memfs log 'met Bob'",
            EXIT_USAGE,
        )
    path = daily_log(call.settings(), text, args.tz_offset)
    if args.json:
        Report("log", counts={"appended": 1}, items=[{"path": path}]).emit(True)
    else:
        print(f"memfs: appended to {path}")
    return EXIT_OK


COMMAND = Command(
    name="log",
    summary="append to today's daily log, as IronClaw does",
    description="""
Appends "[HH:MM:SS] TEXT" to daily/YYYY-MM-DD.md in local time.""",
    examples="""
memfs log deployed v2
memfs log --tz-offset 60 "standup notes" """,
    arguments=arguments,
    run=run,
)
