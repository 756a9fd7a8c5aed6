"""The ``memfs`` argument parser: every command, its description, examples and options.

Built from ``memfs.options`` (mount settings) so flags, ``-o`` keys and variables agree;
shell completion and the man page are generated from it.  Errors are one line naming the
command, with a suggestion for a mistyped flag.  Stdlib only.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from memfs.errors import EXIT_USAGE, CommandError
from memfs.options import LOG_LEVELS, OPTIONS, SettingError, parse_level, parse_scope_segment

PROG = "memfs"


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line naming the command and the fix."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see: {self.prog} --help)\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def _add_option(parser: argparse.ArgumentParser, name: str) -> None:
    option = next(o for o in OPTIONS if o.name == name)
    flag = option.cli_flag
    if option.repeated:
        flag = flag.rstrip("s")  # --read-scope, --scratch-pattern: one per flag
    env = f" [env: {', '.join(option.env)}]" if option.env else ""
    if option.switch:
        parser.add_argument(flag, dest=name, action="store_true", default=None,
                            help=option.help + env)  # fmt: skip
    elif option.repeated:
        parser.add_argument(flag, dest=name, action="append", metavar=option.metavar,
                            type=_flag_type(option.parse), help=option.help + env)  # fmt: skip
    else:
        parser.add_argument(flag, dest=name, metavar=option.metavar,
                            type=_flag_type(option.parse), help=option.help + env)  # fmt: skip


def _flag_type(parse: Any) -> Any:
    def convert(text: str) -> Any:
        try:
            return parse(text)
        except SettingError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None

    convert.__name__ = getattr(parse, "__name__", "value")
    return convert


def _database_flags(parser: argparse.ArgumentParser) -> None:
    for option in OPTIONS:
        if option.database:
            _add_option(parser, option.name)


def _command(
    sub: Any, name: str, summary: str, description: str, examples: str, common: Parser
) -> Parser:
    parser: Parser = sub.add_parser(
        name,
        help=summary,
        description=f"{summary[0].upper()}{summary[1:]}.\n\n{description.strip()}",
        epilog="examples:\n" + "\n".join(f"  {line}" for line in examples.strip().splitlines()),
        formatter_class=_Formatter,
        parents=[common],
    )
    return parser


class _Version(argparse.Action):
    """``--version``: worked out only when asked (it runs fusermount3 and postgres)."""

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> NoReturn:
        from memfs.versions import report

        sys.stdout.write(report() + "\n")  # stdout, as argparse's own version action
        parser.exit()


def build_parser() -> Parser:
    parser = Parser(
        prog=PROG,
        description="Mount an IronClaw agent's PostgreSQL memory as a directory, and work on "
        "that memory without a mount.",
        epilog="Run `memfs COMMAND --help` for a command's options and examples.\n"
        "Exit codes: 0 done, 1 something failed, 2 usage or setting error, 3 database "
        "unreachable or unusable, 4 mount point or FUSE unusable.",
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="memfs's version and its parts' (pyfuse3, libfuse, psycopg, "
                        "the embedded PostgreSQL), then exit")  # fmt: skip
    level_help = (f"how much to log: {', '.join(LOG_LEVELS)} (default: info for mount, warning "
                  "for the other commands) [env: MEMFS_LOG_LEVEL]")  # fmt: skip
    parser.add_argument("--log-level", type=_flag_type(parse_level), help=level_help)
    common = Parser(add_help=False)
    common.add_argument("--log-level", type=_flag_type(parse_level), help=level_help,
                        default=argparse.SUPPRESS)  # fmt: skip
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                parser_class=Parser)  # fmt: skip

    mount = _command(
        sub,
        "mount",
        "mount a workspace on a directory",
        """
Serves the workspace's documents as files until `memfs umount DIR`. Without -f it returns
once the mount is live. With no database configured it uses the embedded PostgreSQL in
--data-dir. Every flag can also be given as `-o key=value` (as in /etc/fstab) or as the
environment variable shown in brackets.""",
        """
