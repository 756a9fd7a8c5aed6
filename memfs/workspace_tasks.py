"""What the workspace commands do, without a mount: status, seed, reindex, export, import,
log, versions, restore, recover (their command-line side: ``memfs.commands``).

They write through the same document store as the mount (one transaction each, IronClaw's
write and reindex rules), so a document written by ``memfs import`` is exactly what a
``cp`` into the mount would have made.  They work on the live layout (``Workspace``):
legacy reads go through ``memfs.db.WholeDocumentStore``, Reborn ones through its document store.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any, TypeVar
from uuid import UUID

import psycopg

from memfs.config import Settings, redacted
from memfs.db import (
    Database,
    FileAttrs,
    open_database,
    open_for_writing,
)
from memfs.db.interface import DocRow, DocumentStore, SaveOptions, StoredDocument
from memfs.db.records import Write
from memfs.embeddings.config import EmbeddingSettings
from memfs.errors import EXIT_FAILED, EXIT_OK, CommandError, Refused, WriteRefused
from memfs.ironclaw.settings import ConfigError, resolve_embeddings, resolve_search
from memfs.local_tree import SILENT, Passed, memory_files, read_regular
from memfs.mountpoint import FSTYPE, mount_at
from memfs.paths import loadable_path
from memfs.processes import process_running, process_stopped
from memfs.scratch import ScratchRules
from memfs.seeds import BOOTSTRAP, FRESH_MARKERS, SEEDS
from memfs.tree import to_ns

T = TypeVar("T")


def progress(items: Iterable[T], label: str, total: int | None = None) -> Iterator[T]:
    """Yield items, drawing a progress bar with rate and time left (tqdm) on stderr when it
    is a terminal and there are more than a few; quiet otherwise (cron, pipes, --json)."""
    from tqdm import tqdm

    if total is None:
        items = list(items)
        total = len(items)
    quiet = not sys.stderr.isatty() or total <= 20
    # A terminal that reports no size (0x0: some ptys) gets 80x24: tqdm would draw nothing.
    size = shutil.get_terminal_size()
    yield from tqdm(items, desc=label, total=total, disable=quiet, unit="doc",
                    file=sys.stderr, ncols=size.columns, nrows=size.lines)  # fmt: skip


@dataclass
class Report:
    """Counts a command prints (or returns as JSON)."""

    action: str
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    #: One record per thing the command lists (JSON objects; one line each as text).
    items: list[dict[str, Any]] = field(default_factory=list)
    #: What the counts are about ("to": where a copy went), one line each before the items.
    details: dict[str, Any] = field(default_factory=dict)

    def add(self, key: str, n: int = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n

    def finish(self, as_json: bool) -> int:
        """``emit``, then the command's exit code: 1 if anything it was asked failed."""
        self.emit(as_json)
        return EXIT_FAILED if self.problems else EXIT_OK

    def emit(self, as_json: bool) -> None:
        """Print the report: counts and items on stdout, problems on stderr.

        With ``as_json`` every command prints the same shape: ``{"command", "counts",
        "items", "problems"}``, counts keyed by snake_case names.
        """
        if as_json:
            payload = {
                "command": self.action,
                **({"details": self.details} if self.details else {}),
                "counts": self.counts,
                "items": self.items,
                "problems": self.problems,
            }
            json.dump(payload, sys.stdout, indent=2)
            sys.stdout.write("\n")
            return
        summary = (
            ", ".join(f"{v} {k.replace('_', ' ')}" for k, v in self.counts.items())
            or "nothing to do"
        )
        print(f"memfs {self.action}: {summary}")
        for key, value in self.details.items():
            print(f"  {key}: {value}")
        for item in self.items:
            print("  " + "  ".join(str(value) for value in item.values()))
        for problem in self.problems:
            sys.stderr.write(f"memfs {self.action}: {problem}\n")


