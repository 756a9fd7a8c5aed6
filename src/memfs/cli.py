"""The ``memfs`` command line."""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
from pathlib import Path
from uuid import UUID

import psycopg

from memfs import __version__
from memfs.config import Settings, default_log_dir
from memfs.daemon import MountError, mount_background, prepare_mountpoint, serve, unmount
from memfs.db import Scope, open_database
from memfs.embeddings.config import EmbeddingConfigError
from memfs.errors import Refused, SchemaError
from memfs.search.config import SearchConfigError

log = logging.getLogger("memfs")


def _add_database_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        help="PostgreSQL URL (default: $DATABASE_URL, else the embedded server)",
    )
    parser.add_argument(
        "--user-id", help="workspace owner (default: $IRONCLAW_OWNER_ID, else 'default')"
    )
    parser.add_argument("--agent-id", type=UUID, help="agent UUID (default: none, as IronClaw)")
    parser.add_argument(
        "--data-dir", type=Path, help="where the embedded PostgreSQL keeps its data"
    )


def _settings(args: argparse.Namespace) -> Settings:
    settings = Settings.from_env()
    if getattr(args, "database_url", None):
        settings.database_url = args.database_url
    if getattr(args, "user_id", None):
        settings.user_id = args.user_id.strip()
    if getattr(args, "agent_id", None):
        settings.agent_id = args.agent_id
    if getattr(args, "data_dir", None):
        settings.data_dir = args.data_dir
    if getattr(args, "attr_timeout", None) is not None:
        settings.attr_timeout = args.attr_timeout
    if getattr(args, "allow_other", False):
        settings.allow_other = True
    if getattr(args, "debug_fuse", False):
        settings.debug_fuse = True
    if getattr(args, "no_trigger", False):
        settings.no_trigger = True
    if getattr(args, "read_only", False):
        settings.read_only = True
    for scope in getattr(args, "read_scope", None) or []:
        if scope not in settings.read_scopes:
            settings.read_scopes.append(scope)
    for scope in settings.read_scopes:
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,128}", scope):
            raise MountError(f"read scope {scope!r}: use 1-128 of A-Z a-z 0-9 _ -")
        if scope == settings.user_id:
            raise MountError(f"read scope {scope!r} is the mount's own workspace")
    if getattr(args, "scratch_pattern", None):
        settings.scratch_patterns = settings.scratch_patterns + list(args.scratch_pattern)
    return settings