memfs mount ~/memory
memfs mount ~/memory --database-url postgresql://me@db/ironclaw --user-id alice
memfs mount ~/memory -o read_only,user_id=alice,allow_other
memfs mount ~/memory -f --log-level debug""",
        common,
    )
    mount.add_argument("mountpoint", type=Path, help="an empty directory (created if missing)")
    mount.add_argument("-f", "--foreground", action="store_true",
                       help="stay in the foreground and log to stderr")  # fmt: skip
    mount.add_argument("-o", dest="mount_options", action="append", default=[],
                       metavar="KEY=VALUE,...", help="memfs settings by -o name (user_id=…, "
                       "read_only, …) and libfuse mount options")  # fmt: skip
    for option in OPTIONS:
        if option.flag:
            _add_option(mount, option.name)

    umount = _command(
        sub,
        "umount",
        "commit open files and unmount",
        """
Asks the daemon to commit every file still open and unmount, and waits for it. Exits 1,
naming the files, if some could not be saved (they are kept for `memfs recover`). Refuses
(exit 1, naming them) while some files are in the daemon's memory only, neither saved nor
kept on disk: `memfs recover --to DIR` writes them to a folder; --force unmounts anyway and
the daemon stays alive until they are saved or kept. Refuses (exit 4, naming them) while
a process works inside the mount (a shell's working directory, an open file), which would
otherwise be left in a detached directory: --lazy detaches anyway.""",
        """
memfs umount ~/memory
memfs umount --lazy ~/memory
memfs umount --force ~/memory""",
        common,
    )
    umount.add_argument("mountpoint", type=Path, help="a directory memfs has mounted")
    umount.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                        help="how long to wait for the daemon (default 60)")  # fmt: skip
    umount.add_argument("--force", action="store_true",
                        help="unmount even with files in the daemon's memory only (the daemon "
                        "keeps them, alive, until they are saved or kept)")  # fmt: skip
    umount.add_argument("--lazy", action="store_true",
                        help="detach now even if a process is still inside (its working "
                        "directory or an open file); the mount ends when they let go")  # fmt: skip

    stats = _command(
        sub,
        "stats",
        "print a running mount's live statistics",
        """
Asks the daemon serving the mount for its statistics: FUSE requests and errors (by
operation and errno), commits by outcome, database calls and their time, the content
cache, open and unsaved files, deferred changes. The same numbers `--metrics` serves to
Prometheus. Histogram buckets only with --all.""",
        """
memfs stats ~/memory
memfs stats --json ~/memory | jq '.counts'""",
        common,
    )
    stats.add_argument("mountpoint", type=Path, help="a directory memfs has mounted")
    stats.add_argument("--all", action="store_true", help="every sample, buckets too")
    stats.add_argument("--json", action="store_true", help="machine-readable output")

    init = _command(
        sub,
        "init",
        "create the schema and the change-feed trigger",
        """
Creates IronClaw's memory tables if the database has none, memfs's own schema, and the
trigger that tells mounts about other writers' changes. Idempotent.""",
        """
memfs init --database-url postgresql://owner@db/ironclaw""",
        common,
    )
    _database_flags(init)
    init.add_argument("--no-trigger", action="store_true", help="do not install the trigger")

    status = _command(
        sub,
        "status",
        "show mounts, database, documents and settings",
        """
Read-only: never creates a database, a table or a file. Shows this database's mounts,
its schema, the workspace's counts and where each search/embedding setting came from.
Given a mount point, shows what its daemon reports instead, as MNT/.status does: the
server's round trip, how other writers are watched, files not saved yet and why, queued
changes, chunks and embeddings waiting, the recovery area and the live statistics.""",
        """
memfs status
memfs status ~/memory
memfs status --json --user-id alice""",
        common,
    )
    _database_flags(status)
    status.add_argument("mountpoint", nargs="?", type=Path, metavar="MNT",
                        help="a mount point: its daemon's report (as MNT/.status)")  # fmt: skip
    status.add_argument("--json", action="store_true", help="machine-readable output")

    doctor = _command(
        sub,
        "doctor",
        "check a workspace's health; mend it with --repair",
        """
Checks memfs's schema, the change-feed trigger, pgvector, invalid indexes, duplicated
paths, chunks that are not IronClaw's chunker's of their content, rows about documents
that are gone, waiting work, the embedded server, stale pid files and the recovery area,
and says what to do about each problem (one line each on stderr; exit 1 while any is
left). Read-only unless --repair, which mends what it can without deleting anything anyone
wrote: duplicates get names of their own, chunks are rebuilt, orphan rows and dead
daemons' pid files go.""",
        """
memfs doctor
memfs doctor --repair
memfs doctor --json""",
        common,
    )
    _database_flags(doctor)
    doctor.add_argument("--repair", action="store_true", help="mend what can be mended")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")

    seed = _command(
        sub,
        "seed",
        "write memfs's starter files where absent",
        """
Writes MEMORY.md, the identity files and a bootstrap note into an empty memfs workspace.
Refused on IronClaw's own database (IronClaw seeds its own).""",
        """
memfs seed""",
        common,
    )
    _database_flags(seed)
    seed.add_argument("--json", action="store_true", help="machine-readable output")

    reindex = _command(
        sub,
        "reindex",
        "re-chunk documents (all, or the given paths)",
        """
Rebuilds memory_chunks with IronClaw's chunker. Paths are workspace paths, or files
inside a mount of this workspace.""",
        """
memfs reindex
memfs reindex MEMORY.md daily/2026-03-03.md
memfs reindex ~/memory/MEMORY.md""",
        common,
    )
    reindex.add_argument("paths", nargs="*", help="workspace paths (default: every document)")
    _database_flags(reindex)
    reindex.add_argument("--json", action="store_true", help="machine-readable output")

    export = _command(
        sub,
        "export",
        "write the workspace out as a Markdown tree",
        """
Writes every document under DIRECTORY with its mtime. A file there that changed since the
last export into DIRECTORY (or that no export wrote) is kept and listed, and the exit code
is 1, unless --force. Never into a memfs mount.""",
        """
memfs export ~/memory-backup
memfs export ~/memory-backup --dry-run""",
        common,
    )
    export.add_argument("directory", type=Path, help="where to write (created if missing)")
    _database_flags(export)
    export.add_argument("--force", action="store_true",
                        help="overwrite files changed since the last export")  # fmt: skip
    export.add_argument("--dry-run", action="store_true",
                        help="list what would be written; write nothing")  # fmt: skip
    export.add_argument("--json", action="store_true", help="machine-readable output")

    imp = _command(
        sub,
        "import",
        "read a Markdown tree into the workspace",
        """
Each UTF-8 file becomes a document (one transaction each, IronClaw's write rules). Paths
that exist are skipped unless --overwrite; scratch names are skipped. Exits 1 if some files
could not be read or are not text; they are listed on stderr.""",
        """
memfs import ~/notes --dry-run
memfs import ~/notes
memfs import ~/notes --overwrite --json""",
        common,
    )
    imp.add_argument("directory", type=Path, help="the tree to read")
    _database_flags(imp)
    imp.add_argument("--overwrite", action="store_true", help="replace existing documents")
    imp.add_argument("--dry-run", action="store_true",
                     help="list what would be imported; write nothing")  # fmt: skip
    imp.add_argument("--json", action="store_true", help="machine-readable output")

    migrate = _command(
        sub,
        "migrate",
        "copy a legacy workspace into IronClaw's Reborn layout (v1.1 and later)",
        """
Copies the workspace's documents from memory_documents into root_filesystem_entries, each
with every version it had (as version sidecars), its metadata (as a .meta sidecar) and
chunks rebuilt as IronClaw's indexer builds them, one document per transaction. The legacy
rows are only read. A second run copies what the first did not (stopped, or new since);
documents already there with the same content and versions are counted as present, and
any other document found at a path is left as it is and listed. The target database must
hold IronClaw's Reborn tables (IronClaw >= 1.1 creates them when it starts). Without --to-*
options the copy goes where IronClaw >= 1.1 reads by default: tenant reborn-cli, agent
reborn-cli-agent, and user reborn-cli for the legacy default user 'default' (any other
user keeps its id). Exits 1 if some documents could not be copied.""",
        """
memfs migrate --dry-run
memfs migrate
memfs migrate --user-id alice --to-user alice --json
memfs migrate --database-url postgresql://old/db --to-database-url postgresql://new/db""",
        common,
    )
    _database_flags(migrate)
    migrate.add_argument("--to-database-url", metavar="URL",
                         help="the database to copy into (default: the same one)")  # fmt: skip
    for flag, role in (("tenant", "tenant (default: reborn-cli)"),
                       ("user", "user (default: reborn-cli for 'default', else the same id)"),
                       ("agent", "agent (default: reborn-cli-agent; 'none' for no agent)"),
                       ("project", "project (default: none)")):  # fmt: skip
        migrate.add_argument(f"--to-{flag}", dest=f"to_{flag}", metavar="ID",
                             type=_flag_type(parse_scope_segment),
                             help=f"the target {role}")  # fmt: skip
    migrate.add_argument("--dry-run", action="store_true",
                         help="report what would be copied; write nothing")  # fmt: skip
    migrate.add_argument("--json", action="store_true", help="machine-readable output")

    daily = _command(
        sub,
        "log",
        "append to today's daily log, as IronClaw does",
        """
Appends "[HH:MM:SS] TEXT" to daily/YYYY-MM-DD.md in local time.""",
        """
memfs log deployed v2
memfs log --tz-offset 60 "standup notes" """,
        common,
    )
    daily.add_argument("text", nargs="+", help="the entry (words are joined by spaces)")
    _database_flags(daily)
    daily.add_argument("--tz-offset", type=int, default=None, metavar="MINUTES",
                       help="minutes east of UTC (default: local time)")  # fmt: skip
    daily.add_argument("--json", action="store_true", help="machine-readable output")

    versions = _command(
        sub,
        "versions",
        "list the versions IronClaw keeps of a document",
        """
Oldest first: number, time (UTC), who wrote it, size; then the current content. The same
versions a mount shows under .versions/PATH/. PATH may be a file inside a mount.""",
        """
memfs versions MEMORY.md
memfs versions ~/memory/daily/2026-03-03.md --json""",
        common,
    )
    versions.add_argument("path", help="the document's workspace path")
    _database_flags(versions)
    versions.add_argument("--json", action="store_true", help="machine-readable output")

    restore = _command(
        sub,
        "restore",
        "put a kept version back as the document's content",
        """
An ordinary save of that version's content: the content it replaces is kept as a version
in turn (where the document keeps versions), so a restore can itself be undone.""",
        """
memfs restore MEMORY.md 3""",
        common,
    )
    restore.add_argument("path", help="the document's workspace path")
    restore.add_argument("version", type=_flag_type(_version_number), help="the version number")
    _database_flags(restore)
    restore.add_argument("--json", action="store_true", help="machine-readable output")

    undelete = _command(
        sub,
        "undelete",
        "put back a deleted document (or a folder's documents) memfs kept",
        """
What a mount deletes (rm, rm -rf, a move into .trash/), and on the legacy layout with
memfs's trigger (memfs init) what SQL deletes, is kept with its versions for 30 days.
This writes the last content back as a new document at its path (or --to another); a
path that holds a document now is refused. A folder's path puts back every kept document
below it. --list shows what is kept.""",
        """
memfs undelete projects/alpha/notes.md
memfs undelete ~/memory/projects/alpha          # a folder removed with rm -rf
memfs undelete notes.md --to notes-old.md
memfs undelete --list""",
        common,
    )
    undelete.add_argument("path", nargs="?", help="a workspace path, or one inside a mount")
    undelete.add_argument("--to", metavar="NEWPATH", help="put it back at another path")
    undelete.add_argument("--list", action="store_true", help="list what is kept")
    _database_flags(undelete)
    undelete.add_argument("--json", action="store_true", help="machine-readable output")

    sync = _command(
        sub,
        "sync",
        "keep a plain directory and the workspace in step",
        """
Two-way sync for machines without FUSE. Continuous unless --once; Ctrl-C stops it. Not for
a directory inside a memfs mount (that is the workspace already).""",
        """
memfs sync ~/agent-memory
memfs sync ~/agent-memory --dry-run
memfs sync ~/agent-memory --once --json""",
        common,
    )
    sync.add_argument("directory", type=Path, help="a plain directory (created if missing)")
    _database_flags(sync)
    sync.add_argument("--once", action="store_true", help="one pass, then exit")
    sync.add_argument("--dry-run", action="store_true",
                      help="one pass that only says what it would do (implies --once)")  # fmt: skip
    sync.add_argument("--json", action="store_true", help="print each pass as JSON")

    recover = _command(sub, "recover", "list, restore or discard changes a mount could not "
                       "save", """
Changes a mount could not commit (database down, full or refusing at unmount, or a daemon
killed while retrying) are kept on local disk per workspace. Without options this lists
them; --restore saves them as ordinary writes (the content they replace becomes a
version); --discard deletes them.""", """
memfs recover
memfs recover --restore
memfs recover --to ~/unsaved""", common)  # fmt: skip
    _database_flags(recover)
    what = recover.add_mutually_exclusive_group()
    what.add_argument("--restore", action="store_true", help="save the kept changes")
    what.add_argument("--discard", action="store_true", help="delete the kept changes")
    what.add_argument("--to", type=Path, metavar="DIR",
                      help="write what running mounts of the workspace hold in memory only "
                      "(unsaved and not kept) into DIR")  # fmt: skip
    recover.add_argument("--force", action="store_true",
                         help="with --restore: also restore copies of documents saved again "
                         "since")  # fmt: skip
    recover.add_argument("--json", action="store_true", help="machine-readable output")

    search = _command(
        sub,
        "search",
        "search the workspace as IronClaw ranks it",
        """
Full-text and vector search fused as IronClaw does (the engine behind .search/). Without
an embedding provider, full-text only. Read-only.""",
        """
memfs search deploy schedule
memfs search deploy --limit 5 --json
memfs search --fts "release notes" """,
        common,
    )
    search.add_argument("query", nargs="+", help="the query (words are joined by spaces)")
    _database_flags(search)
    search.add_argument("--limit", type=_flag_type(_limit), default=10, metavar="N",
                        help="results, 1-100 (default 10)")  # fmt: skip
    search.add_argument("--json", action="store_true", help="machine-readable output")
    group = search.add_mutually_exclusive_group()
    group.add_argument("--fts", action="store_true", help="full-text search only")
    group.add_argument("--vector", action="store_true",
                       help="vector search only (needs an embedding provider)")  # fmt: skip

    unit = _command(sub, "install-unit", "install a systemd user unit for a profile", """
Writes ~/.config/systemd/user/memfs@.service and ~/.config/memfs/NAME.env (mode 0600: every
setting, secrets included, stays off the command line), then enables and starts
memfs@NAME.""", """
memfs install-unit notes ~/memory --user-id alice --env EMBEDDING_ENABLED=true
memfs install-unit notes ~/memory -o read_only --no-enable""", common)  # fmt: skip
    unit.add_argument("name", help="profile name (the unit is memfs@NAME)")
    unit.add_argument("mountpoint", type=Path, help="where the profile mounts")
    unit.add_argument("-o", dest="mount_options", action="append", default=[],
                      metavar="KEY=VALUE,...",
                      help="mount settings, as for memfs mount")  # fmt: skip
    for option in OPTIONS:
        if option.flag and option.name != "log_file":
            _add_option(unit, option.name)
    unit.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                      help="more variables for the profile "
                      "(e.g. EMBEDDING_ENABLED=true)")  # fmt: skip
    unit.add_argument("--no-enable", action="store_true", help="write the files only")

    helper = _command(sub, "install-helper", "let mount(8) and /etc/fstab mount memfs", """
Run as root. Links /sbin/mount.fuse.memfs to this memfs, so `mount -t fuse.memfs memfs DIR
-o key=value,…` and fstab lines work (mount(8) runs helpers with a fixed PATH, so the venv's
memfs must be linked where it looks).""", """
sudo memfs install-helper
echo 'memfs /home/me/memory fuse.memfs noauto,user_id=alice 0 0' | sudo tee -a /etc/fstab""",
                     common)  # fmt: skip
    helper.add_argument("--sbin", type=Path, default=Path("/sbin"), help=argparse.SUPPRESS)

    completion = _command(
        sub,
        "completion",
        "print a shell completion script",
        """
Generated from this parser, so it always matches the installed memfs.""",
        """
memfs completion bash --install
memfs completion fish --install
memfs completion zsh > ~/.zfunc/_memfs""",
        common,
    )
    completion.add_argument("shell", choices=["bash", "zsh", "fish"], help="bash, zsh or fish")
    completion.add_argument("--install", action="store_true",
                            help="write it where the shell looks (bash-completion's, "
                            "~/.zfunc, fish's folder), making the folders, instead of "
                            "printing it")  # fmt: skip

    _command(
        sub,
        "man",
        "print the manual page (roff)",
        """
Generated from this parser.""",
        """
memfs man | man -l -""",
        common,
    )
    return parser


