"""``memfs migrate``: a legacy workspace (``memory_documents`` with its versions) copied
into IronClaw's Reborn layout, of the same database or another.

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

import psycopg
from psycopg_pool import ConnectionPool

from memfs.config import Settings
from memfs.db import Database, legacy_scope, open_database
from memfs.db.history_store import HistoryStore
from memfs.db.reborn.layout import DEFAULT_AGENT, DEFAULT_TENANT, DEFAULT_USER, RebornScope
from memfs.db.reborn.store import RebornStore
from memfs.db.search_path import pin_session
from memfs.errors import EXIT_USAGE, CommandError, DatabaseError
from memfs.tools import Report, progress

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


def _target_pool(url: str, settings: Settings) -> ConnectionPool[Any]:
    """Connections to the target, which must hold IronClaw's Reborn tables already."""
    pool: ConnectionPool[Any] = ConnectionPool(
        url,
        min_size=1,
        max_size=1,
        open=False,
        kwargs={"autocommit": True, "prepare_threshold": None},  # see db._connect_kwargs
        configure=pin_session,  # IronClaw's tables, not memfs's schema, even for a role named memfs
    )
    try:
        pool.open(wait=True, timeout=settings.statement_timeout_ms / 1000)
        with pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*) FROM information_schema.columns WHERE table_schema = "
                "current_schema() AND table_name = 'root_filesystem_entries' "
                "AND column_name IN ('kind', 'indexed', 'version', 'is_dir', 'content_type')"
            ).fetchone()
    except (psycopg.Error, OSError) as exc:
        pool.close()
        raise DatabaseError(f"the target database cannot be used: {exc}") from None
    if row is None or row[0] != 5:
        pool.close()
        raise DatabaseError(
            "the target database has no IronClaw Reborn tables (root_filesystem_entries with "
            "kind, indexed and version): start IronClaw >= 1.1 against it once, then migrate"
        )
    return pool


def migrate(settings: Settings, target: Target, *, dry_run: bool = False) -> Report:
    """Copy the settings' legacy workspace into ``target``; the report counts what was
    (or, with ``dry_run``, would be) copied, and names each document not copied."""
    source = open_database(settings, read_only=True)
    try:
        return _migrate(source, settings, target, dry_run=dry_run)
    finally:
        source.close()


def _migrate(source: Database, settings: Settings, target: Target, *, dry_run: bool) -> Report:
    with source.pool.connection() as conn:
        found = conn.execute("SELECT to_regclass('memory_documents')").fetchone()
    if found is None or found[0] is None:
        raise DatabaseError("no legacy memory here (no memory_documents table) to migrate")
    scope = legacy_scope(settings)
    history = HistoryStore(source.pool, scope)
    to_scope = target.scope(scope.user_id)
    pool = _target_pool(target.database_url or source.url, settings)
    report = Report("migrate (dry run)" if dry_run else "migrate")
    started = time.monotonic()
    try:
        store = RebornStore(pool, to_scope)
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
    finally:
        pool.close()
    report.add("milliseconds", int((time.monotonic() - started) * 1000))
    agent = f", agent {scope.agent_id}" if scope.agent_id else ""
    report.details["from"] = f"memory_documents, user {scope.user_id!r}{agent}"
    report.details["to"] = to_scope.prefix
    return report


def target_from(args: Any) -> Target:
    """The ``--to-*`` options of ``memfs migrate``."""
    return Target(
        database_url=args.to_database_url,
        tenant=args.to_tenant,
        user_id=args.to_user,
        agent=args.to_agent,
        project=args.to_project,
    )
