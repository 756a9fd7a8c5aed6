"""``memfs import DIR``: a Markdown tree read into the workspace."""

from __future__ import annotations

from pathlib import Path

from memfs.commands.arguments import Parser, database_flags, json_flag
from memfs.commands.base import Command, Invocation
from memfs.errors import EXIT_USAGE, CommandError


def arguments(parser: Parser) -> None:
    parser.add_argument("directory", type=Path, help="the tree to read")
    database_flags(parser)
    parser.add_argument("--overwrite", action="store_true", help="replace existing documents")
    parser.add_argument("--dry-run", action="store_true",
                        help="list what would be imported; write nothing")  # fmt: skip
    json_flag(parser)


def run(call: Invocation) -> int:
    from memfs.workspace_tasks import import_tree

    args = call.args
    source = args.directory.expanduser()
    if not source.is_dir():
        raise CommandError(f"{source} is not a directory to import from", EXIT_USAGE)
    report = import_tree(call.settings(), source, overwrite=args.overwrite,
                         dry_run=args.dry_run)  # fmt: skip
    return report.finish(args.json)


COMMAND = Command(
    name="import",
    summary="read a Markdown tree into the workspace",
    description="""
Each UTF-8 file becomes a document (one transaction each, IronClaw's write rules). Paths
that exist are skipped unless --overwrite; scratch names are skipped. Exits 1 if some files
could not be read or are not text; they are listed on stderr.""",
    examples="""
memfs import ~/notes --dry-run
memfs import ~/notes
memfs import ~/notes --overwrite --json""",
    arguments=arguments,
    run=run,
)
