"""``memfs undelete``: put back documents memfs kept when they were deleted.

A document deleted through a mount (``rm``, ``rm -rf``, a move into a tool folder such as
Obsidian's ``.trash``), and on the legacy layout with memfs's trigger also one deleted by
SQL, is kept with its versions in memfs's own storage (``KeptHistory``) for the retention
(``MEMFS_KEEP_DELETED_DAYS`` or ``-o keep_deleted_days=N``, 30 by default). Undeleting
writes its last content back as a new document by IronClaw's rules (chunks, full text, a new
version history: the kept versions stay readable under ``.at/``), at its path or ``--to``
another; a path that holds a document now is refused, never overwritten. A folder's path
undeletes every kept document below it that is not there now."""

from __future__ import annotations

from memfs.config import Settings
from memfs.db import open_database, open_for_writing
from memfs.db.capabilities import Deletion, KeptHistory
from memfs.db.interface import FileAttrs
from memfs.db.records import Write
from memfs.errors import EXIT_FAILED, EXIT_USAGE, CommandError
from memfs.paths import loadable_path, normalize_path
from memfs.workspace_tasks import Report


def _latest(deletions: list[Deletion]) -> dict[str, Deletion]:
    """The last deletion kept of each path."""
    latest: dict[str, Deletion] = {}
    for deletion in deletions:  # oldest first
        latest[deletion.path] = deletion
    return latest


def _listed(deletion: Deletion) -> dict[str, object]:
    return {
        "path": deletion.path,
        "deleted_at": deletion.deleted_at.isoformat(timespec="seconds"),
        "deleted_by": deletion.deleted_by,
        "bytes": deletion.size,
    }


def list_deleted(settings: Settings, path: str | None) -> Report:
    """What is kept (below ``path`` if given), oldest deletion first."""
    report = Report("undelete --list")
    database = open_database(settings, read_only=True)
    try:
        kept = _kept(database.workspace(settings).kept)
        for deletion in kept.deletions():
            if path and not _below(deletion.path, path):
                continue
            report.add("kept")
            report.items.append(_listed(deletion))
    finally:
        database.close()
    return report


def _kept(kept: KeptHistory | None) -> KeptHistory:
    if kept is None:
        raise CommandError("this database keeps no deleted documents", EXIT_FAILED)
    return kept


def _below(path: str, folder: str) -> bool:
    folder = folder.rstrip("/")
    return path == folder or path.startswith(folder + "/")


def undelete(settings: Settings, path: str, to: str | None = None) -> Report:
    """Write back the last kept content of ``path`` (or of every kept document below the
    folder ``path``), at ``to`` if given."""
    report = Report(f"undelete {path}")
    if to is not None and not loadable_path(normalize_path(to)):
        raise CommandError(
            f"--to {to!r}: no mount could show a document there (.search, .versions, .at, "
            ".recent, .status and .prompt are memfs's own names): give a plain path",
            EXIT_USAGE,
        )
    database = open_for_writing(settings)
    try:
        workspace = database.workspace(settings)
        kept = _kept(workspace.kept)
        store = workspace.documents
        latest = _latest(kept.deletions())
        chosen = [latest[path]] if path in latest else [
            d for p, d in sorted(latest.items()) if _below(p, path) and p != path
        ]  # fmt: skip
        if not chosen:
            raise CommandError(
                f"nothing deleted at {path!r} is kept (`memfs undelete --list` lists what "
                "is)", EXIT_FAILED,
            )  # fmt: skip
        if to is not None and len(chosen) > 1:
            to = to.rstrip("/")
        for deletion in chosen:
            target = deletion.path
            if to is not None:
                target = to if len(chosen) == 1 and deletion.path == path else (
                    to + deletion.path[len(path.rstrip("/")):]
                )  # fmt: skip
            if store.find_document(target) is not None:
                report.add("refused_path_taken")
                report.problems.append(
                    f"{target!r} holds a document now: not overwritten (`--to NEWPATH` puts "
                    "the kept one elsewhere)"
                )
                continue
            document = kept.kept_document(deletion.id)
            if document is None:
                report.add("gone")
                continue
            store.commit_document(Write(None, target, document.content), FileAttrs())
            report.add("undeleted")
            report.items.append({"path": target, **_listed(deletion)})
    finally:
        database.close()
    if report.problems and not report.counts.get("undeleted"):
        raise CommandError("; ".join(report.problems), EXIT_FAILED)
    return report
