"""``memfs sync DIR``: two-way sync between a real directory and the workspace, no FUSE.

For containers without ``/dev/fuse``, macOS without macFUSE, and agents that keep memory as
plain Markdown files.  Each pass compares the directory, the database and the state of the
last pass (``DIR/.memfs-sync.json``: per path, the content hash and row id last seen on
both sides) and decides per path:

* changed on one side only: copy it to the other (mtimes are kept both ways);
* changed on both sides: the local file wins and the database's newer content is kept as a
  version (or a ``.conflict-<time>.md`` copy), the mount's conflict policy;
* gone on one side and unchanged on the other: delete it on the other;
* a local rename (same content under a new name) or a database rename (same row id under
  a new path): rename on the other side, keeping the row's identity.

Scratch names (editor swap files, backups, temporaries) are never synced, as in the mount.
Continuous mode runs a pass at start and after every change seen by watchfiles in the
directory or by the change feed (or polling) in the database.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from memfs.db import FileAttrs
from memfs.db.interface import DocumentStore, Rename, SaveOptions, WorkspaceScope
from memfs.db.records import Write
from memfs.errors import EXIT_FAILED, EXIT_USAGE, CommandError
from memfs.local_tree import SILENT, Passed, memory_files, read_regular
from memfs.paths import loadable_path
from memfs.scratch import ScratchRules
from memfs.tree import to_ns

log = logging.getLogger(__name__)

STATE_FILE = ".memfs-sync.json"
#: Forces the store to keep the database side of a conflict (never equals a real version).
CONFLICT = datetime(1970, 1, 1, tzinfo=UTC)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class SyncReport:
    pushed: list[str] = field(default_factory=list)
    pulled: list[str] = field(default_factory=list)
    deleted_remote: list[str] = field(default_factory=list)
    deleted_local: list[str] = field(default_factory=list)
    renamed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {k: len(v) for k, v in self.__dict__.items() if v}

    def as_json(self, dry_run: bool = False) -> dict[str, Any]:
        """Every command's JSON shape: one item per path and what the pass did to it."""
        items: list[dict[str, str]] = []
        for action, entries in self.__dict__.items():
            for entry in entries:
                if action == "skipped":  # "path (why)"
                    path, _, why = entry.partition(" (")
                    items.append({"action": action, "path": path, "why": why.rstrip(")")})
                else:
                    items.append({"action": action, "path": entry})
        return {"command": "sync (dry run: nothing changed)" if dry_run else "sync",
                "counts": self.counts(), "items": items, "problems": []}  # fmt: skip

    @property
    def changed(self) -> bool:
        return any(
            (self.pushed, self.pulled, self.deleted_remote, self.deleted_local, self.renamed)
        )


class SyncElsewhere(CommandError):
    """The directory was last synced with another database or workspace."""

    def __init__(
        self, root: Path, then: Mapping[str, str], now: Mapping[str, str], differs: list[str]
    ) -> None:
        what = ", ".join(f"{_WORDS.get(k, k)} {then[k]!r}, now {now[k]!r}" for k in differs)
        super().__init__(
            f"{root} was last synced with another database or workspace ({what}): syncing it "
            "here would delete the files synced there before, on both sides. Sync it with "
            f"that one again, or sync this one into an empty folder (moving {STATE_FILE} "
            "away makes every file in it new here: pushed, nothing deleted)",
            EXIT_USAGE,
        )


class SyncStateUnreadable(CommandError):
    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(
            f"{path} is not a sync state memfs can read ({reason}); move it away to sync "
            "this folder afresh (every file in it is then pushed, nothing deleted)",
            EXIT_FAILED,
        )


#: How a binding's keys read in a message.
_WORDS = {"layout": "layout", "workspace": "workspace", "server": "server",
          "database_oid": "database (OID)"}  # fmt: skip


def binding(layout: str, scope: WorkspaceScope, identity: Mapping[str, str]) -> dict[str, str]:
    """What a directory's sync state is bound to: the layout, the workspace and the
    database's identity (``Database.identity``), never the URL (aliases reach one database)."""
    return {"layout": layout, "workspace": scope.describe(), **identity}


@dataclass
class Local:
    data: bytes
    mtime_ns: int


#: What the last pass left of each path: its content's hash and its row's id.
_State = dict[str, dict[str, Any]]


