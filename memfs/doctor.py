"""``memfs doctor``: a workspace's health, checked, and mended only when asked.

Read-only unless ``--repair``: the database is opened as ``memfs status`` opens it (no
schema is created), and nothing is written or removed.  Each check is one item of the
report (``check``, ``status``: ok, note, problem or repaired, ``detail`` and ``fix``, what
to do); every problem left is also one line on stderr, and the exit code is 1 while any
is left.  The SQL is the layouts' own (``memfs.db.health``, ``memfs.db.reborn.health``);
this module decides what each finding means and what mends it.

Mending never deletes anything anyone wrote: duplicated paths get names of their own,
chunks are rebuilt from the content, and only memfs's rows about documents that are gone,
chunk rows of deleted Reborn documents and pid files of dead daemons are removed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

from memfs.config import Settings
from memfs.db import Database, open_database, open_for_writing
from memfs.db.health import WorkspaceHealth
from memfs.db.schema import MEMFS_SCHEMA_VERSION
from memfs.mountpoint import FSTYPE, mount_at
from memfs.recovery import RecoveryArea
from memfs.workspace_tasks import Report, daemon_records, reindex

#: Paths listed in one finding's detail before "and N more".
SHOWN = 5


def _listed(paths: list[str]) -> str:
    more = f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else ""
    return ", ".join(repr(p) for p in paths[:SHOWN]) + more


class Doctor:
    """The checks of one workspace, in the order a person would look."""

    def __init__(self, settings: Settings, database: Database, repair: bool) -> None:
        self.settings = settings
        self.database = database
        self.repair = repair
        self.health: WorkspaceHealth = database.health(settings)
        self.report = Report("doctor")

    def _found(self, check: str, status: str, detail: str, fix: str = "") -> None:
        item = {"check": check, "status": status, "detail": detail}
        self.report.items.append({**item, "fix": fix} if fix else item)
        self.report.add(status)
        if status == "problem":
            self.report.problems.append(f"{check}: {detail}" + (f"; {fix}" if fix else ""))

    def _mend(self, check: str, detail: str, fix: str, mend: Callable[[], str]) -> None:
        """A problem, mended with ``--repair`` (``mend`` says what it did)."""
        if not self.repair:
            self._found(check, "problem", detail, fix)
            return
        try:
            done = mend()
        except Exception as exc:  # a role that may not write, say: still one finding
            self._found(check, "problem", f"{detail}; repair failed: {exc}", fix)
            return
        self._found(check, "repaired", f"{detail}; {done}")

    def run(self) -> Report:
        self.report.details = {
            "database": self.database.schema.describe(),
            "mode": "checked and mended what it could" if self.repair
            else "checked only (`memfs doctor --repair` mends what it can)",
        }  # fmt: skip
        for check in (self.schema, self.change_feed, self.pgvector, self.indexes,
                      self.duplicates, self.chunks, self.orphans, self.queues, self.embedded,
                      self.pid_files, self.recovery):  # fmt: skip
            check()
        return self.report

    # -- the database ----------------------------------------------------------------------

    def schema(self) -> None:
        version = self.database.memfs_schema_version()
        if version is None:
            self._found("memfs schema", "note", "not created yet (a mount or `memfs init` "
                        "creates it; IronClaw's tables are read as they are)")  # fmt: skip
        elif version < MEMFS_SCHEMA_VERSION:
            self._found("memfs schema", "problem", f"version {version}, this memfs uses "
                        f"{MEMFS_SCHEMA_VERSION}", "`memfs init` (or the next mount) "
                        "upgrades it in place")  # fmt: skip
        else:
            self._found("memfs schema", "ok", f"version {version}")

    def change_feed(self) -> None:
        by_design = self.database.polls_by_design(self.settings)
        if by_design is not None:
            self._found("change feed", "note", f"{by_design}: mounts poll for other writers")
        elif self.database.has_change_feed():
            self._found("change feed", "ok", "the trigger is installed: mounts see other "
                        "writers' changes at once")  # fmt: skip
        else:
            self._found("change feed", "problem", "no trigger: mounts see other writers' "
                        "changes only by polling, once a second", "`memfs init` installs "
                        "it (needs the tables' owner)")  # fmt: skip

    def pgvector(self) -> None:
        if not self.database.keeps_embeddings():
            return
        version = self.database.extension_version("vector")
        if version is None:
            self._found("pgvector", "problem", "the vector extension is not installed: "
                        "no embedding can be stored", "install pgvector on the server and "
                        "run `CREATE EXTENSION vector`")  # fmt: skip
        else:
            self._found("pgvector", "ok", f"vector {version}")

    def indexes(self) -> None:
        invalid = self.health.invalid_indexes()
        if not invalid:
            self._found("indexes", "ok", "every index of the memory tables is valid")
            return

        def mend() -> str:
            for name in invalid:
                self.health.rebuild_index(name)
            return "rebuilt"

        self._mend("indexes", f"{len(invalid)} invalid (unused, yet slowing writes): "
                   f"{_listed(invalid)}", "`memfs doctor --repair` rebuilds them (REINDEX, "
                   "by the tables' owner)", mend)  # fmt: skip

    # -- the workspace's rows ----------------------------------------------------------

    def duplicates(self) -> None:
        found = self.health.duplicate_paths()
        if not found:
            self._found("duplicate paths", "ok", "one row per path")
            return
        paths = [d.path for d in found]

        def mend() -> str:
            renamed = self.health.separate_duplicates()
            return f"the older rows now have names of their own: {_listed(renamed)}"

        self._mend("duplicate paths", f"{len(found)} path(s) have several rows; IronClaw "
                   f"shows one of each: {_listed(paths)}", "`memfs doctor --repair` gives "
                   "each older row a name of its own (nothing is deleted)", mend)  # fmt: skip

    def chunks(self) -> None:
        stale = self.health.stale_chunks()
        if not stale:
            self._found("chunks", "ok", "every document's chunks are IronClaw's chunker's "
                        "of its content")  # fmt: skip
            return

        def mend() -> str:
            done = reindex(self.settings, stale)
            return f"{done.counts.get('documents', 0)} re-chunked"

        self._mend("chunks", f"{len(stale)} document(s) whose chunks do not match their "
                   f"content (search misses or shows stale text): {_listed(stale)}",
                   "`memfs reindex` (or `memfs doctor --repair`) rebuilds them", mend)  # fmt: skip

    def orphans(self) -> None:
        found = {k: v for k, v in self.health.orphans().items() if v}
        if not found:
            self._found("orphans", "ok", "no rows about documents that are gone")
            return
        what = ", ".join(f"{n} {name}" for name, n in found.items())

        def mend() -> str:
            dropped = self.health.drop_orphans()
            return "removed " + ", ".join(f"{n} {name}" for name, n in dropped.items())

        self._mend("orphans", f"rows about documents that are gone: {what}",
                   "`memfs doctor --repair` removes them", mend)  # fmt: skip

    def queues(self) -> None:
        work = self.database.waiting_work(self.settings)
        if work is None:
            return
        queued, chunks, pending = work
        self._found("waiting work", "note" if queued or pending else "ok",
                    f"{queued} document(s) waiting to be re-chunked, {pending} of {chunks} "
                    "chunks without an embedding (a mount's workers do them; `memfs "
                    "reindex` re-chunks now)")  # fmt: skip

    # -- this machine --------------------------------------------------------------------

    def embedded(self) -> None:
        if self.database.embedded is None:
            return
        self._found("embedded server", "ok", f"PostgreSQL running on {self.settings.pgdata}")

    def pid_files(self) -> None:
        dead = [d for d in daemon_records(self.settings) if not d.running]
        if not dead:
            self._found("pid files", "ok", "every daemon that left a pid file is running")
            return
        for daemon in dead:
            entry = mount_at(Path(daemon.mountpoint))
            if entry is not None and entry.fstype == FSTYPE:
                self._found("pid files", "problem", f"the daemon of {daemon.mountpoint} "
                            f"(pid {daemon.pid}) is gone but the mount is still there",
                            f"`fusermount3 -u {daemon.mountpoint}`, then mount again")  # fmt: skip
                continue

            def mend(pidfile: Path = daemon.pidfile) -> str:
                for stale in (pidfile, pidfile.with_suffix(".sock")):
                    with contextlib.suppress(FileNotFoundError):
                        stale.unlink()
                return "removed"

            self._mend(
                "pid files",
                f"{daemon.pidfile.name}: the daemon of {daemon.mountpoint} (pid {daemon.pid}) died",
                "`memfs doctor --repair` removes the stale file",
                mend,
            )

    def recovery(self) -> None:
        area = RecoveryArea(self.settings.recovery_dir)
        pending = area.pending()
        if not pending:
            self._found("recovery area", "ok", "nothing kept")
            return
        self._found("recovery area", "problem", f"{len(pending)} change(s) a mount could "
                    f"not save are kept: {_listed([p.path for p in pending])}",
                    "`memfs recover` lists them, `memfs recover --restore` writes them "
                    "back")  # fmt: skip


def doctor(settings: Settings, *, repair: bool) -> Report:
    database = open_for_writing(settings) if repair else open_database(settings, read_only=True)
    try:
        return Doctor(settings, database, repair).run()
    finally:
        database.close()


__all__ = ["Doctor", "doctor"]
