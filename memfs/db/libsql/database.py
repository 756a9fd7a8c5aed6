"""An open IronClaw libSQL file as the mount, ``memfs status`` and ``memfs search`` see a
database (the same questions ``memfs.db.Database`` answers for PostgreSQL).

The Reborn layout: its rows through ``RebornStore`` over ``SqliteRows``, versions,
IronClaw v1.3's full-text search and tool folders from ``memfs.db.reborn.libsql.stores``.
The legacy layout (IronClaw <= v1.0's ``memory_documents``): read by
``memfs.db.legacy.libsql.stores``, written by ``memfs.db.legacy.libsql.writes`` (through
IronClaw's libSQL engine in a process of its own where IronClaw made its vector index);
read-only where the file is a Turso replica or that engine is not installed.  IronClaw
notifies nothing: mounts poll (a cheap fingerprint of the scope, recomputed only when
``PRAGMA data_version`` moved).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import sqlite3
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memfs.config import Settings
from memfs.db.capabilities import MigrationSource, legacy_described, reborn_described
from memfs.db.health import WorkspaceHealth
from memfs.db.interface import DocumentStore, VersionStore
from memfs.db.kept_store import legacy_workspace
from memfs.db.legacy.libsql.stores import (
    LegacyLibsqlHealth,
    LegacyLibsqlHistoryStore,
    LegacyLibsqlSearchStore,
    LegacyLibsqlStore,
    LegacyLibsqlVersionStore,
    legacy_settings,
)
from memfs.db.legacy.libsql.writes import OWN_SCHEMA as LEGACY_SCHEMA
from memfs.db.legacy.libsql.writes import LegacyLibsqlWriter
from memfs.db.libsql.connection import (
    LibsqlFile,
    NotIronClawFile,
    on_read_only_filesystem,
    sqlite_uri,
)
from memfs.db.libsql.engine_process import EngineProcess, libsql_available
from memfs.db.libsql.files import layout_of_file, turso_primary
from memfs.db.libsql.kept import LEGACY_UNDONE, DeletedFile, LibsqlKeptStore
from memfs.db.reborn.health import RebornHealth
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.libsql.rows import SqliteRows, open_file, own_file
from memfs.db.reborn.libsql.stores import (
    LibsqlSearchStore,
    LibsqlToolFileStore,
    LibsqlVersionStore,
)
from memfs.db.reborn.store import RebornStore
from memfs.db.schema import MEMFS_SCHEMA_VERSION
from memfs.db.scoped import Scope
from memfs.db.sqlite_errors import explain
from memfs.db.workspace import FullTextRanking, HybridRanking, Workspace
from memfs.errors import DatabaseError
from memfs.ironclaw.settings import SETTINGS_KEYS

log = logging.getLogger(__name__)

#: IronClaw's settings key recording that a user's onboarding is done.
ONBOARDED = "profile_onboarding_completed"


@dataclass(frozen=True)
class _LibsqlSchema:
    """What ``memfs status`` says of the layout."""

    kind: str = "reborn"

    def describe(self) -> str:
        if self.kind == "legacy":
            return "IronClaw legacy memory in its libSQL file (memory_documents, v1.0 and earlier)"
        return "IronClaw Reborn memory in its libSQL file (root_filesystem_entries, v1.1 and later)"


#: Why a legacy file mounts read-only (``LibsqlDatabase.read_only_reason``).
LEGACY_READ_ONLY = "IronClaw's legacy (<= v1.0) memory in its libSQL file is mounted read-only"
#: Files libSQL keeps beside an embedded replica (its replication's metadata).
REPLICA_METADATA = ("-client_wal_index", "-info")
#: IronClaw's vector index on a legacy file's chunks (only its libSQL engine maintains it).
VECTOR_INDEX = "idx_memory_chunks_embedding"


class _NoPool:
    """What the call breaker asks of a pool: nothing to reconnect to a local file."""

    def check(self) -> None:
        return None


@dataclass
class LibsqlDatabase:
    """An IronClaw libSQL file, opened (see the module docstring)."""

    path: Path
    file: LibsqlFile
    read_only: bool = False
    pool: Any = field(default_factory=_NoPool)
    embedded: Any = None
    listen_url: str | None = None
    listen_kwargs: dict[str, Any] = field(default_factory=dict)
    schema: Any = field(default_factory=_LibsqlSchema)
    layout: str = "reborn"
    reborn: bool = True
    #: Why the file mounts read-only whatever was asked (None: it need not).
    forced_read_only: str | None = None
    #: Deleted documents kept beside the file (``memfs.db.libsql.kept``).
    deleted: DeletedFile = field(init=False)

    def __post_init__(self) -> None:
        self.deleted = DeletedFile(self.path, read_only=self.read_only)

    @property
    def watched_file(self) -> Path:
        """The file whose writes wake the poll (``memfs.db.libsql.watch``)."""
        return self.path

    @property
    def url(self) -> str:
        return f"sqlite:{self.path}"

    def has_change_feed(self) -> bool:
        return False

    def install_change_feed(self) -> None:
        raise DatabaseError("IronClaw's libSQL file takes no trigger of memfs's: mounts poll")

    def read_only_reason(self) -> str | None:
        """Why this database mounts read-only whatever was asked (None: it need not)."""
        return self.forced_read_only

    def identity(self) -> dict[str, str]:
        return {"file": str(self.path.resolve())}

    def memfs_schema_version(self) -> int | None:
        """memfs's own file beside IronClaw's (``<file>.memfs``): every writable open
        makes its tables as this memfs has them, so it is current once it exists."""
        return MEMFS_SCHEMA_VERSION if own_file(self.path).exists() else None

    def extension_version(self, name: str) -> str | None:
        return None

    def health(self, settings: Settings) -> WorkspaceHealth:
        """``memfs doctor``'s checks of the workspace, as on PostgreSQL (the file's own
        integrity is SQLite's to check: ``sqlite3 FILE 'PRAGMA integrity_check'``)."""
        if self.layout == "legacy":
            return LegacyLibsqlHealth(self.file, _legacy_scope(settings))
        store = RebornStore(self.file, _scope(settings), rows=self._rows())
        own = self.file.read(lambda c: c.execute(
            "SELECT 1 FROM memfs.sqlite_master WHERE name = 'reborn_attrs'"
        ).fetchone())  # fmt: skip
        return RebornHealth(store, has_sidecars=own is not None)

    def lock_held_since(self) -> float | None:
        """Since when another program holds the file's write lock memfs waits for."""
        return self.file.held_since

    def ping(self) -> None:
        self.file.read(lambda c: c.execute("SELECT 1").fetchone())

    def onboarding_completed(self, owner: str) -> bool:
        """Whether IronClaw recorded ``owner``'s onboarding as done (legacy files keep a
        ``settings`` table; the Reborn file's settings rows are not read yet)."""
        if self.layout != "legacy":
            return False
        found = legacy_settings(self.file, owner, [ONBOARDED]).get(ONBOARDED)
        return found in (True, "true")

    def ironclaw_settings(self, owner: str) -> dict[str, Any]:
        """IronClaw's settings of ``owner`` memfs resolves: a legacy file's ``settings``
        table; the Reborn file's settings rows are not read yet (defaults)."""
        if self.layout != "legacy":
            return {}
        return legacy_settings(self.file, owner, SETTINGS_KEYS)

    def polls_by_design(self, settings: Settings) -> str | None:
        scope = _scope(settings).describe()
        return f"IronClaw's libSQL file {self.path}, {scope}; IronClaw notifies no changes"

    def notifies_changes(self) -> bool:
        return False

    def keeps_embeddings(self) -> bool:
        return False

    def waiting_work(self, settings: Settings) -> tuple[int, int, int] | None:
        return None

    def workspace_summary(self, settings: Settings) -> dict[str, Any]:
        if self.layout == "legacy":
            legacy = _legacy_scope(settings)
            documents, chunks = self._legacy_documents(settings).counts()
            return {"change_feed": False, "user_id": legacy.user_id,
                    "agent_id": str(legacy.agent_id) if legacy.agent_id else None,
                    "documents": documents, "chunks": chunks, "embeddings_pending": 0}  # fmt: skip
        scope = _scope(settings)
        documents, chunks = RebornStore(self.file, scope, rows=self._rows()).counts()
        return {"change_feed": False, "user_id": scope.user_id, "agent_id": scope.agent,
                "scope": scope.prefix, "documents": documents, "chunks": chunks,
                "embeddings_pending": 0}  # fmt: skip

    def seed_refusal(self) -> str | None:
        if self.layout == "legacy":
            return ("this is IronClaw's database: IronClaw writes its own identity files "
                    "(AGENTS.md, SOUL.md, BOOTSTRAP.md, ...) at its next start and never "
                    "replaces an existing one, so memfs seeds nothing here")  # fmt: skip
        return "IronClaw >= 1.1 seeds no files in its memory: memfs leaves it as it is"

    def legacy_history(self, settings: Settings) -> LegacyLibsqlHistoryStore | None:
        """The legacy workspace with its versions (``memfs migrate``); None on Reborn."""
        if self.layout != "legacy":
            return None
        return LegacyLibsqlHistoryStore(
            self.file, _legacy_scope(settings), with_versions=self._has_versions()
        )

    def migration_source(self, settings: Settings) -> MigrationSource | None:
        """What ``memfs migrate`` copies: the file's legacy workspace, or its Reborn one."""
        history = self.legacy_history(settings)
        if history is not None:
            return MigrationSource(
                history, legacy_described(history.scope), None, history.scope.user_id
            )
        scope = _scope(settings)
        store = RebornStore(self.file, scope, rows=self._rows())
        return MigrationSource(store, reborn_described(scope, self.url), scope, scope.user_id)

    def _has_versions(self) -> bool:
        row = self.file.read(lambda c: c.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' "
            "AND name = 'memory_document_versions'"
        ).fetchone())  # fmt: skip
        return row is not None

    def _legacy_documents(self, settings: Settings, origin: str | None = None) -> LegacyLibsqlStore:
        if self.read_only:
            return LegacyLibsqlStore(self.file, _legacy_scope(settings))
        return LegacyLibsqlWriter(self.file, _legacy_scope(settings), self.deleted,
                                  has_versions=self._has_versions(), origin=origin)  # fmt: skip

    def documents(self, settings: Settings, origin: str | None = None) -> DocumentStore:
        if self.layout == "legacy":
            return self._legacy_documents(settings, origin)
        return RebornStore(self.file, _scope(settings), origin=origin, rows=self._rows())

    def _rows(self) -> SqliteRows:
        return SqliteRows(self.file, self.deleted)

    def version_store(self, settings: Settings) -> VersionStore:
        if self.layout == "legacy":
            available = self._has_versions()
            return LegacyLibsqlVersionStore(self.file, _legacy_scope(settings), available=available)
        return LibsqlVersionStore(self.file, _scope(settings))

    def workspace(self, settings: Settings, origin: str | None = None) -> Workspace:
        self.file.wait_until_writable()  # a running IronClaw mid-transaction: wait, say so
        if self.layout == "legacy":
            return self._legacy_workspace(settings, origin)
        scope = _scope(settings)
        store = RebornStore(self.file, scope, origin=origin, rows=self._rows())
        search = LibsqlSearchStore(self.file, scope, read_only=self.read_only)
        return Workspace(
            documents=store,
            ranking=FullTextRanking(search, store.id_of),
            versions=LibsqlVersionStore(self.file, scope),
            tool_files=LibsqlToolFileStore(self.file, scope.prefix),
            readers=[
                RebornStore(self.file, dataclasses.replace(scope, user_id=name), rows=self._rows())
                for name in settings.read_scopes
            ],
            kept=LibsqlKeptStore(self.file, self.deleted, scope.prefix),
        )

    def _legacy_workspace(self, settings: Settings, origin: str | None = None) -> Workspace:
        legacy = _legacy_scope(settings)
        workspace = legacy_workspace(legacy.user_id, legacy.agent_id)
        return Workspace(
            documents=self._legacy_documents(settings, origin),
            ranking=HybridRanking(LegacyLibsqlSearchStore(self.file, legacy)),
            versions=self.version_store(settings),
            tool_files=LibsqlToolFileStore(self.file, workspace),
            readers=[LegacyLibsqlStore(self.file, Scope(name)) for name in settings.read_scopes],
            onboarded=functools.partial(self.onboarding_completed, legacy.user_id),
            kept=LibsqlKeptStore(self.file, self.deleted, workspace, undone=LEGACY_UNDONE),
        )

    def close(self) -> None:
        self.file.close()
        self.deleted.close()