class Workspace:
    """The settings' workspace in whichever layout is live: the database, its documents
    (the storage interface, written as a mount writes) and whole-document look-ups."""

    def __init__(self, settings: Settings, *, writing: bool = True) -> None:
        # A command that writes is refused at once by a database that must not be written.
        self.database = open_for_writing(settings) if writing else open_database(settings)
        self.store: DocumentStore = self.database.documents(settings)

    def find(self, path: str) -> StoredDocument | None:
        """The document at ``path`` (the newest row of a duplicated legacy path)."""
        return self.store.find_document(path)

    def close(self) -> None:
        self.database.close()


# -- status ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Daemon:
    """A mount daemon's pid file (``daemon.pidfile_for``), running or left by a dead one."""

    pid: int
    pidfile: Path
    mountpoint: str
    user_id: str
    running: bool
    #: Where it logs ("": to a stream, or a daemon older than this field).
    log_file: str


def daemon_records(settings: Settings) -> list[_Daemon]:
    """Every daemon pid file of this database, whether its process runs or not."""
    identity = settings.database_identity()
    found = []
    for pidfile in sorted(settings.runtime_dir.glob("mount-*.pid")):
        try:
            pid, mountpoint, database, user_id, *rest = pidfile.read_text(
                encoding="utf-8"
            ).splitlines()
            if database != identity:
                continue
            found.append(_Daemon(int(pid), pidfile, mountpoint, user_id,
                                 process_running(int(pid)), rest[0] if rest else ""))  # fmt: skip
        except (OSError, ValueError):
            continue  # an older daemon's file, or one being written
    return found


def _running_daemons(settings: Settings) -> list[tuple[int, Path, str, str]]:
    """(pid, pid file, mountpoint, user id) of every running daemon of this database."""
    return [(d.pid, d.pidfile, d.mountpoint, d.user_id)
            for d in daemon_records(settings) if d.running]  # fmt: skip


def mounts_of(settings: Settings) -> list[dict[str, str]]:
    """memfs mounts of this database (any workspace), from the daemons' pid files.  A
    daemon that died (killed, crashed) left its pid file: ``daemon died`` once
    ``auto_unmount`` released the mount, ``daemon gone`` while the mount is still there."""
    found = []
    for daemon in daemon_records(settings):
        entry = mount_at(Path(daemon.mountpoint))
        mounted = entry is not None and entry.fstype == FSTYPE
        if daemon.running and not mounted:
            continue  # starting, or a detached daemon still saving: not a mount
        state = "mounted" if daemon.running else ("daemon gone" if mounted else "daemon died")
        if daemon.running and process_stopped(daemon.pid):
            state = "daemon stopped (SIGSTOP): answers nothing until `kill -CONT`"
        found.append({"mountpoint": daemon.mountpoint, "user_id": daemon.user_id,
                      "pid": str(daemon.pid), "state": state})  # fmt: skip
    return found


def _daemons_of(settings: Settings) -> list[tuple[int, Path]]:
    """(pid, pid file) of every running daemon of this workspace, mounted or detached."""
    return [
        (pid, pidfile)
        for pid, pidfile, _, user_id in _running_daemons(settings)
        if user_id == settings.user_id
    ]


def drain_mounts(settings: Settings, folder: Path) -> Report:
    """Ask every running daemon of the workspace to write what it holds in memory only
    (unsaved, not kept in the recovery area) into ``folder`` (``memfs recover --to``)."""
    from memfs.control import ask, socket_for

    report = Report(f"recover --to {folder}")
    for pid, pidfile in _daemons_of(settings):
        try:
            reply = ask(socket_for(pidfile), {"op": "drain", "to": str(folder.absolute())}, 60)
        except (OSError, ValueError) as exc:
            report.problems.append(f"daemon {pid} did not answer: {exc}")
            report.add("failed")
            continue
        if reply is None:
            continue
        for path in reply.get("written", []):
            report.items.append({"file": path, "daemon": pid})
            report.add("written")
        for problem in reply.get("failed", []):
            report.problems.append(f"daemon {pid}: {problem}")
            report.add("failed")
    report.add("written", 0)
    return report