def _setup_logging(level: str, stream: object = None) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=stream or sys.stderr,  # type: ignore[arg-type]
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memfs", description="Mount an IronClaw agent's memory as a directory."
    )
    parser.add_argument("--version", action="version", version=f"memfs {__version__}")
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )
    sub = parser.add_subparsers(dest="command", required=True)

    mount = sub.add_parser("mount", help="mount a workspace")
    mount.add_argument("mountpoint", type=Path)
    _add_database_flags(mount)
    mount.add_argument("-f", "--foreground", action="store_true", help="stay in the foreground")
    mount.add_argument(
        "--log-file", type=Path, help="log file (default: the state dir; stderr with -f)"
    )
    mount.add_argument("--attr-timeout", type=float, help="kernel attribute cache, seconds")
    mount.add_argument("--allow-other", action="store_true", help="let other users in")
    mount.add_argument("--debug-fuse", action="store_true", help="libfuse protocol trace")
    mount.add_argument(
        "--no-trigger", action="store_true", help="poll for other writers instead of LISTEN"
    )
    mount.add_argument("--read-only", action="store_true", help="refuse every change (EROFS)")
    mount.add_argument(
        "--read-scope", action="append", default=[], metavar="USER_ID",
        help="show USER_ID's workspace read-only under .scopes/USER_ID (repeatable)",
    )  # fmt: skip
    mount.add_argument(
        "--scratch-pattern",
        action="append",
        default=[],
        metavar="REGEX",
        help="extra name pattern kept out of the database (repeatable; see SEMANTICS.md)",
    )

    umount = sub.add_parser("umount", help="commit and unmount")
    umount.add_argument("mountpoint", type=Path)
    umount.add_argument("--timeout", type=float, default=60.0)

    init = sub.add_parser(
        "init", help="create the schema (IronClaw's tables if missing) and the change feed"
    )
    _add_database_flags(init)
    init.add_argument("--no-trigger", action="store_true", help="do not install the trigger")

    unit = sub.add_parser("install-unit", help="install a systemd user unit for a profile")
    unit.add_argument("name", help="profile name (the unit is memfs@NAME)")
    unit.add_argument("mountpoint", type=Path)
    _add_database_flags(unit)
    unit.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE",
        help="more settings for the profile's environment file (e.g. EMBEDDING_ENABLED=true)",
    )  # fmt: skip
    unit.add_argument("--no-enable", action="store_true", help="write files only")

    status = sub.add_parser("status", help="mounts, database, documents, chunks, embeddings")
    _add_database_flags(status)
    status.add_argument("--json", action="store_true")

    seed = sub.add_parser("seed", help="create IronClaw's identity files where absent")
    _add_database_flags(seed)
    seed.add_argument("--json", action="store_true")

    reindex = sub.add_parser("reindex", help="re-chunk documents (all, or the given paths)")
    reindex.add_argument("paths", nargs="*", help="workspace paths (default: every document)")
    _add_database_flags(reindex)
    reindex.add_argument("--json", action="store_true")

    export = sub.add_parser("export", help="write the workspace out as a Markdown tree")
    export.add_argument("directory", type=Path)
    _add_database_flags(export)
    export.add_argument("--json", action="store_true")

    imp = sub.add_parser("import", help="read a Markdown tree into the workspace")
    imp.add_argument("directory", type=Path)
    _add_database_flags(imp)
    imp.add_argument("--overwrite", action="store_true", help="replace existing documents")
    imp.add_argument("--json", action="store_true")

    daily = sub.add_parser("log", help="append to today's daily log, as IronClaw does")
    daily.add_argument("text", nargs="+")
    _add_database_flags(daily)
    daily.add_argument(
        "--tz-offset", type=int, default=None, help="minutes east of UTC (default: local time)"
    )

    sync = sub.add_parser("sync", help="two-way sync of a plain directory with the workspace")
    sync.add_argument("directory", type=Path)
    _add_database_flags(sync)
    sync.add_argument("--once", action="store_true", help="one pass, then exit")
    sync.add_argument("--json", action="store_true", help="print each pass as JSON")

    recover = sub.add_parser(
        "recover",
        help="list, restore or discard changes a mount could not save",
        description="Changes a mount could not commit (database down, full or refusing at "
        "unmount, or a daemon killed while retrying) are kept on local disk per workspace. "
        "Without options this lists them; --restore saves them as ordinary writes (the "
        "content they replace becomes a version); --discard deletes them.",
    )
    _add_database_flags(recover)
    what = recover.add_mutually_exclusive_group()
    what.add_argument("--restore", action="store_true", help="save the kept changes")
    what.add_argument("--discard", action="store_true", help="delete the kept changes")
    recover.add_argument(
        "--force",
        action="store_true",
        help="with --restore: also restore copies of documents saved again since",
    )
    recover.add_argument("--json", action="store_true")

    search = sub.add_parser("search", help="search the workspace (IronClaw's hybrid ranking)")
    search.add_argument("query", nargs="+", help="the query (words are joined by spaces)")
    _add_database_flags(search)
    search.add_argument("--limit", type=int, default=10, help="results (default 10)")
    search.add_argument("--json", action="store_true", help="machine-readable output")
    group = search.add_mutually_exclusive_group()
    group.add_argument("--fts", action="store_true", help="full-text search only")
    group.add_argument("--vector", action="store_true", help="vector search only")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "mount":
            return _mount(args)
        if args.command == "umount":
            _setup_logging(args.log_level)
            return unmount(_settings(args), args.mountpoint, timeout=args.timeout)
        if args.command == "init":
            return _init(args)
        if args.command == "search":
            return _search(args)
        if args.command == "install-unit":
            return _install_unit(args)
        if args.command == "sync":
            return _sync(args)
        if args.command in ("status", "seed", "reindex", "export", "import", "log", "recover"):
            return _tool(args)
    except (MountError, SchemaError, SearchConfigError, EmbeddingConfigError, Refused) as exc:
        sys.stderr.write(f"memfs: {exc}\n")
        return 1
    except psycopg.OperationalError as exc:
        sys.stderr.write(f"memfs: cannot reach the database: {str(exc).strip()}\n")
        return 1
    return 2


