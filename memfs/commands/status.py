"""``memfs status [MNT]``: mounts, database, documents and settings; or a mount's report."""

from __future__ import annotations

import sys
from pathlib import Path

from memfs.commands.arguments import Parser, database_flags, json_flag
from memfs.commands.base import Command, Invocation
from memfs.commands.common import ask_mount
from memfs.errors import EXIT_OK, EXIT_USAGE, MountError


def arguments(parser: Parser) -> None:
    database_flags(parser)
    parser.add_argument("mountpoint", nargs="?", type=Path, metavar="MNT",
                        help="a mount point: its daemon's report (as MNT/.status)")  # fmt: skip
    json_flag(parser)


def run(call: Invocation) -> int:
    if call.args.mountpoint is not None:
        return _mount_report(call)
    from memfs import workspace_tasks

    report = workspace_tasks.status(call.settings())
    workspace_tasks.print_status(report, call.args.json)
    refused = report.get("settings", {}).get("error")
    if refused is not None:  # IronClaw would not start with it: neither do mount nor search
        sys.stderr.write(f"memfs: {refused['value']} (a mount and a search stop here)\n")
        return EXIT_USAGE
    return EXIT_OK


def _mount_report(call: Invocation) -> int:
    """``memfs status MNT``: the daemon's report, as ``MNT/.status`` shows it."""
    from memfs.mount_status import render_json, render_text

    args = call.args
    report = ask_mount(args.mountpoint, {"op": "report"}).get("report")
    if not isinstance(report, dict):
        raise MountError(
            f"no report from {args.mountpoint}: not a memfs mount of this user, or its "
            "daemon predates `memfs status MNT`"
        )
    sys.stdout.write(render_json(report) if args.json else render_text(report))
    return 0


COMMAND = Command(
    name="status",
    summary="show mounts, database, documents and settings",
    description="""
Read-only: never creates a database, a table or a file. Shows this database's mounts,
its schema, the workspace's counts and where each search/embedding setting came from.
Given a mount point, shows what its daemon reports instead, as MNT/.status does: the
server's round trip, how other writers are watched, files not saved yet and why, queued
changes, chunks and embeddings waiting, the recovery area and the live statistics.""",
    examples="""
memfs status
memfs status ~/memory
memfs status --json --user-id alice""",
    arguments=arguments,
    run=run,
)
