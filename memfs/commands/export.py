"""``memfs export DIR``: the workspace written out as a Markdown tree."""

from __future__ import annotations

import os
from pathlib import Path

from memfs.commands.arguments import Parser, database_flags, json_flag
from memfs.commands.base import Command, Invocation
from memfs.errors import EXIT_USAGE, CommandError


def arguments(parser: Parser) -> None:
    parser.add_argument("directory", type=Path, help="where to write (created if missing)")
    database_flags(parser)
    parser.add_argument("--force", action="store_true",
                        help="overwrite files changed since the last export")  # fmt: skip
    parser.add_argument("--dry-run", action="store_true",
                        help="list what would be written; write nothing")  # fmt: skip
    json_flag(parser)


def run(call: Invocation) -> int:
    from memfs.workspace_tasks import export_tree

    args = call.args
    target = export_target(args.directory.expanduser())
    report = export_tree(call.settings(), target, force=args.force, dry_run=args.dry_run)
    return report.finish(args.json)


def export_target(target: Path) -> Path:
    """Where ``export`` may write: a folder (made if missing), never inside a memfs mount
    (the copy would become memory: every document twice)."""
    from memfs.mountpoint import containing_memfs_mount

    if target.exists() and not target.is_dir():
        raise CommandError(
            f"export: {target} is a file, not a folder to export into: give a folder "
            "(made if missing)", EXIT_USAGE,
        )  # fmt: skip
    resolved = Path(os.path.realpath(target))
    mount = containing_memfs_mount(resolved)
    if mount is not None:
        raise CommandError(
            f"export: {target} is inside the memfs mount at {mount.mountpoint}, where the "
            "copy would become memory; export to a folder outside it", EXIT_USAGE,
        )  # fmt: skip
    return target


COMMAND = Command(
    name="export",
    summary="write the workspace out as a Markdown tree",
    description="""
Writes every document under DIRECTORY with its mtime. A file there that changed since the
last export into DIRECTORY (or that no export wrote) is kept and listed, and the exit code
is 1, unless --force. Never into a memfs mount.""",
    examples="""
memfs export ~/memory-backup
memfs export ~/memory-backup --dry-run""",
    arguments=arguments,
    run=run,
)
