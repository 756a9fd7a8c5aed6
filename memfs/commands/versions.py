"""``memfs versions PATH``: the versions IronClaw keeps of a document."""

from __future__ import annotations

from memfs.commands.arguments import Parser, database_flags, json_flag
from memfs.commands.base import Command, Invocation
from memfs.commands.common import workspace_path


def arguments(parser: Parser) -> None:
    parser.add_argument("path", help="the document's workspace path")
    database_flags(parser)
    json_flag(parser)


def run(call: Invocation) -> int:
    from memfs.workspace_tasks import list_versions

    report = list_versions(call.settings(), workspace_path(call.args.path))
    return report.finish(call.args.json)


COMMAND = Command(
    name="versions",
    summary="list the versions IronClaw keeps of a document",
    description="""
Oldest first: number, time (UTC), who wrote it, size; then the current content. The same
versions a mount shows under .versions/PATH/. PATH may be a file inside a mount.""",
    examples="""
memfs versions MEMORY.md
memfs versions ~/memory/daily/2026-03-03.md --json""",
    arguments=arguments,
    run=run,
)
