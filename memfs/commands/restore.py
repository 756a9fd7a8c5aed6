"""``memfs restore PATH N``: a kept version put back as the document's content."""

from __future__ import annotations

from memfs.commands.arguments import Parser, database_flags, flag_type, json_flag
from memfs.commands.base import Command, Invocation
from memfs.commands.common import version_number, workspace_path


def arguments(parser: Parser) -> None:
    parser.add_argument("path", help="the document's workspace path")
    parser.add_argument("version", type=flag_type(version_number), help="the version number")
    database_flags(parser)
    json_flag(parser)


def run(call: Invocation) -> int:
    from memfs.workspace_tasks import restore_version

    args = call.args
    report = restore_version(call.settings(), workspace_path(args.path), args.version)
    return report.finish(args.json)


COMMAND = Command(
    name="restore",
    summary="put a kept version back as the document's content",
    description="""
An ordinary save of that version's content: the content it replaces is kept as a version
in turn (where the document keeps versions), so a restore can itself be undone.""",
    examples="""
memfs restore MEMORY.md 3""",
    arguments=arguments,
    run=run,
)
