"""``memfs man``: the manual page (roff), made from the parser itself."""

from __future__ import annotations

import sys

from memfs.commands.arguments import Parser
from memfs.commands.base import Command, Invocation


def arguments(parser: Parser) -> None:
    """No arguments."""


def run(call: Invocation) -> int:
    from memfs.manual import manual

    sys.stdout.write(manual(call.parser))
    return 0


COMMAND = Command(
    name="man",
    summary="print the manual page (roff)",
    description="""
Generated from this parser.""",
    examples="""
memfs man | man -l -""",
    arguments=arguments,
    run=run,
)
