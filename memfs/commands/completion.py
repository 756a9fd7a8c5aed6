"""``memfs completion SHELL``: a completion script made from the parser itself."""

from __future__ import annotations

import sys

from memfs.commands.arguments import Parser
from memfs.commands.base import Command, Invocation


def arguments(parser: Parser) -> None:
    parser.add_argument("shell", choices=["bash", "zsh", "fish"], help="bash, zsh or fish")
    parser.add_argument("--install", action="store_true",
                        help="write it where the shell looks (bash-completion's, "
                        "~/.zfunc, fish's folder), making the folders, instead of "
                        "printing it")  # fmt: skip


def run(call: Invocation) -> int:
    from memfs.manual import completion, install_completion

    if call.args.install:
        print(f"memfs: {install_completion(call.parser, call.args.shell)}")
    else:
        sys.stdout.write(completion(call.parser, call.args.shell))
    return 0


COMMAND = Command(
    name="completion",
    summary="print a shell completion script",
    description="""
Generated from this parser, so it always matches the installed memfs.""",
    examples="""
memfs completion bash --install
memfs completion fish --install
memfs completion zsh > ~/.zfunc/_memfs""",
    arguments=arguments,
    run=run,
)