class DirectorySync:
    """One directory synced with one workspace."""

    def __init__(
        self,
        store: DocumentStore,
        root: Path,
        rules: ScratchRules | None = None,
        *,
        bound_to: Mapping[str, str] | None = None,
        dry_run: bool = False,
    ) -> None:
        #: Only report what a pass would do: change neither side, nor the state.
        self.dry_run = dry_run
        #: Reads (every document at once, ``export_rows``) and writes go through the
        #: document store, as a mount's do.
        self.store = store
        self.root = root
        self.rules = rules or ScratchRules()
        self.state_path = root / STATE_FILE
        #: The database and workspace this directory is synced with (``binding``): a pass
        #: against another one is refused, since the state would make it delete here and
        #: there every file synced before.
        self.bound_to = dict(bound_to or {})
        #: Paths present in the folder but not read this pass (``_local``).
        self._unread: set[str] = set()

    # -- the two sides -------------------------------------------------------------------

    def _state(self) -> dict[str, dict[str, Any]]:
        """The files as the last pass left them on both sides; refuses (``SyncElsewhere``)
        if that pass was with another database or workspace."""
        try:
            loaded: dict[str, Any] = json.loads(self.state_path.read_text())
        except FileNotFoundError:
            return {}
        except ValueError as exc:
            raise SyncStateUnreadable(self.state_path, str(exc)) from None
        if "files" not in loaded:  # written before memfs recorded the binding: adopted
            return loaded
        bound = loaded.get("bound_to") or {}
        differs = sorted(k for k in self.bound_to if k in bound and bound[k] != self.bound_to[k])
        if differs:
            raise SyncElsewhere(self.root, bound, self.bound_to, differs)
        files: dict[str, dict[str, Any]] = loaded["files"]
        return files

    def check(self) -> None:
        """Refuse (``SyncElsewhere``) a directory last synced with another database or
        workspace, or whose state cannot be read."""
        self._state()

    def _save_state(self, state: dict[str, dict[str, Any]]) -> None:
        temp = self.state_path.with_name(STATE_FILE + ".tmp")
        temp.write_text(
            json.dumps({"bound_to": self.bound_to, "files": state}, indent=1, sort_keys=True)
        )
        os.replace(temp, self.state_path)

    def _local(self, report: SyncReport) -> dict[str, Local]:
        """The folder's files that are memory; what is there but passed over (reported,
        except scratch names) goes to ``_unread``: no pass deletes its twin in the database
        for it."""
        files: dict[str, Local] = {}
        self._unread.clear()
        for item in memory_files(self.root, self.rules):
            if isinstance(item, Passed):
                self._unread.add(item.path)
                if item.kind not in SILENT:
                    report.skipped.append(f"{item.path} ({item.why})")
                continue
            rel, full = item
            problem = None
            if not loadable_path(rel):
                problem = "a name IronClaw cannot store"
            else:
                try:
                    data = read_regular(full.resolve())
                    if b"\x00" in data:
                        raise UnicodeDecodeError("utf-8", data, 0, 1, "NUL byte")
                    data.decode("utf-8")
                except OSError as exc:
                    problem = f"cannot be read: {exc.strerror}"
                except UnicodeDecodeError:
                    problem = "not UTF-8 text"
            if problem is not None:
                self._unread.add(rel)
                report.skipped.append(f"{rel} ({problem})")
                continue
            files[rel] = Local(data, full.stat().st_mtime_ns)
        return files

    def _remote(self) -> dict[str, tuple[UUID, bytes, datetime, int | None]]:
        rows: dict[str, tuple[UUID, bytes, datetime, int | None]] = {}
        for row in self.store.export_rows():
            if loadable_path(row.path) and row.path not in rows:
                data = row.content.encode("utf-8", "surrogateescape")
                rows[row.path] = (row.id, data, row.updated_at, row.mtime_ns)
        return rows

    # -- one pass ------------------------------------------------------------------------

    def run_once(self) -> SyncReport:
        report = SyncReport()
        state = self._state()
        local = self._local(report)
        remote = self._remote()
        new_state: dict[str, dict[str, Any]] = {}
        # Renames first, so they are not seen as a delete plus a create.
        self._renamed_in_database(state, local, remote, report)
        self._renamed_in_directory(state, local, remote, report)
        done: set[str] = set()
        try:
            for path in sorted(set(local) | set(remote) | set(state)):
                if path in self._unread:  # there, but not read: neither side changes
                    if path in state:
                        new_state[path] = state[path]
                    done.add(path)
                    continue
                entry = self._reconcile(
                    path, state.get(path), local.get(path), remote.get(path), report
                )
                if entry is not None:
                    new_state[path] = entry
                done.add(path)
        finally:
            # Also when a path fails: what the pass did to the others is remembered (a
            # file pulled but forgotten looked edited here next time, and its stale copy
            # won over the database's newer content as a "conflict").
            if not self.dry_run:
                left = {p: entry for p, entry in state.items() if p not in done}
                self._save_state({**left, **new_state})
        return report

    def _renamed_in_database(
        self, state: _State, local: dict[str, Any], remote: dict[str, Any], report: SyncReport
    ) -> None:
        """Documents renamed in the database since the last pass, unchanged here: the
        files move to their new names."""
        by_id = {row[0]: path for path, row in remote.items()}
        for old, base in list(state.items()):
            moved_to = by_id.get(UUID(base["id"])) if base.get("id") else None
            unchanged = old in local and digest(local[old].data) == base["hash"]
            if unchanged and old not in remote and moved_to and moved_to not in local:
                target = self.root / moved_to  # renamed in the database
                if not self.dry_run:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    os.replace(self.root / old, target)
                local[moved_to] = local.pop(old)
                state[moved_to] = state.pop(old)
                report.renamed.append(f"{old} -> {moved_to} (in the database)")

    def _renamed_in_directory(
        self, state: _State, local: dict[str, Any], remote: dict[str, Any], report: SyncReport
    ) -> None:
        """Files renamed here since the last pass, unchanged in the database: the rows
        move to the new names, keeping their ids."""
        for old, base in list(state.items()):
            if old in local or old not in remote or remote[old][0] != UUID(base["id"]):
                continue
            if digest(remote[old][1]) != base["hash"]:
                continue
            twins = [
                p for p, f in local.items() if p not in remote and digest(f.data) == base["hash"]
            ]
            if len(twins) == 1:  # renamed in the directory: move the row, keep its id
                new = twins[0]
                attrs = FileAttrs(None, local[new].mtime_ns)
                if self.dry_run or (
                    self.store.rename_document(Rename(remote[old][0], new), attrs) is not None
                ):
                    remote[new] = remote.pop(old)
                    state[new] = state.pop(old)
                    report.renamed.append(f"{old} -> {new} (in the directory)")

    def _reconcile(
        self,
        path: str,
        base: dict[str, Any] | None,
        here: Local | None,
        there: tuple[UUID, bytes, datetime, int | None] | None,
        report: SyncReport,
    ) -> dict[str, Any] | None:
        base_hash = base["hash"] if base else None
        if here is not None and there is not None:
            return self._on_both_sides(path, base_hash, here, there, report)
        if here is not None:  # only in the directory
            if base is not None and digest(here.data) == base_hash:
                if not self.dry_run:
                    (self.root / path).unlink()
                report.deleted_local.append(path)
                return None
            return self._push(path, here, None, None, report)
        if there is not None:  # only in the database
            # Deleted here, unchanged there: deleted there too, but only at the version
            # read (another writer's change since then stays and comes back here).
            if base is not None and digest(there[1]) == base_hash:
                if self.dry_run or self.store.delete_document(there[0], [], there[2]):
                    report.deleted_remote.append(path)
                    return None
                return {"hash": "", "id": str(there[0])}  # pulled by the next pass
            return self._pull(path, there, report)
        return None  # gone on both sides

    def _on_both_sides(
        self,
        path: str,
        base_hash: str | None,
        here: Local,
        there: tuple[UUID, bytes, datetime, int | None],
        report: SyncReport,
    ) -> dict[str, Any]:
        """A path in the directory and in the database: the side that changed since the
        last pass wins; both changed, the directory's is saved over the database's (kept
        as a version, or a conflict copy) and the path is reported as a conflict."""
        local_hash, remote_hash = digest(here.data), digest(there[1])
        if local_hash == remote_hash:
            return {"hash": local_hash, "id": str(there[0])}
        if remote_hash == base_hash:
            return self._push(path, here, there[0], there[2], report)
        if local_hash == base_hash:
            return self._pull(path, there, report)
        result = self._push(path, here, there[0], CONFLICT, report)
        report.conflicts.append(path)
        return result

    def _push(
        self,
        path: str,
        here: Local,
        doc_id: UUID | None,
        expected: datetime | None,
        report: SyncReport,
    ) -> dict[str, Any]:
        if self.dry_run:
            report.pushed.append(path)
            return {}
        attrs = FileAttrs(None, here.mtime_ns)
        result = self.store.commit_document(
            Write(doc_id, path, here.data.decode("utf-8")), attrs, SaveOptions(expected=expected)
        )
        if result.conflict:
            log.warning("%s changed on both sides: kept the database's version as %s",
                        path, result.conflict)  # fmt: skip
        report.pushed.append(path)
        return {"hash": digest(here.data), "id": str(result.doc_id)}

    def _pull(
        self, path: str, there: tuple[UUID, bytes, datetime, int | None], report: SyncReport
    ) -> dict[str, Any]:
        doc_id, data, updated_at, mtime_ns = there
        if self.dry_run:
            report.pulled.append(path)
            return {}
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        # Not named after the file: a 255-byte name leaves no room for a suffix.
        temp = target.with_name(f".memfs-sync-{uuid.uuid4().hex[:12]}.tmp")
        temp.write_bytes(data)
        stamp = mtime_ns if mtime_ns is not None else to_ns(updated_at)
        os.utime(temp, ns=(stamp, stamp))
        os.replace(temp, target)
        report.pulled.append(path)
        return {"hash": digest(data), "id": str(doc_id)}


