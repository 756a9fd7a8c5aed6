"""The workspace commands' command-line side: arguments in, a report and an exit code out."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from memfs import tools
from memfs.config import Settings
from memfs.errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, CommandError
from memfs.mountpoint import containing_memfs_mount


def workspace_path(argument: str, cwd: Path | None = None) -> str:
    """A workspace path from what the user typed: ``MEMORY.md``, or a file inside a memfs
    mount (``~/memory/MEMORY.md``, or ``MEMORY.md`` typed inside the mount)."""
    candidate = Path(argument).expanduser()
    if not candidate.is_absolute():
        candidate = (cwd or Path(os.getcwd())) / candidate
    candidate = Path(os.path.normpath(candidate))
    mount = containing_memfs_mount(candidate)
    if mount is None or candidate == Path(mount.mountpoint):
        return argument
    return str(candidate.relative_to(mount.mountpoint))


def _export_target(target: Path) -> Path:
    """Where ``export`` may write: a folder (made if missing), never inside a memfs mount
    (the copy would become memory: every document twice)."""
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


def run_tool(args: argparse.Namespace, settings: Settings) -> int:
    """status, seed, reindex, export, import, versions, restore, log and recover."""
    command = args.command
    if command == "status":
        tools.print_status(tools.status(settings), args.json)
        return EXIT_OK
    if command == "log":
        text = " ".join(args.text)
        if not text.strip():  # IronClaw's own tool refuses blank content too
            raise CommandError(
                "log: the entry is empty; nothing appended: give the text, e.g. "
                "memfs log 'met Bob'",
                EXIT_USAGE,
            )
        path = tools.daily_log(settings, text, args.tz_offset)
        if args.json:
            report = tools.Report("log", counts={"appended": 1}, items=[{"path": path}])
            report.emit(True)
        else:
            print(f"memfs: appended to {path}")
        return EXIT_OK
    if command == "recover" and args.to is not None:
        report = tools.drain_mounts(settings, args.to)
        report.emit(args.json)
        return EXIT_FAILED if report.counts.get("failed") else EXIT_OK
    if command == "recover":
        action = "restore" if args.restore else ("discard" if args.discard else "list")
        report = tools.recover(settings, action, force=args.force)
        report.emit(args.json)
        left = report.counts.get("still_kept", 0) + report.counts.get("superseded_still_kept", 0)
        return EXIT_FAILED if left else EXIT_OK
    if command == "seed":
        report = tools.seed(settings)
        if not args.json:
            print(
                "memfs: wrote memfs's own starter files where absent; IronClaw, if pointed at "
                "this database later, keeps them (it never replaces an existing file)"
            )
    elif command == "doctor":
        from memfs.doctor import doctor

        report = doctor(settings, repair=args.repair)
    elif command == "reindex":
        paths = [workspace_path(p) for p in args.paths]
        report = tools.reindex(settings, paths or None)
    elif command == "export":
        report = tools.export_tree(settings, _export_target(args.directory.expanduser()),
                                   force=args.force, dry_run=args.dry_run)  # fmt: skip
    elif command == "versions":
        report = tools.list_versions(settings, workspace_path(args.path))
    elif command == "undelete":
        from memfs.undelete import list_deleted, undelete

        given = workspace_path(args.path) if args.path else None
        if args.list:
            report = list_deleted(settings, given)
        elif given is None:
            raise CommandError("undelete: give the path to put back (or --list)", EXIT_USAGE)
        else:
            report = undelete(settings, given, workspace_path(args.to) if args.to else None)
    elif command == "restore":
        report = tools.restore_version(settings, workspace_path(args.path), args.version)
    elif command == "import":
        source = args.directory.expanduser()
        if not source.is_dir():
            raise CommandError(f"{source} is not a directory to import from", EXIT_USAGE)
        report = tools.import_tree(settings, source, overwrite=args.overwrite,
                                   dry_run=args.dry_run)  # fmt: skip
    else:  # pragma: no cover - the parser allows no other command here
        sys.stderr.write(f"memfs: unknown command {command}\n")
        return EXIT_USAGE
    report.emit(args.json)
    return EXIT_FAILED if report.problems else EXIT_OK
