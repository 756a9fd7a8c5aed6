"""``memfs seed``: memfs's starter files where absent."""

from __future__ import annotations

from memfs.commands.arguments import Parser, database_flags, json_flag
from memfs.commands.base import Command, Invocation


def arguments(parser: Parser) -> None:
    database_flags(parser)
    json_flag(parser)


def run(call: Invocation) -> int:
    from memfs.workspace_tasks import seed

    report = seed(call.settings())
    if not call.args.json:
        print(
            "memfs: wrote memfs's own starter files where absent; IronClaw, if pointed at "
            "this database later, keeps them (it never replaces an existing file)"
        )
    return report.finish(call.args.json)


COMMAND = Command(
    name="seed",
    summary="write memfs's starter files where absent",
    description="""
Writes MEMORY.md, the identity files and a bootstrap note into an empty memfs workspace.
Refused on IronClaw's own database (IronClaw seeds its own).""",
    examples="""
memfs seed""",
    arguments=arguments,
    run=run,
)