@contextlib.contextmanager
def only_sync_of(root: Path) -> Iterator[None]:
    """Hold the directory for this command: two syncs of one folder would each push and
    delete by a state the other is rewriting."""
    lock_path = root / (STATE_FILE + ".lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            raise CommandError(
                f"another memfs sync of {root} is running (pid {holder}); stop it first, "
                "or wait for it to finish",
                EXIT_USAGE,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # the lock goes with the descriptor


def watch(
    store: DocumentStore,
    root: Path,
    *,
    database: Any,
    on_pass: Any,
    bound_to: Mapping[str, str] | None = None,
) -> None:
    """Continuous mode: a pass at start, then after every change on either side."""
    import trio

    if not store.origin:
        raise ValueError("a watching sync needs a store with an origin (to skip its echoes)")
    syncer = DirectorySync(store, root, bound_to=bound_to)
    syncer.check()  # refused here, in one line, not from inside the watching tasks
    trio.run(_Watching(syncer, database, on_pass).run)


class _Watching:
    """``watch``'s run: a pass at start, then one after each burst of changes heard from
    the directory (watchfiles) or the database (its change feed, else a poll)."""

    def __init__(self, syncer: DirectorySync, database: Any, on_pass: Any) -> None:
        import math

        import trio

        self.syncer = syncer
        self.store = syncer.store
        self.database = database
        self.on_pass = on_pass
        self.send, self.receive = trio.open_memory_channel[str](math.inf)

    async def run(self) -> None:
        import trio

        from memfs.feed import ChangeListener

        listener = None
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._stop_on_signal, nursery.cancel_scope)
            # IronClaw's Reborn memory notifies nothing: poll its version fingerprint.
            if self.database.notifies_changes() and self.database.listen_url is not None:
                listener = ChangeListener(
                    self.database.listen_url, self.database.listen_kwargs, self._from_feed,
                    trio.lowlevel.current_trio_token(),
                )  # fmt: skip
                listener.start()
            else:
                nursery.start_soon(self._poll_database)
            nursery.start_soon(self._watch_directory)
            self.on_pass(await trio.to_thread.run_sync(self.syncer.run_once))
            try:
                await self._pass_after_changes()
            finally:
                if listener is not None:
                    await trio.to_thread.run_sync(listener.stop)

    async def _pass_after_changes(self) -> None:
        import trio

        while True:
            await self.receive.receive()
            await trio.sleep(0.2)  # let a burst of changes settle
            while True:
                try:
                    self.receive.receive_nowait()
                except trio.WouldBlock:
                    break
            report = await trio.to_thread.run_sync(self.syncer.run_once)
            if report.changed or report.conflicts:
                self.on_pass(report)

    def _from_feed(self, event: dict[str, Any]) -> None:
        scope = self.store.scope
        mine = event.get("user") == scope.user_id and event.get("origin") != self.store.origin
        if mine or event.get("op") == "RESYNC":
            self.send.send_nowait("database")

    async def _watch_directory(self) -> None:
        import watchfiles

        async for _ in watchfiles.awatch(self.syncer.root, watch_filter=_relevant, debounce=200):
            self.send.send_nowait("directory")

    async def _poll_database(self) -> None:
        import trio

        last = await trio.to_thread.run_sync(self.store.fingerprint)
        while True:
            await trio.sleep(1.0)
            current = await trio.to_thread.run_sync(self.store.fingerprint)
            if current != last:
                self.send.send_nowait("database")
            last = current

    @staticmethod
    async def _stop_on_signal(cancel: Any) -> None:
        import signal

        import trio

        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for _ in signals:
                cancel.cancel()
                return


def _relevant(_change: object, path: str) -> bool:
    """Changes ``watch`` passes on: not the sync's own state files."""
    name = Path(path).name
    return not name.startswith((STATE_FILE, ".memfs-sync-"))