def _legacy_scope(settings: Settings) -> Scope:
    from memfs.db import legacy_scope  # the settings' legacy scope, as on PostgreSQL

    return legacy_scope(settings)


def _scope(settings: Settings) -> RebornScope:
    from memfs.db import reborn_scope  # the settings' Reborn scope, as on PostgreSQL

    return reborn_scope(settings)


def file_read_only_reason(path: Path) -> str | None:
    """Why IronClaw's file at ``path`` would mount read-only (None: it would not, or it is
    no IronClaw file: opening it says why)."""
    try:
        layout = layout_of_file(path)
    except NotIronClawFile:
        return None
    return _mode_reason(path) or (_legacy_reason(path) if layout == "legacy" else None)


def _mode_reason(path: Path) -> str | None:
    """Why a file its owner made read-only, or this user may not write, mounts read-only.
    SQLite run as root writes a file of mode 0444 all the same: the mode is IronClaw's
    owner's word, so memfs reads it before SQLite's permission would."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return None  # opening it says why
    if on_read_only_filesystem(path):
        return (f"{path} is on a read-only filesystem: memfs mounts it read-only and reads "
                "it as it is (IronClaw cannot write it there either)")  # fmt: skip
    if not mode & 0o222:
        return (f"{path} is read-only (mode {mode:04o}, its owner's choice): memfs mounts it "
                f"read-only and writes nothing there (`chmod u+w {path}` to write)")  # fmt: skip
    if not os.access(path, os.W_OK):
        return (f"{path} is not writable by this user (mode {mode:04o}): memfs mounts it "
                "read-only and writes nothing there")  # fmt: skip
    return None


def _has_vector_index(path: Path) -> bool:
    with contextlib.closing(sqlite3.connect(sqlite_uri(path, read_only=True), uri=True)) as conn:
        found = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (VECTOR_INDEX,)
        ).fetchone()
    return found is not None


def _legacy_reason(path: Path, env: Mapping[str, str] | None = None) -> str | None:
    """Why a legacy file mounts read-only (None: memfs writes it): a Turso embedded
    replica, or a vector index with no libSQL engine on this machine."""
    primary = turso_primary(os.environ if env is None else env)
    for suffix in REPLICA_METADATA:
        beside = path.with_name(path.name + suffix)
        if primary is None and beside.exists():
            return (f"{LEGACY_READ_ONLY}: it is a Turso embedded replica ({beside.name}, the "
                    "replica's metadata, is beside it), and a local write would diverge from "
                    "its primary")  # fmt: skip
    if primary is not None:
        host = primary.split("://", 1)[-1].split("/", 1)[0].split("?", 1)[0]
        return (
            f"{LEGACY_READ_ONLY}: it is a Turso embedded replica of {host} "
            "(IronClaw's LIBSQL_URL), and a local write would diverge from its primary"
        )
    if _has_vector_index(path):
        missing = libsql_available()
        if missing is not None:
            return (f"{LEGACY_READ_ONLY}: IronClaw made its vector index there "
                    f"({VECTOR_INDEX}), which only IronClaw's libSQL engine can keep, and "
                    f"{missing}")  # fmt: skip
    return None


def open_libsql(path: Path, *, read_only: bool = False) -> LibsqlDatabase:
    """IronClaw's libSQL file at ``path``: refused with one clear line if it is not
    there or not IronClaw's.  A legacy file is opened read-only, with foreign keys on as
    IronClaw's engine has them (requirement 13).  SQLite's errors on it (not a
    database, damaged, unopenable, read-only, locked) are one line naming the file."""
    try:
        return _open_libsql(path, read_only=read_only)
    except sqlite3.Error as exc:
        code, line = explain(exc, path)
        raise DatabaseError(line, code) from None


def _open_libsql(path: Path, *, read_only: bool) -> LibsqlDatabase:
    try:
        layout = layout_of_file(path)
    except NotIronClawFile as exc:
        raise DatabaseError(str(exc)) from None
    if layout is None:
        raise DatabaseError(f"{path}: not an IronClaw memory file")
    forced = _mode_reason(path) or (_legacy_reason(path) if layout == "legacy" else None)
    read_only = read_only or forced is not None
    writer = None
    if layout == "legacy" and not read_only and _has_vector_index(path):
        writer = EngineProcess(path, attach={"memfs": own_file(path)}, foreign_keys=True)
    file = open_file(path, read_only=read_only, foreign_keys=layout == "legacy", writer=writer,
                     schema=LEGACY_SCHEMA if layout == "legacy" else ())  # fmt: skip
    if writer is not None:
        try:
            began = writer.started()
        except sqlite3.Error as exc:
            file.close()
            raise DatabaseError(f"{path}: IronClaw's libSQL engine did not start: {exc}") from None
        log.info("writing %s through IronClaw's libSQL engine (process %s, started in %.2f s): "
                 "IronClaw made its vector index there", path, writer.pid, began)  # fmt: skip
    log.info("opened IronClaw's libSQL file %s (%s layout, journal %s)", path, layout,
             file.journal_mode)  # fmt: skip
    return LibsqlDatabase(path, file, read_only=read_only, schema=_LibsqlSchema(layout),
                          layout=layout, reborn=layout == "reborn",
                          forced_read_only=forced)  # fmt: skip
