"""``memfs doctor [--repair]``: a workspace's health, and its mending."""

from __future__ import annotations

from memfs.commands.arguments import Parser, database_flags, json_flag
from memfs.commands.base import Command, Invocation


def arguments(parser: Parser) -> None:
    database_flags(parser)
    parser.add_argument("--repair", action="store_true", help="mend what can be mended")
    json_flag(parser)


def run(call: Invocation) -> int:
    from memfs.doctor import doctor

    return doctor(call.settings(), repair=call.args.repair).finish(call.args.json)


COMMAND = Command(
    name="doctor",
    summary="check a workspace's health; mend it with --repair",
    description="""
Checks memfs's schema, the change-feed trigger, pgvector, invalid indexes, duplicated
paths, chunks that are not IronClaw's chunker's of their content, rows about documents
that are gone, waiting work, the embedded server, stale pid files and the recovery area,
and says what to do about each problem (one line each on stderr; exit 1 while any is
left). Read-only unless --repair, which mends what it can without deleting anything anyone
wrote: duplicates get names of their own, chunks are rebuilt, orphan rows and dead
daemons' pid files go.""",
    examples="""
memfs doctor
memfs doctor --repair
memfs doctor --json""",
    arguments=arguments,
    run=run,
)
