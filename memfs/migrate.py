"""``memfs migrate``: a workspace copied, with every version, into IronClaw's Reborn layout
of the same database or another: a legacy workspace (``memory_documents``) into Reborn,
or a Reborn workspace between IronClaw's libSQL file and PostgreSQL, either way.

Each document is copied in a transaction of its own with every version it had (as version
sidecars) and chunks rebuilt as IronClaw's indexer builds them, so a run stopped at any
point leaves only whole documents and a second run goes on where the first stopped: what
is already there with the same content and as many versions is counted as present, and
anything else found at a path (memory the agent wrote since) is left as it is and
reported.  The legacy rows are never written: the source is read through read-only
connections, which the server itself holds to that.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from memfs.config import Settings, libsql_path
from memfs.db import (
    DEFAULT_AGENT,
    DEFAULT_TENANT,
    DEFAULT_USER,
    Database,
    LibsqlTarget,
    RebornScope,
    RebornTarget,
    open_database,
)
from memfs.db.capabilities import HistorySource, MigrationSource
from memfs.db.limits import reborn_max_path
from memfs.errors import EXIT_USAGE, CommandError, DatabaseError
from memfs.workspace_tasks import Report, progress

#: IronClaw's legacy owner id when none is configured: its memory is the Reborn default
#: user's (where IronClaw >= 1.1 reads when none is configured).
LEGACY_DEFAULT_USER = "default"
#: Not memory: IronClaw's engine state (its own converter skipped these too).
ENGINE_PREFIXES = ("engine/", ".system/engine/")


@dataclass(frozen=True)
class Target:
    """Where the copy goes: a database (None: the source's) and a Reborn scope."""

    database_url: str | None
    tenant: str | None = None
    user_id: str | None = None
    agent: str | None = None
    project: str | None = None

    def scope(self, source_user: str) -> RebornScope:
        user = self.user_id or (DEFAULT_USER if source_user == LEGACY_DEFAULT_USER else source_user)
        agent: str | None = self.agent or DEFAULT_AGENT
        if agent is not None and agent.lower() == "none":
            agent = None
        try:
            return RebornScope(self.tenant or DEFAULT_TENANT, user, agent, self.project)
        except ValueError as exc:
            raise CommandError(f"target scope: {exc}", EXIT_USAGE) from None


def migrate(settings: Settings, target: Target, *, dry_run: bool = False) -> Report:
    """Copy the settings' legacy workspace into ``target``; the report counts what was
    (or, with ``dry_run``, would be) copied, and names each document not copied."""
    source = open_database(settings, read_only=True)
    try:
        return _migrate(source, settings, target, dry_run=dry_run)
    finally:
        source.close()


def _source(source: Database, settings: Settings) -> MigrationSource:
    """What is copied: the legacy history, or a Reborn workspace (PostgreSQL or libSQL),
    as the database's engine finds it."""
    found = source.migration_source(settings)
    if found is None:
        raise DatabaseError("no legacy memory here (no memory_documents table) to migrate")
    return found


def _target(url: str, scope: RebornScope, timeout: float) -> Any:
    """The Reborn store written: IronClaw's libSQL file or a PostgreSQL database."""
    path = libsql_path(url)
    if path is None:
        return RebornTarget(url, scope, timeout=timeout)
    return LibsqlTarget(path, scope)


def _migrate(source: Database, settings: Settings, target: Target, *, dry_run: bool) -> Report:
    history, described, reborn, user_id = _source(source, settings)
    if reborn is not None and not any((target.tenant, target.user_id, target.agent,
                                       target.project)):  # fmt: skip
        to_scope = reborn
    else:
        to_scope = target.scope(user_id)
    to_url = target.database_url or source.url
    if reborn is not None and to_url == source.url and to_scope == reborn:
        raise CommandError("the source and the target are the same workspace: name another "
                           "with --to-database-url or --to-user", EXIT_USAGE)  # fmt: skip
    _check_paths(history, to_scope)
    report = Report("migrate (dry run)" if dry_run else "migrate")
    started = time.monotonic()
    timeout = settings.statement_timeout_ms / 1000
    with _target(to_url, to_scope, timeout) as store:
        total = history.count()
        for doc in progress(history.histories(), "memfs migrate", total):
            report.add("documents_read")
            if doc.duplicates:
                report.add("duplicate_rows_left", doc.duplicates)
            if doc.path.startswith(ENGINE_PREFIXES):
                report.add("engine_state_skipped")
                continue
            outcome = store.import_history(doc, dry_run=dry_run)
            if outcome.action == "copied":
                report.add("documents_copied")
                report.add("versions_copied", outcome.versions)
                report.add("chunks_built", outcome.chunks)
                report.add("metadata_sidecars", int(outcome.meta))
            elif outcome.action == "present":
                report.add("already_there")
            else:
                report.add("left_alone" if outcome.action == "differs" else "refused")
                report.items.append(
                    {"path": doc.path, "outcome": outcome.action, "reason": outcome.reason}
                )
    report.add("milliseconds", int((time.monotonic() - started) * 1000))
    report.details["from"] = described
    report.details["to"] = to_scope.prefix
    return report


def _check_paths(history: HistorySource, scope: RebornScope) -> None:
    """Refuse, before anything is copied, a workspace with paths too long for IronClaw's
    index on PostgreSQL under the target scope (a libSQL target holds to the same limit,
    so the workspace can move up later)."""
    paths = history.paths()
    most = reborn_max_path(scope.prefix)
    long = sorted(p for p in paths
                  if len(p.encode()) > most and not p.startswith(ENGINE_PREFIXES))  # fmt: skip
    if long:
        shown = ", ".join(repr(p[:60] + "…") if len(p) > 60 else repr(p) for p in long[:5])
        more = f" and {len(long) - 5} more" if len(long) > 5 else ""
        raise CommandError(
            f"{len(long)} document path(s) are longer than IronClaw's index on PostgreSQL "
            f"takes under {scope.prefix} ({most} bytes): {shown}{more}; rename them in the "
            "source first: nothing was copied", EXIT_USAGE,
        )  # fmt: skip


def target_from(args: Any) -> Target:
    """The ``--to-*`` options of ``memfs migrate``."""
    return Target(
        database_url=args.to_database_url,
        tenant=args.to_tenant,
        user_id=args.to_user,
        agent=args.to_agent,
        project=args.to_project,
    )
