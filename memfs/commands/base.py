"""What a command is (``Command``: its words for ``--help`` and the manual, its arguments,
its run) and what a run is given (``Invocation``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass, field

from memfs.commands.arguments import Parser
from memfs.config import Settings


@dataclass
class Invocation:
    """One run of a command: its parsed arguments, the whole parser (the manual and the
    completion scripts are made from it) and the log level chosen."""

    args: argparse.Namespace
    parser: Parser
    level: str
    _settings: Settings | None = field(default=None, repr=False)

    def settings(self) -> Settings:
        """The environment, then ``-o`` options, then flags (worked out on first use:
        commands that talk to a running mount need none)."""
        if self._settings is None:
            from memfs.commands.common import settings_from

            self._settings = settings_from(self.args)
        return self._settings


@dataclass(frozen=True)
class Command:
    """One ``memfs`` command; its module holds all of it."""

    name: str
    #: One line for ``memfs --help`` (lower case, no full stop).
    summary: str
    #: The paragraph under ``memfs NAME --help`` and in the manual.
    description: str
    #: One example per line.
    examples: str
    arguments: Callable[[Parser], None]
    run: Callable[[Invocation], int]
    #: Sets up logging itself (``mount``: the daemon's format, its log file); every other
    #: command logs warnings to stderr in the command-line format.
    logs_itself: bool = False
