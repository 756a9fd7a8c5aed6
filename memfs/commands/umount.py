"""``memfs umount DIR``: commit open files and unmount."""

from __future__ import annotations

from pathlib import Path

from memfs.commands.arguments import Parser
from memfs.commands.base import Command, Invocation
from memfs.config import Settings
from memfs.errors import MountError


def arguments(parser: Parser) -> None:
    parser.add_argument("mountpoint", type=Path, help="a directory memfs has mounted")
    parser.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="how long to wait for the daemon (default 60)")  # fmt: skip
    parser.add_argument("--force", action="store_true",
                        help="unmount even with files in the daemon's memory only (the daemon "
                        "keeps them, alive, until they are saved or kept)")  # fmt: skip
    parser.add_argument("--lazy", action="store_true",
                        help="detach now even if a process is still inside (its working "
                        "directory or an open file); the mount ends when they let go")  # fmt: skip


def run(call: Invocation) -> int:
    from memfs.mountpoint import busy_users, mount_at, pidfile_for, resolved_mountpoint
    from memfs.processes import process_running

    args = call.args
    settings = Settings.from_env()
    mountpoint = resolved_mountpoint(args.mountpoint)
    entry = mount_at(mountpoint)
    if entry is None:  # said at once, before loading the daemon's modules
        try:
            pidfile = pidfile_for(settings.runtime_dir, mountpoint)
            lingering = process_running(int(pidfile.read_text(encoding="utf-8").split()[0]))
        except (OSError, ValueError, IndexError):
            lingering = False
        if not lingering:
            raise MountError(f"{mountpoint} is not mounted")
    if entry is not None and entry.fstype == "fuse.memfs" and not args.lazy:
        busy = busy_users(mountpoint)
        if busy:
            raise MountError(
                f"{mountpoint} is busy: {'; '.join(busy[:5])}"
                f"{f' and {len(busy) - 5} more' if len(busy) > 5 else ''}; leave it (cd "
                "elsewhere, close the files) and try again, or `memfs umount --lazy` detaches "
                "it now and ends it when they let go"
            )
    from memfs.daemon import unmount

    return unmount(settings, mountpoint, timeout=args.timeout, force=args.force,
                   lazy=args.lazy)  # fmt: skip


COMMAND = Command(
    name="umount",
    summary="commit open files and unmount",
    description="""
Asks the daemon to commit every file still open and unmount, and waits for it. Exits 1,
naming the files, if some could not be saved (they are kept for `memfs recover`). Refuses
(exit 1, naming them) while some files are in the daemon's memory only, neither saved nor
kept on disk: `memfs recover --to DIR` writes them to a folder; --force unmounts anyway and
the daemon stays alive until they are saved or kept. Refuses (exit 4, naming them) while
a process works inside the mount (a shell's working directory, an open file), which would
otherwise be left in a detached directory: --lazy detaches anyway.""",
    examples="""
memfs umount ~/memory
memfs umount --lazy ~/memory
memfs umount --force ~/memory""",
    arguments=arguments,
    run=run,
)