def _limit(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise SettingError("expected a whole number from 1 to 100") from None
    if not 1 <= value <= 100:
        raise SettingError("expected a whole number from 1 to 100")
    return value


def _version_number(text: str) -> int:
    try:
        number = int(text)
    except ValueError:
        raise SettingError("expected a version number (1, 2, …; see `memfs versions`)") from None
    if number < 1:
        raise SettingError("version numbers start at 1")
    return number


def _subparser(parser: argparse.ArgumentParser, name: str | None) -> argparse.ArgumentParser:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and name in action.choices:
            chosen: argparse.ArgumentParser = action.choices[name]
            return chosen
    return parser


def parse(parser: Parser, argv: Sequence[str]) -> argparse.Namespace:
    """Parse; an unknown flag is reported by its own command, with a suggestion."""
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = _subparser(parser, getattr(args, "command", None))
        known = [s for a in command._actions for s in a.option_strings]
        flag = extras[0].split("=", 1)[0]
        close = difflib.get_close_matches(flag, known, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        command.error(f"unrecognized argument {extras[0]!r}{hint}")
    return args


def mount_helper_argv(argv: Sequence[str]) -> list[str]:
    """mount(8)'s ``mount.fuse.memfs SOURCE DIR [-o opts] [-n -s -f -v] [-t type]`` as
    ``memfs mount DIR -o opts``."""
    positional: list[str] = []
    options: list[str] = []
    items = iter(argv)
    for item in items:
        if item == "-o":
            options.append(next(items, ""))
        elif item == "-t":
            next(items, None)
        elif item.startswith("-o"):
            options.append(item[2:])
        elif item in ("-n", "-s", "-f", "-v", "--"):
            continue
        else:
            positional.append(item)
    if len(positional) != 2:
        raise CommandError(
            "as a mount helper, memfs takes: SOURCE DIR [-o options]", exit_code=EXIT_USAGE
        )
    command = ["mount", positional[1]]
    for text in options:
        command += ["-o", text]
    return command
