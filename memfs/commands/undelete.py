"""``memfs undelete PATH``: a deleted document (or a folder's) put back."""

from __future__ import annotations

from memfs.commands.arguments import Parser, database_flags, json_flag
from memfs.commands.base import Command, Invocation
from memfs.commands.common import workspace_path
from memfs.errors import EXIT_USAGE, CommandError


def arguments(parser: Parser) -> None:
    parser.add_argument("path", nargs="?", help="a workspace path, or one inside a mount")
    parser.add_argument("--to", metavar="NEWPATH", help="put it back at another path")
    parser.add_argument("--list", action="store_true", help="list what is kept")
    database_flags(parser)
    json_flag(parser)


def run(call: Invocation) -> int:
    from memfs.undelete import list_deleted, undelete

    args = call.args
    settings = call.settings()
    given = workspace_path(args.path) if args.path else None
    if args.list:
        report = list_deleted(settings, given)
    elif given is None:
        raise CommandError("undelete: give the path to put back (or --list)", EXIT_USAGE)
    else:
        report = undelete(settings, given, workspace_path(args.to) if args.to else None)
    return report.finish(args.json)


COMMAND = Command(
    name="undelete",
    summary="put back a deleted document (or a folder's documents) memfs kept",
    description="""
What a mount deletes (rm, rm -rf, a move into .trash/), and on the legacy layout with
memfs's trigger (memfs init) what SQL deletes, is kept with its versions for 30 days.
This writes the last content back as a new document at its path (or --to another); a
path that holds a document now is refused. A folder's path puts back every kept document
below it. --list shows what is kept.""",
    examples="""
memfs undelete projects/alpha/notes.md
memfs undelete ~/memory/projects/alpha          # a folder removed with rm -rf
memfs undelete notes.md --to notes-old.md
memfs undelete --list""",
    arguments=arguments,
    run=run,
)
