"""Database access: connection pool, embedded server, schema, and the stores.

All SQL memfs runs lives in this package: ``schema`` for DDL, ``store`` for the document
engine behind ``interface.DocumentStore``, and one narrow store per other consumer
(``search_store``, ``embedding_store``, ``reindex_store``, ``whole_documents``, ``statistics``).
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from pgvector.psycopg import register_vector
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool

from memfs.config import Settings, libsql_path
from memfs.db.capabilities import MigrationSource, legacy_described, reborn_described
from memfs.db.deadline import WatchedPool
from memfs.db.embedded import release_embedded, start_embedded
from memfs.db.health import WorkspaceHealth
from memfs.db.interface import CommitResult, DocRow, DocumentStore, FileAttrs, VersionStore
from memfs.db.ironclaw_settings import onboarding_completed, read_ironclaw_settings
from memfs.db.kept_store import KeptStore, legacy_workspace
from memfs.db.legacy.health import LegacyHealth
from memfs.db.legacy.postgres.embedding_store import EmbeddingStore
from memfs.db.legacy.postgres.history_store import HistoryStore
from memfs.db.legacy.postgres.reindex_store import ReindexStore
from memfs.db.legacy.postgres.search_store import SearchStore
from memfs.db.legacy.postgres.statistics import PlannerStatistics
from memfs.db.legacy.postgres.store import MetaStore
from memfs.db.legacy.postgres.version_store import LegacyVersionStore
from memfs.db.legacy.postgres.whole_documents import WholeDocumentStore
from memfs.db.libsql.connection import NotIronClawFile
from memfs.db.libsql.database import file_read_only_reason, open_libsql
from memfs.db.libsql.discovery import choose_database
from memfs.db.libsql.files import NoIronClawFile
from memfs.db.libsql.target import LibsqlTarget
from memfs.db.libsql.watch import wake_on_commits
from memfs.db.reborn.health import RebornHealth
from memfs.db.reborn.layout import DEFAULT_AGENT, DEFAULT_TENANT, DEFAULT_USER, RebornScope
from memfs.db.reborn.postgres.version_store import RebornVersionStore
from memfs.db.reborn.search_store import IndexSession, RebornSearchStore
from memfs.db.reborn.store import RebornStore
from memfs.db.reborn.target import RebornTarget
from memfs.db.schema import (
    SchemaInfo,
    ensure_schema,
    has_change_feed,
    inspect,
    install_change_feed,
    memfs_schema_version,
)
from memfs.db.scoped import Scope
from memfs.db.search_path import as_option, pin
from memfs.db.tool_file_store import ToolFileStore
from memfs.db.workspace import FullTextRanking, HybridRanking, Ranking, Workspace
from memfs.errors import DatabaseError
from memfs.options import SettingError

__all__ = [
    "DEFAULT_AGENT",
    "DEFAULT_TENANT",
    "DEFAULT_USER",
    "CommitResult",
    "Database",
    "DocRow",
    "DocumentStore",
    "EmbeddingStore",
    "FileAttrs",
    "FullTextRanking",
    "HybridRanking",
    "LibsqlTarget",
    "MetaStore",
    "NoIronClawFile",
    "NotIronClawFile",
    "PlannerStatistics",
    "Ranking",
    "RebornScope",
    "RebornStore",
    "RebornTarget",
    "ReindexStore",
    "SchemaInfo",
    "Scope",
    "SearchStore",
    "WholeDocumentStore",
    "Workspace",
    "choose_database",
    "file_read_only_reason",
    "legacy_scope",
    "open_database",
    "open_for_writing",
    "reborn_scope",
    "wake_on_commits",
]

log = logging.getLogger(__name__)

#: Seconds a pooled connection beyond the first may stay idle before it is closed.
IDLE_CONNECTION_SECONDS = 30.0


def legacy_scope(settings: Settings) -> Scope:
    """The ``memory_documents`` workspace the settings name (the agent is a UUID there)."""
    agent = settings.agent_id
    if agent is None or agent.lower() == "none":
        return Scope(settings.user_id, None)
    try:
        return Scope(settings.user_id, UUID(agent))
    except ValueError:
        raise SettingError(
            f"--agent-id {agent!r}: this database keeps memory in memory_documents, whose "
            "agent ids are UUIDs"
        ) from None


def reborn_scope(settings: Settings) -> RebornScope:
    """The Reborn workspace the settings name, with IronClaw's defaults for what is not
    given (docs/ironclaw/reborn.md §3.1)."""
    user = settings.user_id if "user_id" in settings.given else DEFAULT_USER
    agent: str | None = settings.agent_id or DEFAULT_AGENT
    if agent is not None and agent.lower() == "none":
        agent = None
    try:
        return RebornScope(settings.tenant or "reborn-cli", user, agent, settings.project)
    except ValueError as exc:
        raise SettingError(f"Reborn scope: {exc}") from None


@dataclass
class Database:
    """An open database: its pool, what its schema holds, and the embedded server if any."""

    url: str
    pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]]
    schema: SchemaInfo
    embedded: Any = None
    connect_kwargs: dict[str, Any] = field(default_factory=dict)
    #: Where (and how) the change feed LISTENs: a direct connection, never a pooler's.
    #: None: no LISTEN is possible (a pooler without --listen-url): mounts poll.
    listen_url: str | None = None
    listen_kwargs: dict[str, Any] = field(default_factory=dict)
    #: ``SET LOCAL`` values for each write transaction (a pooler forbids startup options).
    transaction_settings: dict[str, str] = field(default_factory=dict)
    #: A file whose writes wake the poll (IronClaw's libSQL file); none on a server.
    watched_file: Path | None = None
    #: Opened for a read-only command: its connections refuse every write.
    read_only: bool = False

    def index_session(self, settings: Settings) -> IndexSession | None:
        """How to open a direct session on which a search index may be built for as long
        as it takes (no statement timeout); None on a read-only mount or command, and
        through a pooler with no direct URL (a session's settings would leak there)."""
        if self.read_only or settings.read_only or self.listen_url is None:
            return None
        url, kwargs = self.listen_url, {**self.listen_kwargs, "application_name": "memfs-index"}
        return lambda: psycopg.connect(url, **kwargs)

    def has_change_feed(self) -> bool:
        with self.pool.connection() as conn:
            return has_change_feed(conn)

    def install_change_feed(self) -> None:
        with self.pool.connection() as conn:
            install_change_feed(conn)

    def identity(self) -> dict[str, str]:
        """What names this database whatever URL reaches it (an alias, a pooler, another
        host name): the cluster's system identifier, which initdb draws and restores and
        replicas keep, where the role may read it, and the database's OID."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT oid::text FROM pg_database WHERE datname = current_database()"
            ).fetchone()
            found = {"database_oid": row[0] if row else ""}
            try:
                with conn.transaction():
                    row = conn.execute(
                        "SELECT system_identifier::text FROM pg_control_system()"
                    ).fetchone()
                    found["server"] = row[0] if row else ""
            except psycopg.Error:
                pass  # not granted to this role: the OID and the layout's scope remain
        return found

    def memfs_schema_version(self) -> int | None:
        """The version of memfs's own schema here (None: not created)."""
        with self.pool.connection() as conn:
            return memfs_schema_version(conn)

    def extension_version(self, name: str) -> str | None:
        """The installed version of a PostgreSQL extension (None: not installed)."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = %s", (name,)
            ).fetchone()
        return str(row[0]) if row else None

    def health(self, settings: Settings) -> WorkspaceHealth:
        """``memfs doctor``'s checks of the workspace the settings name."""
        sidecars = self.memfs_schema_version() is not None
        if self.reborn:
            return RebornHealth(RebornStore(self.pool, reborn_scope(settings)),
                                has_sidecars=sidecars)  # fmt: skip
        return LegacyHealth(self.pool, legacy_scope(settings), has_sidecars=sidecars)

    def lock_held_since(self) -> float | None:
        """A server's locks are waited for inside its statements: none to report."""
        return None

    def ping(self) -> None:
        """One round trip to the server (the call breaker's probe)."""
        with self.pool.connection() as conn:
            conn.execute("SELECT 1")

    def onboarding_completed(self, owner: str) -> bool:
        """IronClaw's ``profile_onboarding_completed`` setting for ``owner``."""
        with self.pool.connection() as conn:
            return onboarding_completed(conn, owner)

    def ironclaw_settings(self, owner: str) -> dict[str, Any]:
        """IronClaw's settings-table values for ``owner`` (they win over the environment)."""
        with self.pool.connection() as conn:
            return read_ironclaw_settings(conn, owner)

    @property
    def layout(self) -> str:
        """The live memory layout's rule set: ``legacy`` (IronClaw <= 1.0's
        ``memory_documents``) or ``reborn`` (1.1 and later)."""
        return "reborn" if self.reborn else "legacy"

    def polls_by_design(self, settings: Settings) -> str | None:
        """Why mounts of this layout poll whatever is installed (None: a change feed can
        announce other writers' changes): Reborn's IronClaw announces nothing."""
        if self.reborn:
            scope = reborn_scope(settings).describe()
            table = "IronClaw Reborn memory (root_filesystem_entries)"
            return f"{table}, {scope}; IronClaw notifies no changes"
        return None

    def notifies_changes(self) -> bool:
        """Whether other writers' changes are announced: memfs's change-feed trigger on the
        legacy layout (``polls_by_design`` says why not on Reborn)."""
        return not self.reborn and self.has_change_feed()

    def keeps_embeddings(self) -> bool:
        """Whether the layout stores embeddings (pgvector): the legacy one.  IronClaw
        v1.3's Reborn memory writes none."""
        return not self.reborn

    def waiting_work(self, settings: Settings) -> tuple[int, int, int] | None:
        """Documents waiting to be re-chunked, chunks, and chunks without an embedding, of
        the settings' workspace; None where the layout queues no such work (Reborn
        re-chunks within each save and embeds nothing)."""
        if self.reborn:
            return None
        scope = legacy_scope(settings)
        queued = (
            self.reindex_store(scope).queued_for_reindex()
            if self.memfs_schema_version() is not None
            else 0
        )
        chunks, pending = self.embedding_store(scope).count_chunks()
        return queued, chunks, pending

    def workspace_summary(self, settings: Settings) -> dict[str, Any]:
        """``memfs status``'s layout-specific part: whether a change feed announces other
        writers, who the workspace belongs to, and its counts (documents, chunks, chunks
        without an embedding).  Reads only; creates nothing, memfs's own tables included."""
        if self.reborn:
            scope = reborn_scope(settings)
            documents, chunks = RebornStore(self.pool, scope).counts()
            return {"change_feed": False, "user_id": scope.user_id, "agent_id": scope.agent,
                    "scope": scope.prefix, "documents": documents, "chunks": chunks,
                    "embeddings_pending": 0}  # fmt: skip
        legacy = legacy_scope(settings)
        chunks, pending = self.embedding_store(legacy).count_chunks()
        return {"change_feed": self.has_change_feed(), "user_id": settings.user_id,
                "agent_id": str(settings.agent_id) if settings.agent_id else None,
                "documents": self.whole_documents(legacy).count_documents(), "chunks": chunks,
                "embeddings_pending": pending}  # fmt: skip

    def read_only_reason(self) -> str | None:
        """Why this database mounts read-only whatever was asked (None: it need not): a
        role that may only read the memory table would take saves it can never commit
        (kept in memory, then promised to a ``recover --restore`` that cannot work)."""
        table = "root_filesystem_entries" if self.reborn else "memory_documents"
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT current_user, to_regclass(%(t)s) IS NULL OR ("
                "has_table_privilege(to_regclass(%(t)s), 'INSERT') AND "
                "has_table_privilege(to_regclass(%(t)s), 'UPDATE') AND "
                "has_table_privilege(to_regclass(%(t)s), 'DELETE'))",
                {"t": table},
            ).fetchone()
        if row is None or row[1]:
            return None
        return (
            f"the role {row[0]!r} may not write {table} (no INSERT, UPDATE or DELETE): "
            "memfs can only read it here (grant them to write through memfs)"
        )

    def seed_refusal(self) -> str | None:
        """Why ``memfs seed`` writes no starter files here (None: it may)."""
        if self.reborn:
            return ("this is IronClaw's Reborn memory: IronClaw >= 1.1 seeds nothing and "
                    "takes its identity from its own system prompt file, so starter files "
                    "here would be plain documents; memfs seeds nothing")  # fmt: skip
        if self.schema.kind == "ironclaw":
            return ("this is IronClaw's database: IronClaw writes its own identity files "
                    "(AGENTS.md, SOUL.md, BOOTSTRAP.md, ...) at its next start and never "
                    "replaces an existing one, so memfs seeds nothing here")  # fmt: skip
        return None

    @property
    def reborn(self) -> bool:
        """Whether the agent's memory is IronClaw's Reborn layout here (v1.1+)."""
        return self.schema.kind == "reborn"

    def workspace(self, settings: Settings, origin: str | None = None) -> Workspace:
        """The stores of the workspace the settings name, on the live layout: the one
        place the engine is chosen (``memfs.db.workspace``).  ``origin`` tags this
        process's writes, so its own change-feed events are told apart."""
        if self.reborn:
            scope = reborn_scope(settings)
            store = RebornStore(self.pool, scope, origin=origin)
            readers: list[DocumentStore] = [
                RebornStore(self.pool, dataclasses.replace(scope, user_id=name))
                for name in settings.read_scopes
            ]
            return Workspace(
                documents=store,
                ranking=FullTextRanking(
                    RebornSearchStore(self.pool, scope, index_session=self.index_session(settings)),
                    store.id_of,
                ),
                versions=RebornVersionStore(self.pool, scope),
                tool_files=ToolFileStore(self.pool, scope.prefix),
                readers=readers,
                kept=KeptStore(self.pool, scope.prefix),
            )
        legacy = legacy_scope(settings)
        return Workspace(
            documents=self.store(legacy, origin=origin),
            ranking=HybridRanking(SearchStore(self.pool, legacy)),
            versions=self.version_store(settings),
            # The key under which a legacy workspace's tool files are kept.
            tool_files=ToolFileStore(self.pool, legacy_workspace(legacy.user_id, legacy.agent_id)),
            readers=[self.store(Scope(name)) for name in settings.read_scopes],
            kept=KeptStore(self.pool, legacy_workspace(legacy.user_id, legacy.agent_id)),
            reindex=ReindexStore(self.pool, legacy),
            embeddings=EmbeddingStore(self.pool, legacy),
            statistics=PlannerStatistics(self.pool),
            onboarded=functools.partial(self.onboarding_completed, legacy.user_id),
        )

    def legacy_history(self, settings: Settings) -> HistoryStore | None:
        """Every legacy document of the settings' workspace with its versions, to copy into
        Reborn (``memfs migrate``); None where this database holds no legacy memory."""
        with self.pool.connection() as conn:
            found = conn.execute("SELECT to_regclass('memory_documents')").fetchone()
        if found is None or found[0] is None:
            return None
        return HistoryStore(self.pool, legacy_scope(settings))

    def migration_source(self, settings: Settings) -> MigrationSource | None:
        """What ``memfs migrate`` copies: the settings' legacy workspace where this
        database holds legacy memory, else its Reborn workspace; None: neither."""
        history = self.legacy_history(settings)
        if history is not None:
            return MigrationSource(
                history, legacy_described(history.scope), None, history.scope.user_id
            )
        if not self.reborn:
            return None
        scope = reborn_scope(settings)
        described = reborn_described(scope, self.url)
        return MigrationSource(RebornStore(self.pool, scope), described, scope, scope.user_id)

    def documents(self, settings: Settings, origin: str | None = None) -> DocumentStore:
        """The workspace the settings name, in whichever layout is the live one."""
        if self.reborn:
            return RebornStore(self.pool, reborn_scope(settings), origin=origin)
        return self.store(legacy_scope(settings), origin=origin)

    def store(self, scope: Scope, origin: str | None = None) -> MetaStore:
        """A legacy workspace's documents (the filesystem model's engine, and writes)."""
        return MetaStore(
            self.pool, scope, self.schema, origin=origin, settings=self.transaction_settings
        )

    def version_store(self, settings: Settings) -> VersionStore:
        """The versions kept of the workspace the settings name, in the live layout."""
        if self.reborn:
            return RebornVersionStore(self.pool, reborn_scope(settings))
        return LegacyVersionStore(
            self.pool, legacy_scope(settings), available=self.schema.has_versions
        )

    def search_store(self, scope: Scope) -> SearchStore:
        return SearchStore(self.pool, scope)

    def embedding_store(self, scope: Scope) -> EmbeddingStore:
        return EmbeddingStore(self.pool, scope)

    def reindex_store(self, scope: Scope) -> ReindexStore:
        return ReindexStore(self.pool, scope)

    def whole_documents(self, scope: Scope) -> WholeDocumentStore:
        return WholeDocumentStore(self.pool, scope)

    def statistics(self) -> PlannerStatistics:
        return PlannerStatistics(self.pool)

    def close(self) -> None:
        self.pool.close()
        if self.embedded is not None:
            release_embedded(self.embedded)  # stops the server if this was its last user
            self.embedded = None


#: A threshold no statement reaches by count: only ``prepare=True`` prepares.
ASKED_ONLY = 1 << 30


def _connect_kwargs(
    settings: Settings,
    *,
    read_only: bool = False,
    pooled: bool | None = None,
    url: str | None = None,
    search_path: str | None = None,
) -> dict[str, Any]:
    """libpq/psycopg connection settings.  Through a transaction-mode pooler (``pooled``)
    a session has no state of its own: no startup ``options`` (PgBouncer refuses them) and
    no server-side prepared statements; the timeouts (and a pinned ``search_path``) are
    then set per write transaction and the client-side call deadline bounds every wait.
    Startup ``options`` the URL gives are kept, ahead of memfs's own."""
    pooled = settings.pooler if pooled is None else pooled
    kwargs: dict[str, Any] = {
        "autocommit": True,
        "application_name": "memfs",
        "connect_timeout": max(2, settings.statement_timeout_ms // 2000),
        # Over TCP, notice a dead peer or a partition without waiting for the OS's hours:
        # probe an idle connection after 10 s, and give up on unacknowledged data after the
        # call deadline.  (libpq ignores these on Unix sockets; the call deadline covers those.)
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": int(settings.call_deadline * 1000),
    }
    # Server-side prepared statements only where a store asks (``prepare=True``: a save's
    # statements, planned once per connection instead of at every save), never by count:
    # psycopg would prepare a multi-statement DDL string it saw five times, which the
    # server refuses.  A pipeline a guard (``memfs.expect``) aborts skips the Parse of the
    # statements after the guard; psycopg drops those from its cache, and the ROLLBACK
    # that follows clears the cache and the server's (DEALLOCATE ALL).  Through a pooler
    # (transaction mode) none: a statement prepared on one server connection is unknown
    # on the next, and psycopg ignores ``prepare=True`` when the threshold is None.
    kwargs["prepare_threshold"] = None
    if pooled:
        return kwargs
    kwargs["prepare_threshold"] = ASKED_ONLY
    given = conninfo_to_dict(url).get("options") if url else None
    options = (
        (f"{given} " if given else "") + f"-c statement_timeout={settings.statement_timeout_ms} "
        f"-c lock_timeout={settings.lock_timeout_ms} "
        f"-c idle_in_transaction_session_timeout={settings.statement_timeout_ms * 3}"
    )
    if read_only:  # the server itself refuses any write from a read-only command
        options += " -c default_transaction_read_only=on"
    if search_path is not None:
        options += " " + as_option(search_path)
    kwargs["options"] = options
    return kwargs


def _configure_connection(conn: psycopg.Connection[Any]) -> None:
    """Teach each pooled connection pgvector's type (if the extension is installed)."""
    try:
        register_vector(conn)
    except psycopg.ProgrammingError:
        log.warning("the vector extension is not installed: vector search is unavailable")


#: The oldest PostgreSQL memfs runs on (``gen_random_uuid()`` in core, generated columns);
#: ``memfs.versions.SERVER_NEEDS`` and the README say so.
OLDEST_SERVER = 130000


def _check_server_version(version: int) -> None:
    """Refuse, in one line, a server older than ``OLDEST_SERVER`` (its SQL errors would
    not say why)."""
    if version < OLDEST_SERVER:
        shown = f"{version // 10000}.{version % 10000}" if version >= 100000 else str(version)
        raise DatabaseError(
            f"the server runs PostgreSQL {shown}: memfs needs PostgreSQL 13 or later"
        )


def open_for_writing(settings: Settings) -> Database:
    """``open_database`` for a command that writes (import, restore, undelete, seed, ...):
    a database that must not be written (IronClaw's file its owner made read-only, a
    Turso replica) is refused in one line before anything is written."""
    database = open_database(settings)
    reason = database.read_only_reason()
    if reason is not None:
        database.close()
        raise DatabaseError(f"{reason}; this command writes, so it did nothing")
    return database


def open_database(settings: Settings, *, read_only: bool = False) -> Database:
    """Connect (starting the embedded server if no URL is set) and make the schema ready.

    ``read_only`` (status, search): create nothing anywhere, not the embedded cluster, its
    database, a table or the ``vector`` extension; the connections are read-only too.  A
    database with no memory in it is then a ``DatabaseError`` saying how to create one.
    """
    embedded = None
    choose_database(settings)
    url = settings.database_url
    libsql = libsql_path(url) if url else None
    if libsql is not None:
        return open_libsql(libsql, read_only=read_only)  # type: ignore[return-value]
    if not url:
        url, embedded = start_embedded(settings.pgdata, create=not read_only)
    try:
        kwargs = _connect_kwargs(settings, read_only=read_only, url=url)
        with psycopg.connect(url, **kwargs) as conn:
            _check_server_version(conn.info.server_version)
            search_path = pin(conn)
            schema = inspect(conn) if read_only else ensure_schema(conn)
        if schema is None:
            where = "the embedded database" if embedded is not None else "this database"
            raise DatabaseError(
                f"no memory in {where} yet (no memory_documents table): `memfs mount DIR` or "
                "`memfs init` creates it"
            )
        if search_path is not None:
            kwargs = _connect_kwargs(
                settings, read_only=read_only, url=url, search_path=search_path
            )
        pool: ConnectionPool[psycopg.Connection[tuple[Any, ...]]] = WatchedPool(
            url,
            min_size=1,
            max_size=settings.pool_size,
            kwargs=kwargs,
            # Reborn memory has no embeddings: no vector type to teach (nor to miss).
            configure=None if schema.kind == "reborn" else _configure_connection,
            timeout=settings.statement_timeout_ms / 1000,
            # At rest a mount holds one connection: those opened for a burst close after
            # half a minute idle (a shared server's connection limit is shared by all).
            max_idle=IDLE_CONNECTION_SECONDS,
            name="memfs",
            open=True,
        )
    except BaseException:
        if embedded is not None:
            release_embedded(embedded)
        raise
    log.info("database ready: %s", schema.describe())
    if search_path is not None:
        log.info("this role's search_path names memfs's own schema: pinned to %s", search_path)
    listen_url = settings.listen_url or (None if settings.pooler else url)
    return Database(
        url=url, pool=pool, schema=schema, embedded=embedded, connect_kwargs=kwargs,
        listen_url=listen_url,
        listen_kwargs=_connect_kwargs(settings, pooled=False, url=listen_url or url),
        read_only=read_only,
        transaction_settings=(
            {"statement_timeout": str(settings.statement_timeout_ms),
             "lock_timeout": str(settings.lock_timeout_ms),
             **({"search_path": search_path} if search_path else {})}
            if settings.pooler else {}
        ),
    )  # fmt: skip
