"""The ``memfs`` commands: one module each, holding its words, its arguments and its run
(``base.Command``), registered in ``COMMANDS`` in the order ``memfs --help`` lists them.

A command module imports only the stdlib and memfs's light modules at its top; the work
(the database, the daemon) is imported when the command runs, so ``memfs --help`` and
``--version`` stay fast.  "Tool" in memfs means an editor's tool folder only; what these
commands do without a mount lives in ``memfs.workspace_tasks``.
"""

from __future__ import annotations

from memfs.commands import (
    completion,
    daily_log,
    doctor,
    export,
    import_tree,
    init,
    install_helper,
    install_unit,
    man,
    migrate,
    mount,
    recover,
    reindex,
    restore,
    search,
    seed,
    serve,
    stats,
    status,
    sync,
    umount,
    undelete,
    versions,
)
from memfs.commands.base import Command, Invocation

COMMANDS: tuple[Command, ...] = tuple(
    module.COMMAND
    for module in (
        mount, umount, serve, stats, init, status, doctor, seed, reindex, export, import_tree,
        migrate, daily_log, versions, restore, undelete, sync, recover, search,
        install_unit, install_helper, completion, man,
    )
)  # fmt: skip
BY_NAME: dict[str, Command] = {command.name: command for command in COMMANDS}

__all__ = ["BY_NAME", "COMMANDS", "Command", "Invocation"]