def last_errors(settings: Settings, limit: int = 5) -> list[str]:
    """The errors this workspace's mounts logged in their current run (or the last run of
    one whose daemon died): not other databases', users' or earlier runs'."""
    lines: list[str] = []
    for daemon in daemon_records(settings):
        if daemon.user_id != settings.user_id or not daemon.log_file:
            continue
        try:  # the run began when its pid file was written; log times are local, as here
            since = f"{datetime.fromtimestamp(daemon.pidfile.stat().st_mtime):%Y-%m-%d %H:%M:%S}"
            with open(daemon.log_file, encoding="utf-8", errors="replace") as handle:
                lines += [f"{daemon.mountpoint}: {ln.strip()}" for ln in handle
                          if " ERROR " in ln and ln[:19] >= since]  # fmt: skip
        except OSError:
            continue
    return lines[-limit:]


def effective_settings(database: Database, owner: str) -> dict[str, dict[str, Any]]:
    """Each embedding/search setting IronClaw would use here, and where it came from."""
    stored = database.ironclaw_settings(owner)
    out: dict[str, dict[str, Any]] = {}
    try:
        search = resolve_search(stored, os.environ)
        embeddings = resolve_embeddings(stored, os.environ)
    except ConfigError as exc:
        return {"error": {"value": str(exc), "source": "configuration"}}
    values = {
        "embeddings enabled": embeddings.enabled,
        "embedding provider": embeddings.provider,
        "embedding model": embeddings.model,
        "embedding dimension": embeddings.dimension,
        "search fusion": search.fusion,
        "search k": search.rrf_k,
        "fts weight": search.fts_weight,
        "vector weight": search.vector_weight,
    }
    sources = {**embeddings.sources.by_name, **search.sources.by_name}
    for name, value in values.items():
        out[name] = {"value": value, "source": sources.get(name, "default")}
    if embeddings.enabled:
        provider = EmbeddingSettings.for_config(embeddings, stored, os.environ)
        credential = provider.credential_source if provider else None
        out["embedding credential"] = {
            "value": "found" if provider else "missing (embeddings off)",
            "source": credential or "none",
        }
    return out


def status(settings: Settings) -> dict[str, Any]:
    """What ``memfs status`` shows; read-only (``open_database(read_only=True)``)."""
    database = open_database(settings, read_only=True)
    try:
        summary = database.workspace_summary(settings)
        return {
            # IronClaw's embedding and search settings matter where it keeps embeddings.
            "settings": (
                effective_settings(database, settings.user_id)
                if database.keeps_embeddings()
                else {}
            ),
            "mounts": mounts_of(settings),
            "database": redacted(database.url),
            "embedded": database.embedded is not None,
            "embedded_restart": _restart(database, settings),
            "schema": database.schema.describe(),
            **summary,
            "last_errors": last_errors(settings),
        }
    finally:
        database.close()


def _restart(database: Database, settings: Settings) -> dict[str, Any] | None:
    """The embedded server's last restart by a mount (None: never, or not embedded)."""
    from memfs.db.embedded import last_restart

    return last_restart(settings.pgdata) if database.embedded is not None else None


#: ``status`` keys that are counts in the one JSON shape (the rest are details).
_STATUS_COUNTS = ("documents", "chunks", "embeddings_pending")


def status_json(info: dict[str, Any]) -> dict[str, Any]:
    """``status`` in every command's JSON shape: the mounts are its items, this
    workspace's mounts' errors its problems (they do not fail the command)."""
    details = {k: v for k, v in info.items()
               if k not in (*_STATUS_COUNTS, "mounts", "last_errors")}  # fmt: skip
    return {"command": "status", "details": details,
            "counts": {k: info[k] for k in _STATUS_COUNTS}, "items": info["mounts"],
            "problems": info["last_errors"]}  # fmt: skip


