"""``memfs sync DIR``: a plain directory and the workspace kept in step, without FUSE."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memfs.commands.arguments import Parser, database_flags
from memfs.commands.base import Command, Invocation
from memfs.commands.common import check_embedded
from memfs.errors import EXIT_DATABASE, CommandError, MountError

if TYPE_CHECKING:
    import argparse

    from memfs.sync import SyncReport


def arguments(parser: Parser) -> None:
    parser.add_argument("directory", type=Path, help="a plain directory (created if missing)")
    database_flags(parser)
    parser.add_argument("--once", action="store_true", help="one pass, then exit")
    parser.add_argument(
        "--dry-run", action="store_true",
        help="one pass that only says what it would do (implies --once)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print each pass as JSON")


def run(call: Invocation) -> int:
    import contextlib
    import uuid

    from memfs import sync
    from memfs.db import open_database
    from memfs.mountpoint import containing_memfs_mount

    args = call.args
    settings = call.settings()
    directory = args.directory.expanduser().absolute()
    inside = containing_memfs_mount(directory.resolve() if directory.exists() else directory)
    if inside is not None:
        raise MountError(
            f"{directory} is inside the memfs mount {inside.mountpoint}: it already is the "
            "workspace; sync a plain directory instead"
        )
    check_embedded(settings)
    if not args.dry_run:
        directory.mkdir(parents=True, exist_ok=True)
    database = open_database(settings, read_only=args.dry_run)
    forced = database.read_only_reason()
    if forced is not None and not args.dry_run:
        database.close()
        raise CommandError(forced, EXIT_DATABASE)
    # Watching, the change feed skips this command's own writes by their origin tag.
    origin = None if args.once else uuid.uuid4().hex
    store = database.documents(settings, origin=origin)
    try:
        layout = database.layout
        bound_to = sync.binding(layout, store.scope, database.identity())
        # A dry run writes nothing, not even the lock: it only reads both sides.
        with contextlib.nullcontext() if args.dry_run else sync.only_sync_of(directory):
            if args.once or args.dry_run:
                syncer = sync.DirectorySync(store, directory, bound_to=bound_to,
                                            dry_run=args.dry_run)  # fmt: skip
                _show(args, syncer.run_once())
            else:
                sync.watch(
                    store, directory, database=database,
                    on_pass=lambda report: _show(args, report), bound_to=bound_to,
                )  # fmt: skip
    finally:
        database.close()
    return 0


def _show(args: argparse.Namespace, report: SyncReport) -> None:
    """One pass's report: a JSON line, or counts (and, in a dry run, what would change)."""
    import json

    if args.json:
        print(json.dumps(report.as_json(args.dry_run)), flush=True)
        return
    counts = ", ".join(f"{v} {k}" for k, v in report.counts().items()) or "in sync"
    print(f"memfs sync{' (dry run: nothing changed)' if args.dry_run else ''}: "
          f"{counts}", flush=True)  # fmt: skip
    if args.dry_run:
        for what, paths in report.__dict__.items():
            for path in paths if what != "skipped" else ():
                print(f"  would be {what.replace('_', ' ')}: {path}", flush=True)
    for line in report.conflicts:
        print(f"  conflict: {line} (the database's version is kept too)", flush=True)


COMMAND = Command(
    name="sync",
    summary="keep a plain directory and the workspace in step",
    description="""
Two-way sync for machines without FUSE. Continuous unless --once; Ctrl-C stops it. Not for
a directory inside a memfs mount (that is the workspace already).""",
    examples="""
memfs sync ~/agent-memory
memfs sync ~/agent-memory --dry-run
memfs sync ~/agent-memory --once --json""",
    arguments=arguments,
    run=run,
)
