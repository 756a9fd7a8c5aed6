"""``memfs reindex [PATH...]``: re-chunk documents as IronClaw's chunker does."""

from __future__ import annotations

from memfs.commands.arguments import Parser, database_flags, json_flag
from memfs.commands.base import Command, Invocation
from memfs.commands.common import workspace_path


def arguments(parser: Parser) -> None:
    parser.add_argument("paths", nargs="*", help="workspace paths (default: every document)")
    database_flags(parser)
    json_flag(parser)


def run(call: Invocation) -> int:
    from memfs.workspace_tasks import reindex

    paths = [workspace_path(p) for p in call.args.paths]
    return reindex(call.settings(), paths or None).finish(call.args.json)


COMMAND = Command(
    name="reindex",
    summary="re-chunk documents (all, or the given paths)",
    description="""
Rebuilds memory_chunks with IronClaw's chunker. Paths are workspace paths, or files
inside a mount of this workspace.""",
    examples="""
memfs reindex
memfs reindex MEMORY.md daily/2026-03-03.md
memfs reindex ~/memory/MEMORY.md""",
    arguments=arguments,
    run=run,
)