def _mount(args: argparse.Namespace) -> int:
    settings = _settings(args)
    mountpoint = prepare_mountpoint(args.mountpoint)
    if args.foreground:
        if args.log_file:
            args.log_file.parent.mkdir(parents=True, exist_ok=True)
            log_stream = open(args.log_file, "a", encoding="utf-8")  # noqa: SIM115 - for the run
            _setup_logging(args.log_level, log_stream)
        else:
            _setup_logging(args.log_level)
        return serve(settings, mountpoint)
    log_file = args.log_file or default_log_dir() / f"{mountpoint.name or 'root'}.log"
    log_file.parent.mkdir(parents=True, exist_ok=True)
    # Logging is set up in the child, on the log file (fd 2 after the fork).
    logging.basicConfig(
        level=getattr(logging, args.log_level.upper()),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    code = mount_background(settings, mountpoint, log_file)
    if code == 0:
        print(f"memfs: mounted workspace {settings.user_id!r} at {mountpoint} (log: {log_file})")
    return code


def _tool(args: argparse.Namespace) -> int:
    from memfs import tools

    logging.basicConfig(level=logging.WARNING, format="memfs: %(message)s")
    settings = _settings(args)
    if args.command == "status":
        tools.print_status(tools.status(settings), args.json)
        return 0
    if args.command == "log":
        path = tools.daily_log(settings, " ".join(args.text), args.tz_offset)
        print(f"memfs: appended to {path}")
        return 0
    if args.command == "seed":
        report = tools.seed(settings)
        if not args.json:
            print(
                "memfs: wrote memfs's own starter files where absent; IronClaw, if pointed at "
                "this database later, keeps them (it never replaces an existing file)"
            )
    elif args.command == "recover":
        action = "restore" if args.restore else ("discard" if args.discard else "list")
        report = tools.recover(settings, action, force=args.force)
        report.emit(args.json)
        left = report.counts.get("still kept", 0) + report.counts.get("superseded, still kept", 0)
        return 1 if left else 0
    elif args.command == "reindex":
        report = tools.reindex(settings, args.paths or None)
    elif args.command == "export":
        report = tools.export_tree(settings, args.directory)
    else:
        if not args.directory.is_dir():
            sys.stderr.write(f"memfs: {args.directory} is not a directory to import from\n")
            return 2
        report = tools.import_tree(settings, args.directory, overwrite=args.overwrite)
    report.emit(args.json)
    return 1 if report.problems and args.command == "reindex" else 0


def _sync(args: argparse.Namespace) -> int:
    import json

    from memfs import sync

    _setup_logging(args.log_level)
    settings = _settings(args)
    args.directory.mkdir(parents=True, exist_ok=True)
    database = open_database(settings)
    store = database.store(Scope(settings.user_id, settings.agent_id))

    def show(report: sync.SyncReport) -> None:
        if args.json:
            print(json.dumps(report.__dict__), flush=True)
        else:
            counts = ", ".join(f"{v} {k}" for k, v in report.counts().items()) or "in sync"
            print(f"memfs sync: {counts}", flush=True)
            for line in report.conflicts:
                print(f"  conflict: {line} (the database's version is kept too)", flush=True)

    try:
        if args.once:
            show(sync.DirectorySync(store, args.directory).run_once())
        else:
            sync.watch(store, args.directory, database=database, on_pass=show)
    finally:
        database.close()
    return 0


def _install_unit(args: argparse.Namespace) -> int:
    from memfs.systemd import install_unit

    values: dict[str, str] = {}
    if args.database_url:
        values["DATABASE_URL"] = args.database_url
    if args.user_id:
        values["IRONCLAW_OWNER_ID"] = args.user_id
    if args.agent_id:
        values["MEMFS_AGENT_ID"] = str(args.agent_id)
    if args.data_dir:
        values["MEMFS_DATA_DIR"] = str(args.data_dir)
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            sys.stderr.write(f"memfs: --env takes KEY=VALUE, not {item!r}\n")
            return 2
        values[key] = value
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    unit, env_file = install_unit(
        args.name, args.mountpoint, config_home=config_home, settings=values,
        enable=not args.no_enable,
    )  # fmt: skip
    print(f"memfs: wrote {unit} and {env_file} (mode 0600)")
    if args.no_enable:
        print(f"memfs: start it with: systemctl --user enable --now memfs@{args.name}")
    return 0


def _search(args: argparse.Namespace) -> int:
    from memfs.search_cli import print_outcome, run_search

    logging.basicConfig(level=logging.WARNING, format="memfs: %(message)s")
    mode = "fts" if args.fts else ("vector" if args.vector else "hybrid")
    outcome = run_search(_settings(args), " ".join(args.query), limit=args.limit, mode=mode)
    print_outcome(outcome, as_json=args.json)
    return 0


def _init(args: argparse.Namespace) -> int:
    from memfs.db import open_database

    _setup_logging(args.log_level)
    settings = _settings(args)
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


if __name__ == "__main__":
    sys.exit(main())
