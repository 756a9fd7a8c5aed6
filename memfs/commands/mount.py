"""``memfs mount DIR``: serve a workspace on a directory."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from memfs.commands.arguments import Parser, mount_flags, settings_flag
from memfs.commands.base import Command, Invocation
from memfs.commands.common import check_embedded
from memfs.config import Settings
from memfs.errors import MountError


def arguments(parser: Parser) -> None:
    parser.add_argument("mountpoint", type=Path, help="an empty directory (created if missing)")
    parser.add_argument("-f", "--foreground", action="store_true",
                        help="stay in the foreground and log to stderr")  # fmt: skip
    settings_flag(parser, "memfs settings by -o name (user_id=…, read_only, …) and libfuse "
                  "mount options")  # fmt: skip
    mount_flags(parser)


def run(call: Invocation) -> int:
    """Mount; a mount point this command created is removed again if the mount fails, so
    a later ``echo > DIR/x.md`` cannot land on the local disk unnoticed."""
    settings = call.settings()
    requested = Path(call.args.mountpoint).expanduser().absolute()
    created = not requested.exists()
    code = 1
    try:
        code = _mount_on(call, settings)
        return code
    finally:
        if created and code != 0:
            from memfs.mountpoint import is_mounted

            if not is_mounted(requested):
                with contextlib.suppress(OSError):
                    requested.rmdir()  # only if still empty


def _mount_on(call: Invocation, settings: Settings) -> int:
    from memfs import logs
    from memfs.config import libsql_path
    from memfs.db import choose_database, file_read_only_reason
    from memfs.mountpoint import prepare_mountpoint

    args = call.args
    found = choose_database(settings)
    chosen = libsql_path(settings.database_url) if settings.database_url else None
    forced = file_read_only_reason(chosen) if chosen is not None else None
    if forced is not None:
        print(f"memfs: {forced}")
    if not settings.database_url:
        data = settings.pgdata.absolute()
        target = args.mountpoint.expanduser().absolute()
        if data == target or data.is_relative_to(target):
            raise MountError(
                f"mounting at {target} would hide the embedded database's folder {data} "
                "from every later command and mount: mount somewhere else (or move the "
                "data with --data-dir)"
            )
    mountpoint = prepare_mountpoint(args.mountpoint, allow_non_empty=settings.allow_non_empty)
    if found is not None:  # said once the mount point is usable (a refusal says only that)
        print(f"memfs: mounting IronClaw's memory in {found} (found where IronClaw keeps "
              "it; --database-url chooses another)")  # fmt: skip
    check_embedded(settings)
    if args.foreground:
        logs.configure(call.level, file=settings.log_file)
        from memfs.daemon import serve

        return serve(settings, mountpoint)
    from memfs.daemon import mount_background

    log_file = settings.log_file or logs.log_file_for(mountpoint)

    def note(line: str) -> None:
        sys.stderr.write(f"memfs: {line}\n")
        sys.stderr.flush()

    outcome = mount_background(settings, mountpoint, log_file, call.level, note=note)
    if outcome.error is not None:
        sys.stderr.write(f"memfs: {outcome.error} (log: {log_file})\n")
        return outcome.exit_code
    user = outcome.user or settings.user_id
    print(f"memfs: mounted workspace {user!r} at {mountpoint} (log: {log_file})")
    if outcome.documents == 0:
        print(
            "memfs: the workspace is empty: create files in it, `memfs import DIR` brings a "
            "Markdown tree in, `memfs seed` writes starter files"
        )
    return 0


COMMAND = Command(
    name="mount",
    summary="mount a workspace on a directory",
    description="""
Serves the workspace's documents as files until `memfs umount DIR`. Without -f it returns
once the mount is live. With no database configured it uses the embedded PostgreSQL in
--data-dir. Every flag can also be given as `-o key=value` (as in /etc/fstab) or as the
environment variable shown in brackets.""",
    examples="""
memfs mount ~/memory
memfs mount ~/memory --database-url postgresql://me@db/ironclaw --user-id alice
memfs mount ~/memory -o read_only,user_id=alice,allow_other
memfs mount ~/memory -f --log-level debug""",
    arguments=arguments,
    run=run,
    logs_itself=True,
)