def print_status(info: dict[str, Any], as_json: bool) -> None:
    if as_json:
        json.dump(status_json(info), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return
    mounts = ", ".join(
        f"{m['mountpoint']} (user {m['user_id']!r})" for m in info["mounts"]
        if m["state"] == "mounted"
    )  # fmt: skip
    print(f"mounts:             {mounts or 'none'}")
    for gone in (m for m in info["mounts"] if m["state"] != "mounted"):
        where = f"{gone['mountpoint']} (user {gone['user_id']!r}): its daemon (pid {gone['pid']})"
        if gone["state"].startswith("daemon stopped"):
            print(f"daemon stopped:     {where} is stopped (SIGSTOP) and answers nothing: "
                  f"`kill -CONT {gone['pid']}` resumes it, `memfs umount --lazy "
                  f"{gone['mountpoint']}` detaches the mount")  # fmt: skip
        elif gone["state"] == "daemon gone":
            print(f"mount without daemon: {where} is gone; `memfs umount "
                  f"{gone['mountpoint']}` releases it, `memfs recover` lists what it could "
                  "not save")  # fmt: skip
        else:
            print(f"daemon died:        {where} ended without unmounting (the mount was "
                  "released); `memfs recover` lists what it could not save")  # fmt: skip
    kind = (
        "embedded"
        if info["embedded"]
        else ("IronClaw's file" if str(info["database"]).startswith("sqlite:") else "server")
    )
    print(f"database:           {info['database']} ({kind})")
    restart = info.get("embedded_restart")
    if restart:
        print(f"embedded server:    restarted {restart['restarted_at']} by mount pid "
              f"{restart['by_pid']} (it had stopped)")  # fmt: skip
    print(f"schema:             {info['schema']}")
    feed = "trigger installed" if info["change_feed"] else "none (mounts poll)"
    print(f"change feed:        {feed}")
    print(f"workspace:          user {info['user_id']!r}, agent {info['agent_id'] or 'none'}")
    if "scope" in info:
        print(f"reborn scope:       {info['scope']}")
    print(f"documents:          {info['documents']}")
    print(f"chunks:             {info['chunks']} ({info['embeddings_pending']} without embedding)")
    for name, item in info.get("settings", {}).items():
        print(f"{name + ':':<20}{item['value']} ({item['source']})")
    for error in info["last_errors"] or ["none"]:
        print(f"last errors:        {error}")


# -- seed, reindex, log ------------------------------------------------------------------


def seed(settings: Settings) -> Report:
    """memfs's starter files, only on a workspace memfs created.

    IronClaw seeds its own identity files (its onboarding ``BOOTSTRAP.md`` among them) at
    every start, but never over a file that exists: files memfs wrote first would keep
    IronClaw's own from ever being created.  So on IronClaw's database this refuses.
    """
    report = Report("seed")
    workspace = Workspace(settings)
    try:
        refusal = workspace.database.seed_refusal()
        if refusal is not None:
            raise Refused(refusal)
        missing = {p for p in [*SEEDS, BOOTSTRAP[0]] if workspace.find(p) is None}
        wanted = dict(SEEDS)
        profile = workspace.find("context/profile.json")
        if all(m in missing for m in FRESH_MARKERS) and not _valid_json(profile):
            wanted[BOOTSTRAP[0]] = BOOTSTRAP[1]
        for path, text in wanted.items():
            if path in missing:
                workspace.store.commit_document(Write(None, path, text), FileAttrs())
                report.add("created")
            else:
                report.add("already_present")
    finally:
        workspace.close()
    return report


def _valid_json(row: StoredDocument | None) -> bool:
    if row is None:
        return False
    try:
        json.loads(row.content)
    except ValueError:
        return False
    return True


def reindex(settings: Settings, paths: list[str] | None) -> Report:
    report = Report("reindex")
    workspace = Workspace(settings)
    try:
        store = workspace.store
        docs = store.reindex_targets(paths or None)
        if paths:
            found = {p for _, p in docs}
            report.problems += [f"no document at {p!r}" for p in paths if p not in found]
        for doc_id, path in progress(docs, "reindexing"):
            report.add("chunks", store.reindex(doc_id, path))
            report.add("documents")
    finally:
        workspace.close()
    return report


def daily_log(settings: Settings, text: str, tz_offset_minutes: int | None = None) -> str:
    """IronClaw's daily-log append: ``[HH:MM:SS] text`` to ``daily/YYYY-MM-DD.md``.

    In the machine's local time unless ``tz_offset_minutes`` is given (IronClaw's tool uses
    the user's zone).  Entries are separated by a newline as IronClaw's append does; unlike
    it, memfs ends its entry with one too, so a later ``echo >>`` starts a line of its own
    (and an entry after text that already ends with a newline adds no blank line).
    """
    if tz_offset_minutes is None:
        now = datetime.now().astimezone()
    else:
        now = datetime.now(timezone(timedelta(minutes=tz_offset_minutes)))
    path = f"daily/{now:%Y-%m-%d}.md"
    entry = f"[{now:%H:%M:%S}] {text}\n"
    workspace = Workspace(settings)
    try:
        existing = workspace.find(path)
        store = workspace.store
        if existing is None:
            store.commit_document(Write(None, path, entry), FileAttrs())
        else:
            content = existing.content
            joiner = "" if content == "" or content.endswith("\n") else "\n"
            store.commit_document(
                Write(existing.id, path, content + joiner + entry), FileAttrs(),
                SaveOptions(expected=existing.updated_at),
            )  # fmt: skip
    finally:
        workspace.close()
    return path


# -- versions ------------------------------------------------------------------------------


def list_versions(settings: Settings, path: str) -> Report:
    """The versions kept of ``path``, oldest first, then its current content."""
    report = Report(f"versions {path}")
    workspace = Workspace(settings, writing=False)
    try:
        store = workspace.database.version_store(settings)
        current = workspace.find(path)
        if current is None:
            raise CommandError(
                f"no document at {path!r} (`memfs search WORDS` or `ls` of a mount finds its "
                "path)", EXIT_FAILED,
            )  # fmt: skip
        if not store.available:
            report.problems.append(
                "this database keeps no versions (no memory_document_versions table)"
            )
        for version in store.versions(path):
            report.items.append(
                {
                    "version": version.number,
                    "created_at": version.created_at.astimezone(UTC).isoformat(),
                    "changed_by": version.changed_by or "",
                    "bytes": version.size,
                }
            )
        report.add("versions", len(report.items))
        report.items.append(
            {
                "version": "current",
                "created_at": current.updated_at.astimezone(UTC).isoformat(),
                "changed_by": "",
                "bytes": len(current.content.encode("utf-8")),
            }
        )
    finally:
        workspace.close()
    return report


def restore_version(settings: Settings, path: str, number: int) -> Report:
    """Save version ``number``'s content as ``path``'s content (an ordinary save)."""
    report = Report(f"restore {path}")
    workspace = Workspace(settings)
    try:
        if number < 0:  # a save as written, kept by the safety net (``as-saved_<n>``)
            kept = workspace.database.workspace(settings).kept
            content = kept.saver_copy(-number) if kept is not None else None
            what = f"as-saved_{-number:04d}"
            if content is not None and not any(
                c.id == -number
                for c in kept.saver_copies(path)  # type: ignore[union-attr]
            ):
                content = None  # another document's copy
        else:
            content = workspace.database.version_store(settings).version_content(path, number)
            what = f"version {number}"
        current = workspace.find(path)
        if content is None or current is None:
            raise CommandError(
                f"{path!r} has no {what} (`memfs versions {path}` and `ls .versions/{path}/` "
                "list them)",
                EXIT_FAILED,
            )
        result = workspace.store.commit_document(
            Write(current.id, path, content.decode("utf-8")), FileAttrs(),
            SaveOptions(expected=current.updated_at),
        )  # fmt: skip
        report.add("restored")
        report.add("kept_as_version", int(result.versioned))
        report.items.append({"path": path, "from_version": what})
    finally:
        workspace.close()
    return report


# -- export / import ---------------------------------------------------------------------


#: What the last ``memfs export`` into a folder wrote there (path -> SHA-256), so the next
#: one can tell a file edited since from its own copy.
EXPORT_STATE = ".memfs-export.json"


def export_tree(
    settings: Settings, target: Path, *, force: bool = False, dry_run: bool = False
) -> Report:
    """Every document of the workspace (either layout) as a file under ``target``, with
    its mtime; contents are read a batch at a time.  A file changed there since the last
    export (or not written by one) is kept, and listed, unless ``force``."""
    report = Report("export (dry run: nothing written)" if dry_run else "export")
    database = open_database(settings, read_only=dry_run)
    try:
        store = database.documents(settings)
        rows = store.load_documents()
        seen: set[str] = set()
        if not dry_run:
            target.mkdir(parents=True, exist_ok=True)
        exporter = _Exporter(store, target, report, force=force, dry_run=dry_run)
        batch: list[DocRow] = []
        for row in progress(rows, "exporting"):
            if row.path in seen or not loadable_path(row.path):
                report.problems.append(f"skipped {row.path!r} (duplicate row or unusable path)")
                report.add("skipped")
                continue
            seen.add(row.path)
            batch.append(row)
            if len(batch) == EXPORT_BATCH:
                exporter.write(batch)
                batch = []
        if batch:
            exporter.write(batch)
        exporter.finish()
    finally:
        database.close()
    return report


#: Documents whose contents one round trip of ``memfs export`` reads.
EXPORT_BATCH = 200


class _Exporter:
    """Writes batches of documents under ``target``, keeping ``EXPORT_STATE``."""

    def __init__(
        self, store: DocumentStore, target: Path, report: Report, *, force: bool, dry_run: bool
    ) -> None:
        self.store, self.target, self.report = store, target, report
        self.force, self.dry_run = force, dry_run
        try:
            loaded = json.loads((target / EXPORT_STATE).read_text())
            self.exported: dict[str, str] = dict(loaded.get("files", {}))
        except (OSError, ValueError, AttributeError):
            self.exported = {}
        self.written: dict[str, str] = {}

    def write(self, rows: list[DocRow]) -> None:
        contents = self.store.read_contents([row.id for row in rows])
        for row in rows:
            found = contents.get(row.id)
            if found is None:
                self.report.problems.append(f"skipped {row.path!r}: removed while exporting")
                self.report.add("skipped")
                continue
            self._one(row, found.data)

    def _one(self, row: DocRow, data: bytes) -> None:
        report, destination = self.report, self.target / row.path
        new_hash = hashlib.sha256(data).hexdigest()
        try:
            existing = read_regular(destination)
        except FileNotFoundError:
            existing = None
        except OSError as exc:
            if exc.errno not in (errno.ENOTDIR, errno.EISDIR, errno.ELOOP, errno.EINVAL):
                raise
            report.problems.append(f"skipped {row.path!r}: something else is at its path")
            report.add("skipped")
            return
        if existing is not None:
            old_hash = hashlib.sha256(existing).hexdigest()
            if old_hash == new_hash:
                self.written[row.path] = new_hash
                report.add("unchanged")
                return
            if not self.force and self.exported.get(row.path) != old_hash:
                report.problems.append(
                    f"kept {row.path!r}: the file there changed since the last export (or "
                    "no export wrote it); --force overwrites it"
                )
                report.add("kept_changed")
                return
        report.add("overwritten" if existing is not None else "exported")
        if self.dry_run:
            report.items.append(
                {"would": "overwrite" if existing is not None else "write", "path": row.path}
            )
            return
        try:
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(data)
        except (NotADirectoryError, IsADirectoryError, FileExistsError):
            report.problems.append(f"skipped {row.path!r}: a file and a directory share its path")
            report.add("skipped")
            return
        stamp = row.attrs.mtime_ns if row.attrs.mtime_ns is not None else to_ns(row.updated_at)
        os.utime(destination, ns=(stamp, stamp))
        self.written[row.path] = new_hash

    def finish(self) -> None:
        """Record what the folder now holds from this export (kept files keep their old
        record, so a later --force is still needed for them)."""
        if self.dry_run:
            return
        files = {**{p: h for p, h in self.exported.items() if (self.target / p).exists()},
                 **self.written}  # fmt: skip
        temp = self.target / (EXPORT_STATE + ".tmp")
        temp.write_text(json.dumps({"files": files}, indent=1, sort_keys=True))
        os.replace(temp, self.target / EXPORT_STATE)


#: What ``import`` passes over that fails it (exit 1): content the user may have meant to
#: import.  The rest (a repository, a tool's folder, a FIFO) is listed, by the mount's rules.
PASSED_FAILS = frozenset({"unreadable", "skipped_symlink_out"})


def import_tree(
    settings: Settings, source: Path, *, overwrite: bool, dry_run: bool = False
) -> Report:
    """Import a Markdown tree; existing paths are skipped unless ``overwrite``; never dups.
    ``dry_run``: each file that would be written is listed, and refused where IronClaw's
    rules that need no database would refuse it."""
    if not source.is_dir():
        raise FileNotFoundError(f"{source} is not a directory")
    report = Report("import (dry run: nothing written)" if dry_run else "import")
    database = open_database(settings, read_only=True) if dry_run else open_for_writing(settings)
    try:
        store = database.documents(settings)
        existing_ids: dict[str, UUID] = {}
        for row in store.load_documents():  # newest first where a path is duplicated
            existing_ids.setdefault(row.path, row.id)
        for item in progress(list(memory_files(source, ScratchRules())), "importing"):
            if isinstance(item, Passed):
                _passed(item, report)
                continue
            rel, full = item
            text = _importable_text(rel, full, report)
            if text is None:
                continue
            doc_id = existing_ids.get(rel)
            if doc_id is not None and not overwrite:
                report.add("skipped_existing")
                continue
            if dry_run:
                _would_import(store, Write(doc_id, rel, text), report)
                continue
            try:
                attrs = FileAttrs(None, full.stat().st_mtime_ns)
                result = store.commit_document(Write(doc_id, rel, text), attrs)
            except WriteRefused as refused:
                report.problems.append(f"{rel}: {refused.reason}, not imported")
                report.add("refused")
                continue
            existing_ids[rel] = result.doc_id
            report.add("created" if result.created else "overwritten")
    finally:
        database.close()
    return report


def _passed(item: Passed, report: Report) -> None:
    """A file the walk passes by (not memory), reported as its kind says."""
    if item.kind in PASSED_FAILS:
        report.problems.append(f"{item.path}: {item.why}, not imported")
    elif item.kind not in SILENT:
        report.items.append({"skipped": item.path, "why": item.why})
    if item.kind != "own_state":
        report.add(item.kind)


def _importable_text(rel: str, full: Path, report: Report) -> str | None:
    """The file's text, or None (reported) where IronClaw cannot store it: a name it
    cannot hold, a file that cannot be read, bytes that are not UTF-8 text."""
    if not loadable_path(rel):
        report.problems.append(f"{rel}: a name IronClaw cannot store, not imported")
        report.add("skipped_name")
        return None
    try:
        text = read_regular(full.resolve()).decode("utf-8")
        if "\x00" in text:
            raise UnicodeDecodeError("utf-8", b"", 0, 1, "NUL byte")
    except OSError as exc:
        report.problems.append(f"{rel}: cannot read ({exc.strerror}), not imported")
        report.add("unreadable")
        return None
    except UnicodeDecodeError:
        report.problems.append(f"{rel}: not UTF-8 text, not imported")
        report.add("skipped_not_text")
        return None
    return text


def _would_import(store: DocumentStore, write: Write, report: Report) -> None:
    """A dry run's line for one file: what it would write, or IronClaw's refusal."""
    refused = store.content_problem(write.path, write.content)
    if refused is not None:
        report.problems.append(f"{write.path}: {refused.reason}, not imported")
        report.add("refused")
        return
    report.items.append({"would": "create" if write.doc_id is None else "overwrite",
                         "path": write.path})  # fmt: skip
    report.add("created" if write.doc_id is None else "overwritten")


# -- recover ------------------------------------------------------------------------------


def recover(settings: Settings, action: str, *, force: bool = False) -> Report:
    """List, restore or discard what mounts of this workspace could not save.

    A restore is an ordinary write of the kept content (the content it replaces becomes a
    version where IronClaw keeps versions); what the database still refuses stays kept, and
    so does a copy of a document saved again after the copy was kept (unless ``force``).
    """
    from memfs.recovery import RecoveryArea

    area = RecoveryArea(settings.recovery_dir)
    pending = area.pending()
    report = Report(f"recover ({area.root})")
    report.problems.extend(area.refused)
    live = area.live_runs()
    if live:
        report.problems.append(
            f"{len(live)} running mount(s) still retry their own unsaved changes "
            f"({', '.join(live)}); they are left alone"
        )
    if action == "list":
        for item in pending:
            report.items.append(
                {
                    "path": item.path,
                    "bytes": item.size,
                    "kept_at": item.kept_at,
                    "reason": item.reason,
                    "file": str(item.stored),
                }
            )
        report.add("kept", len(pending))
        return report
    if action == "discard":
        for item in pending:
            area.remove(item)
        report.add("discarded", len(pending))
        return report
    if not pending:
        report.add("restored", 0)
        return report
    workspace = Workspace(settings)
    try:
        for item in pending:
            if _restore(workspace, item, report, force=force):
                area.remove(item)
                report.add("restored")
    finally:
        workspace.close()
    return report


def _restore(workspace: Workspace, item: Any, report: Report, *, force: bool) -> bool:
    """One kept copy written back as an ordinary save; False (reported) where it stays
    kept: unreadable, refused, or superseded by a later save (unless ``force``)."""
    try:
        data = read_regular(item.stored)
    except FileNotFoundError:
        return False  # removed meanwhile (discarded by another `memfs recover`)
    except OSError as exc:  # ELOOP: made a symlink since it was listed
        report.problems.append(f"{item.path}: cannot read {item.stored} ({exc})")
        report.add("still_kept")
        return False
    try:
        text = data.decode("utf-8")
        existing = workspace.find(item.path)
        kept_at = datetime.fromisoformat(item.kept_at)
        if existing and not force and existing.updated_at > kept_at:
            # Saved again after this copy was kept (by a later mount, or the agent):
            # restoring would put older content over it.
            report.problems.append(
                f"{item.path}: changed in the database after this copy was kept "
                f"({item.kept_at}); left as {item.stored} (--force restores it)"
            )
            report.add("superseded_still_kept")
            return False
        workspace.store.commit_document(
            Write(existing.id if existing else None, item.path, text), FileAttrs()
        )
    except (UnicodeDecodeError, WriteRefused, psycopg.Error) as exc:
        reason = " ".join(str(exc).split())
        report.problems.append(f"{item.path}: not restored ({reason}); still kept")
        report.add("still_kept")
        return False
    return True
