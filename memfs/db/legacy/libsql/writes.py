"""Writing a legacy (IronClaw <= v1.0) workspace in IronClaw's libSQL file
(docs/ironclaw/libsql.md §8; requirements 5-8, 12, 13).

IronClaw v1.0's rules are the legacy engine's (``memfs.ironclaw.legacy_save``: the save
plan, versions, conflicts), run here over the file's statements: every write one short
``BEGIN IMMEDIATE`` transaction that reads the row, decides, writes the document, its
version and its chunks (IronClaw re-chunks after every write; here in the same
transaction, so a save stays one transaction).  Times are SQL's
``strftime('%Y-%m-%dT%H:%M:%fZ', 'now')``, IronClaw's format; ids are UUIDv4 text; foreign
keys are on, so a document's delete takes its chunks and versions as IronClaw's does.

Where IronClaw made its vector index, the write transactions run in IronClaw's libSQL
engine in a process of its own (``engine_process``; ``LibsqlFile.writer``): the
statements here are the same (``?`` parameters, which both drivers take), and chunks are
written with no embedding (IronClaw fills missing embeddings itself:
``backfill_embeddings`` at its start).  Reads run on this process's stdlib connections.

memfs's own state lives beside IronClaw's file, never in it: kept folders, client
attributes and moves in the attached ``memfs`` file (``legacy_directories``,
``legacy_attrs``, ``path_history``), deleted documents with their versions in
``<file>.memfs-deleted`` (``memfs.db.libsql.kept``).

A row's version token is ``legacy_token``'s (``updated_at`` and the content's byte length);
guards compare both, and a removal also compares the content's hash where this store
knows what the mount showed.
"""

from __future__ import annotations

import errno
import json
import logging
import sqlite3
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import UUID

from memfs.db.deferred import (
    BatchOutcome,
    DeferredChanges,
    DeferringStore,
    Delete,
    Moved,
    MoveDir,
    PartsLog,
)
from memfs.db.interface import (
    CommitResult,
    DocRow,
    FileAttrs,
    Overwritten,
    Rename,
    Replacement,
    SaveOptions,
    attrs_of,
)
from memfs.db.kept_store import legacy_workspace
from memfs.db.legacy.libsql.stores import LegacyLibsqlStore, json_object, legacy_token
from memfs.db.legacy.rename_over import LegacyRenameOver, Source
from memfs.db.libsql.connection import MOVE_LIMIT, LibsqlFile
from memfs.db.libsql.kept import DeletedFile
from memfs.db.libsql.row_times import NOW, parse_time
from memfs.db.limits import legacy_max_path
from memfs.db.records import PLAIN_SAVE, Write
from memfs.db.scoped import Scope, folder_config_paths
from memfs.errors import WriteRefused
from memfs.ironclaw.chunker import DEFAULT_CONFIG, ChunkConfig, chunk_document
from memfs.ironclaw.hashing import content_hash
from memfs.ironclaw.legacy_save import Merging, StoredRow, plan_save_merging
from memfs.ironclaw.write_rules import (
    DocumentMetadata,
    effective_metadata,
    is_engine_runtime_path,
    legacy_content_problem,
)
from memfs.paths import conflict_copy

log = logging.getLogger(__name__)

#: memfs's own tables for legacy workspaces, in its file beside IronClaw's.
OWN_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS memfs.legacy_directories (workspace TEXT NOT NULL, "
    "path TEXT NOT NULL, PRIMARY KEY (workspace, path))",
    "CREATE TABLE IF NOT EXISTS memfs.legacy_attrs (document_id TEXT PRIMARY KEY, "
    "mode INTEGER, mtime_ns INTEGER, set_against TEXT NOT NULL)",
)
_Q = "user_id = ? AND agent_id IS ?"
_SIZE = "length(CAST(content AS BLOB))"
#: A row's state as the attributes table keeps it (``updated_at`` and the token's part).
_STATE = f"updated_at || '|' || ({_SIZE} % 1000)"
_BELOW = "(path >= ? || '/' AND path < ? || '0')"


def _ns(at: datetime) -> int:
    """A row's token as the mount shows it for a mtime (exact to the microsecond)."""
    return (at - _EPOCH) // timedelta(microseconds=1) * 1000


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class _Row:
    """A document row as a write reads it inside its transaction."""

    id: UUID
    path: str
    content: str
    updated_at: str
    metadata: dict[str, Any]
    created_at: str

    @property
    def token(self) -> datetime:
        return legacy_token(self.updated_at, len(self.content.encode("utf-8")))

    @property
    def state(self) -> str:
        """The row's state as SQL's ``_STATE`` writes it (the attributes' and kept copies'
        key)."""
        return f"{self.updated_at}|{len(self.content.encode('utf-8')) % 1000}"


class LegacyLibsqlWriter(DeferringStore, LegacyLibsqlStore, LegacyRenameOver):
    """One legacy workspace of the file, read and written (``DocumentStore``)."""

    _db_error: type[Exception] = sqlite3.Error

    #: IronClaw's chunking: its indexer's fixed constants.
    chunk_config: ChunkConfig = DEFAULT_CONFIG

    def __init__(
        self,
        file: LibsqlFile,
        scope: Scope,
        deleted: DeletedFile,
        *,
        has_versions: bool,
        origin: str | None = None,
    ) -> None:
        LegacyLibsqlStore.__init__(self, file, scope)
        #: The file: ``DeferringStore`` opens its transactions (``_open_transaction``).
        self.pool = file
        self.deferred = DeferredChanges()
        #: Where a deleted document is kept first (``memfs undelete``).
        self.deleted = deleted
        #: IronClaw >= v0.25 keeps versions (its migration 16); older files have none.
        self.has_versions = has_versions
        self.origin = origin
        self.workspace = legacy_workspace(scope.user_id, scope.agent_id)
        self._scope_params = (scope.user_id, str(scope.agent_id) if scope.agent_id else None)
        #: The longest path IronClaw's PostgreSQL index takes: what is written here can
        #: move up to a shared PostgreSQL (``memfs migrate``), as on the Reborn file.
        self.max_path_bytes = legacy_max_path(scope.user_id)
        #: The hash of each document's content at the token this store last saw it (a
        #: removal's guard checks it too: two writes may share a token).
        self._hashes: dict[UUID, tuple[datetime, str]] = {}
        self._lock = threading.Lock()

    # -- transactions --------------------------------------------------------------------

    def _open_transaction(self) -> Any:
        return self.file.transaction()

    def _is_refusal(self, exc: Exception) -> bool:
        return isinstance(exc, sqlite3.IntegrityError | sqlite3.DataError)

    def _remember(self, doc_id: UUID, at: datetime, digest: str) -> None:
        with self._lock:
            self._hashes[doc_id] = (at, digest)

    def content_problem(self, path: str, text: str) -> WriteRefused | None:
        return legacy_content_problem(path, text)

    # -- reading -------------------------------------------------------------------------

    def _rows(self, where: str, **params: Any) -> list[DocRow]:
        """The scope's documents with their client attributes, without those this mount
        removed and has not sent yet."""
        with self.deferred.deletions_during() as hidden:
            rows = self.file.read(lambda c: c.execute(
                "SELECT d.id, d.path, length(CAST(d.content AS BLOB)), d.created_at, "
                "d.updated_at, a.mode, a.mtime_ns FROM memory_documents d "
                "LEFT JOIN memfs.legacy_attrs a ON a.document_id = d.id AND a.set_against = "
                "d.updated_at || '|' || (length(CAST(d.content AS BLOB)) % 1000) "
                f"WHERE {'+' if where.startswith('d.id ') else ''}d.user_id = :user "
                f"AND d.agent_id IS :agent AND {where} "
                "ORDER BY d.path, d.updated_at DESC, d.id",
                {"user": self._scope_params[0], "agent": self._scope_params[1], **params},
            ).fetchall())  # fmt: skip
        found = []
        for i, p, s, c, u, mode, mtime in rows:
            doc_id = UUID(i)
            if doc_id in hidden:
                continue
            size = int(s or 0)
            found.append(DocRow(doc_id, p, size, parse_time(c), legacy_token(u, size),
                                attrs_of(mode, mtime)))  # fmt: skip
        return found

    def document_versions(self) -> list[tuple[UUID, str, datetime]] | None:
        """(id, path, version token) of every document ``load_documents`` lists, without
        creation times or attributes: a poll's first look (IronClaw notifies nothing)."""
        with self.deferred.deletions_during() as hidden:
            rows = self.file.read(lambda c: c.execute(
                "SELECT id, path, updated_at, length(CAST(content AS BLOB)) FROM "
                "memory_documents WHERE user_id = ? AND agent_id IS ? ORDER BY path, "
                "updated_at DESC, id",
                self._scope_params,
            ).fetchall())  # fmt: skip
        found = []
        for i, path, updated, size in rows:
            doc_id = UUID(i)
            if doc_id not in hidden:
                found.append((doc_id, path, legacy_token(updated, int(size or 0))))
        return found

    def load_documents(self) -> list[DocRow]:
        self._finish_moves()
        return self._rows("1")

    def load_directories(self) -> list[str]:
        rows = self.file.read(lambda c: c.execute(
            "SELECT path FROM memfs.legacy_directories WHERE workspace = ? ORDER BY path",
            (self.workspace,),
        ).fetchall())  # fmt: skip
        return sorted(self.deferred.directories({r[0] for r in rows}))

    # -- rows inside a write transaction ---------------------------------------------------

    def _row(self, conn: Any, where: str, *params: Any) -> _Row | None:
        found = conn.execute(
            "SELECT id, path, content, updated_at, metadata, created_at FROM memory_documents "
            f"WHERE {where} AND {'+' if where.startswith('id ') else ''}{_Q} "
            "ORDER BY updated_at DESC, id LIMIT 1",
            (*params, *self._scope_params),
        ).fetchone()
        if found is None:
            return None
        return _Row(UUID(found[0]), found[1], found[2], found[3], json_object(found[4]),
                    found[5])  # fmt: skip

    def _folder(self, conn: Any, path: str) -> dict[str, Any] | None:
        """The metadata of the nearest ``.config`` above ``path`` (None: there is none)."""
        configs = folder_config_paths(path)
        rows = dict(conn.execute(
            f"SELECT path, metadata FROM memory_documents WHERE {_Q} "
            "AND path IN (SELECT value FROM json_each(?))",
            (*self._scope_params, json.dumps(configs)),
        ).fetchall())  # fmt: skip
        for config in configs:
            if config in rows:
                return json_object(rows[config])
        return None

    def _state(self, conn: Any, doc_id: UUID) -> datetime | None:
        row = conn.execute(
            f"SELECT updated_at, {_SIZE} FROM memory_documents WHERE id = ?", (str(doc_id),)
        ).fetchone()
        return legacy_token(row[0], int(row[1])) if row is not None else None

    # -- saves ---------------------------------------------------------------------------

    def commit_document(
        self, write: Write, attrs: FileAttrs, how: SaveOptions = PLAIN_SAVE
    ) -> CommitResult:
        """IronClaw v1.0's write of ``path``, re-chunked in the same transaction; a row
        changed since ``how.expected`` keeps the other writer's content first (a version,
        or a conflict copy on a file without versions), or with ``how.merge`` is merged
        with the save inside the transaction (``plan_merged``)."""
        with self._transaction() as conn:
            result = self._commit(conn, write, attrs, how)
        written = result.merged if result.merged is not None else write.content
        self._remember(result.doc_id, result.updated_at, content_hash(written))
        return result

    def _send_save(
        self, conn: Any, doc_id: UUID | None, path: str, content: str, attrs: FileAttrs
    ) -> Callable[[], CommitResult]:
        result = self._commit(conn, Write(doc_id, path, content), attrs)
        return lambda: result

    def _saved(self, result: CommitResult, path: str, content: str) -> None:
        self._remember(result.doc_id, result.updated_at, content_hash(content))

    def _commit(
        self, conn: Any, write: Write, attrs: FileAttrs, how: SaveOptions = PLAIN_SAVE
    ) -> CommitResult:
        """One document's save in the caller's transaction (``plan_save`` decides)."""
        doc_id, path, content = write.doc_id, write.path, write.content
        expected, merge = how.expected, how.merge
        row = self._row(conn, "id = ?", str(doc_id)) if doc_id is not None else None
        if row is None:
            row = self._row(conn, "path = ?", path)
        folder = self._folder(conn, path)
        stored = None
        if row is not None:
            unseen = how.stale_base or (expected is not None and not self._as_shown(row, expected))
            stored = StoredRow(content_hash(row.content), row.content == "", row.metadata,
                               folder, row.token, unseen)  # fmt: skip
        theirs = row.content if row is not None else ""
        merging = None
        if merge is not None and row is not None:
            locked = row
            merging = Merging(
                lambda data: merge(data, lambda h: self._content_by_hash(conn, locked, h)),
                lambda: theirs.encode("utf-8"),
            )
        content, _, plan, merged = plan_save_merging(write, stored, folder, expected, merging)
        target = row.id if row is not None else uuid.uuid4()
        conflict = None
        versioned = False
        if plan.keep_other:
            assert row is not None
            conflict = self._keep_other(conn, row, plan.meta)
        if plan.version:
            assert row is not None
            versioned = self._save_version(conn, row.id, row.content, plan.meta)
        if plan.fills_empty:
            assert row is not None
            conn.execute(
                "INSERT INTO memfs.empty_spells (workspace, path, emptied_at, filled_at) "
                f"VALUES (?, ?, ?, {NOW})",
                (self.workspace, row.path, row.updated_at),
            )
        if plan.created:
            conn.execute(
                "INSERT INTO memory_documents (id, user_id, agent_id, path, content, metadata) "
                "VALUES (?, ?, ?, ?, ?, '{}')",
                (str(target), *self._scope_params, path, content),
            )
        elif plan.write:
            conn.execute(
                f"UPDATE memory_documents SET content = ?, updated_at = {NOW} WHERE id = ?",
                (content, str(target)),
            )
        chunks = self._index(conn, target, path, content, plan.meta)
        if not (plan.created and attrs.empty):
            self._write_attrs(conn, target, attrs)
        after = self._state(conn, target)
        assert after is not None
        return CommitResult(target, after, plan.created, plan.changed, chunks, versioned,
                            conflict, plan.replaced_hash,
                            content if merged else None)  # fmt: skip

    def _keep_other(self, conn: Any, row: _Row, meta: DocumentMetadata) -> str:
        """Another writer changed the row since the mount read it: keep their content."""
        if self.has_versions:
            self._save_version(conn, row.id, row.content, meta, force=True)
            number = conn.execute(
                "SELECT max(version) FROM memory_document_versions WHERE document_id = ?",
                (str(row.id),),
            ).fetchone()
            return f"version {number[0] if number else '?'}"
        copy = conflict_copy(row.path, datetime.now(UTC))
        self._commit(conn, Write(None, copy, row.content), FileAttrs())
        return f"copy {copy}"

    def _save_version(
        self, conn: Any, doc_id: UUID, content: str, meta: DocumentMetadata, *,
        force: bool = False,
    ) -> bool:  # fmt: skip
        """IronClaw's ``maybe_save_version``: ``content`` (the row's, about to be replaced)
        as version MAX+1, unless versions are off for it or the newest holds it already."""
        if not self.has_versions or not (meta.versioned or force) or not content:
            return False
        digest = content_hash(content)
        newest = conn.execute(
            "SELECT content_hash FROM memory_document_versions WHERE document_id = ? "
            "ORDER BY version DESC LIMIT 1",
            (str(doc_id),),
        ).fetchone()
        if newest is not None and newest[0] == digest:
            return False
        self._insert_version(conn, doc_id, content, digest)
        return True

    def _insert_version(self, conn: Any, doc_id: UUID, content: str, digest: str) -> None:
        conn.execute(
            "INSERT INTO memory_document_versions (id, document_id, version, content, "
            "content_hash, created_at, changed_by) VALUES (?, ?, (SELECT COALESCE(MAX(version), "
            f"0) + 1 FROM memory_document_versions WHERE document_id = ?), ?, ?, {NOW}, ?)",
            (str(uuid.uuid4()), str(doc_id), str(doc_id), content, digest,
             self._scope_params[0]),
        )  # fmt: skip

    def _index(
        self, conn: Any, doc_id: UUID, path: str, content: str, meta: DocumentMetadata
    ) -> int:
        """Make the document's chunks IronClaw's (0..n-1 of ``content``; none under
        ``skip_indexing`` or at an engine path), rewriting only those whose text changed:
        an unchanged chunk keeps its embedding.  Returns how many it has."""
        indexed = meta.indexed and not is_engine_runtime_path(path)
        chunks = chunk_document(content, self.chunk_config) if indexed else []
        stored = dict(conn.execute(
            "SELECT chunk_index, content FROM memory_chunks WHERE document_id = ?",
            (str(doc_id),),
        ).fetchall())  # fmt: skip
        if len(stored) > len(chunks) or any(i >= len(chunks) for i in stored):
            conn.execute(
                "DELETE FROM memory_chunks WHERE document_id = ? AND chunk_index >= ?",
                (str(doc_id), len(chunks)),
            )
        for index, text in enumerate(chunks):
            old = stored.get(index)
            if old is None:
                conn.execute(
                    "INSERT INTO memory_chunks (id, document_id, chunk_index, content, "
                    "embedding) VALUES (?, ?, ?, ?, NULL)",
                    (str(uuid.uuid4()), str(doc_id), index, text),
                )
            elif old != text:
                conn.execute(
                    "UPDATE memory_chunks SET content = ?, embedding = NULL "
                    "WHERE document_id = ? AND chunk_index = ?",
                    (text, str(doc_id), index),
                )
        return len(chunks)

    def _reindex_row(self, conn: Any, row: _Row) -> int:
        meta = effective_metadata(row.metadata, self._folder(conn, row.path))
        return self._index(conn, row.id, row.path, row.content, meta)

    def reindex(self, doc_id: UUID, path: str) -> int:
        with self._transaction() as conn:
            row = self._row(conn, "id = ?", str(doc_id))
            return self._reindex_row(conn, row) if row is not None else 0

    def _write_attrs(self, conn: Any, doc_id: UUID, attrs: FileAttrs) -> None:
        """Client attributes, valid while the row stays as it is now."""
        if attrs.empty:
            conn.execute("DELETE FROM memfs.legacy_attrs WHERE document_id = ?", (str(doc_id),))
            return
        # The nanoseconds go as text: IronClaw's libSQL engine binds a Python int above 2**53
        # through a double (a mtime came back up to 128 ns off).
        conn.execute(
            "INSERT INTO memfs.legacy_attrs (document_id, mode, mtime_ns, set_against) "
            f"SELECT id, ?, CAST(? AS INTEGER), {_STATE} FROM memory_documents WHERE id = ? "
            "ON CONFLICT (document_id) DO UPDATE SET mode = excluded.mode, "
            "mtime_ns = excluded.mtime_ns, set_against = excluded.set_against",
            (attrs.mode, None if attrs.mtime_ns is None else str(attrs.mtime_ns), str(doc_id)),
        )

    def merge_metadata(self, doc_id: UUID, path: str, overlay: Mapping[str, Any]) -> bool:
        """IronClaw's metadata merge (top-level keys of ``overlay`` win), written as its
        libSQL code serialises JSON (compact, keys sorted); the row's version is left as it
        is (the save that follows sets it).  False if the row is gone."""
        with self._transaction() as conn:
            row = self._row(conn, "id = ?", str(doc_id))
            if row is None:
                return False
            merged = {**row.metadata, **overlay}
            conn.execute(
                "UPDATE memory_documents SET metadata = ? WHERE id = ?",
                (json.dumps(merged, ensure_ascii=False, separators=(",", ":"), sort_keys=True),
                 str(doc_id)),
            )  # fmt: skip
        return True

    def set_attrs(self, doc_id: UUID, attrs: FileAttrs) -> bool:
        with self._transaction() as conn:
            if self._row(conn, "id = ?", str(doc_id)) is None:
                return False
            self._write_attrs(conn, doc_id, attrs)
        return True

    # -- removals ------------------------------------------------------------------------

    def _send_deletes(self, conn: Any, deletes: Sequence[Delete]) -> Callable[[], set[UUID]]:
        left = self._delete_rows(conn, deletes)
        return lambda: left

    def _delete_rows(self, conn: Any, deletes: Sequence[Delete], *, keep: bool = True) -> set[UUID]:
        """IronClaw's delete of each document (chunks, then the row; versions cascade),
        only while its row is as the mount showed it (``seen``; None: any).  Each is kept
        first with its versions (``keep``; all in one durable commit of the kept file,
        before any is deleted).  Returns the ids left in place."""
        left, going = set(), []
        for delete in deletes:
            row = self._row(conn, "id = ?", str(delete.doc_id))
            if row is None:
                continue
            if delete.seen is not None and not self._as_shown(row, delete.seen):
                left.add(delete.doc_id)
                continue
            going.append(row)
        if keep:
            self.deleted.keep_all([self._kept_copy(conn, row) for row in going])
        for row in going:
            conn.execute("DELETE FROM memory_chunks WHERE document_id = ?", (str(row.id),))
            conn.execute("DELETE FROM memory_documents WHERE id = ?", (str(row.id),))
            conn.execute("DELETE FROM memfs.legacy_attrs WHERE document_id = ?", (str(row.id),))
            with self._lock:
                self._hashes.pop(row.id, None)
        return left

    @staticmethod
    def _content_by_hash(conn: Any, row: _Row, digest: str) -> bytes | None:
        """The locked row's bytes, or a version's, by IronClaw's hash (a merge's base known
        by hash alone), in the save's transaction.  SQLite has no SHA-256: the row's
        content is hashed here; versions carry the hash in their row."""
        if content_hash(row.content) == digest:
            return row.content.encode("utf-8")
        found = conn.execute(
            "SELECT CAST(content AS BLOB) FROM memory_document_versions "
            "WHERE document_id = ? AND content_hash = ? LIMIT 1",
            (str(row.id), digest),
        ).fetchone()
        return bytes(found[0]) if found is not None else None

    def _as_shown(self, row: _Row, seen: datetime) -> bool:
        if row.token != seen:
            return False
        with self._lock:
            known = self._hashes.get(row.id)
        return known is None or known[0] != seen or known[1] == content_hash(row.content)

    def _kept_copy(self, conn: Any, row: _Row) -> dict[str, Any]:
        """The document with its versions as the kept file takes it (committed before the
        delete, ``memfs.db.libsql.kept``); a copy whose delete does not commit is told apart
        by its row still being there as it was."""
        versions = []
        if self.has_versions:
            for number, content, who, created in conn.execute(
                "SELECT version, content, changed_by, created_at FROM memory_document_versions "
                "WHERE document_id = ? ORDER BY version",
                (str(row.id),),
            ).fetchall():
                versions.append({"version": number, "content": content, "changed_by": who,
                                 "created_at": parse_time(created).isoformat()})  # fmt: skip
        return {
            "workspace": self.workspace, "path": row.path, "content": row.content,
            "created_at": row.created_at, "updated_at": row.updated_at,
            "versions": json.dumps(versions), "row_path": str(row.id), "row_state": row.state,
        }  # fmt: skip

    def delete_document(
        self, doc_id: UUID, keep_dirs: Sequence[str] = (), seen: datetime | None = None
    ) -> bool:
        with self._transaction() as conn:
            there = self._row(conn, "id = ?", str(doc_id)) is not None
            left = self._delete_rows(conn, [Delete(doc_id, seen)])
            self._keep_directories(conn, keep_dirs)
        return there and doc_id not in left

    # -- renames -------------------------------------------------------------------------

    def _rules_differ(self, conn: Any, old_path: str, new_path: str) -> bool:
        """Whether documents moved from ``old_path`` to ``new_path`` may be indexed
        differently: the nearest ``.config`` above differs, or an engine path is involved."""
        if is_engine_runtime_path(old_path) or is_engine_runtime_path(new_path):
            return True
        return self._folder(conn, old_path) != self._folder(conn, new_path)

    def rename_document(
        self, rename: Rename, attrs: FileAttrs, replaced: Overwritten | None = None
    ) -> Moved | None:
        """Move a document to ``rename.new_path`` (removing ``replaced`` first, only at the
        version the mount showed); refused (EEXIST) when a row the mount did not show is
        there."""
        doc_id, new_path, old_path = rename.doc_id, rename.new_path, rename.old_path
        keep_dirs = rename.keep_dirs
        with self._transaction() as conn:
            if replaced is not None:
                self._delete_rows(conn, [Delete(replaced.doc_id, replaced.seen)])
            taken = conn.execute(
                f"SELECT 1 FROM memory_documents WHERE {_Q} AND path = ? AND id <> ? LIMIT 1",
                (*self._scope_params, new_path, str(doc_id)),
            ).fetchone()
            if taken is not None:
                raise WriteRefused(
                    errno.EEXIST, "memfs's rename",
                    f"another writer's document is at {new_path!r} (this mount did not show it)",
                )  # fmt: skip
            row = self._row(conn, "id = ?", str(doc_id))
            if row is None:
                return None
            differ = old_path is None or self._rules_differ(conn, row.path, new_path)
            conn.execute("UPDATE memory_documents SET path = ? WHERE id = ?",
                         (new_path, str(doc_id)))  # fmt: skip
            if row.path != new_path:
                self._note_moves(conn, [(row.path, new_path)])
            self._write_attrs(conn, doc_id, attrs)
            if differ:
                moved = self._row(conn, "id = ?", str(doc_id))
                assert moved is not None
                self._reindex_row(conn, moved)
            self._keep_directories(conn, keep_dirs)
            after = self._state(conn, doc_id)
        assert after is not None
        with self._lock:
            known = self._hashes.pop(doc_id, None)
            if known is not None and known[0] == row.token:
                self._hashes[doc_id] = (after, known[1])
        return Moved(row.token, after)

    def _note_moves(self, conn: Any, moves: Sequence[tuple[str, str]]) -> None:
        """Each document's move, for ``.at/`` (memfs's ``path_history``), in one statement
        call (one round trip to the libSQL engine's process, where it runs)."""
        if moves:
            conn.executemany(
                "INSERT INTO memfs.path_history (workspace, old_path, new_path, folder, "
                f"moved_at) VALUES (?, ?, ?, 0, {NOW})",
                [(self.workspace, old, new) for old, new in moves],
            )

    def replace_document(self, replacement: Replacement, how: SaveOptions) -> CommitResult | None:
        """A document renamed over another: IronClaw's write of the path, then IronClaw's
        delete of the source, with memfs's history rules between (``LegacyRenameOver``).
        None if the source is gone."""
        source_id, target_id, path = replacement.source_id, replacement.target_id, replacement.path
        content, source_at = replacement.content, replacement.source_at
        with self._transaction() as conn:
            if content is None:
                source = self._row(conn, "id = ?", str(source_id))
                if source is None:
                    return None
                content = source.content
            text = content
            result = self._rename_over(
                conn, Source(source_id, source_at), target_id, text,
                lambda: self._commit(conn, Write(target_id, path, text), replacement.attrs, how),
            )  # fmt: skip
            self._keep_directories(conn, replacement.keep_dirs)
        self._remember(result.doc_id, result.updated_at, content_hash(result.merged or text))
        return result

    def _keeps_versions(self) -> bool:
        return self.has_versions

    def _keep_source(self, conn: Any, source_id: UUID) -> None:
        source = self._row(conn, "id = ?", str(source_id))
        if source is not None:
            self.deleted.keep(self._kept_copy(conn, source))

    def _version_if_changed(
        self, conn: Any, source_id: UUID, source_at: datetime, target_id: UUID
    ) -> None:
        source = self._row(conn, "id = ?", str(source_id))
        if source is not None and source.token != source_at:
            self._insert_version(conn, target_id, source.content, content_hash(source.content))

    def _delete_source(self, conn: Any, source_id: UUID) -> None:
        self._delete_rows(conn, [Delete(source_id)], keep=False)

    def _version_if_kept(self, conn: Any, target_id: UUID, content: str) -> None:
        row = self._row(conn, "id = ?", str(target_id))
        if row is None or row.content != content or not content:
            return
        newest = conn.execute(
            "SELECT content_hash FROM memory_document_versions WHERE document_id = ? "
            "ORDER BY version DESC LIMIT 1",
            (str(target_id),),
        ).fetchone()
        digest = content_hash(content)
        if newest is None or newest[0] != digest:
            self._insert_version(conn, target_id, content, digest)

    def _carry_versions(self, conn: Any, source_id: UUID, target_id: UUID) -> None:
        offset = conn.execute(
            "SELECT COALESCE(max(version), 0) FROM memory_document_versions WHERE document_id = ?",
            (str(target_id),),
        ).fetchone()[0]
        conn.execute(
            "UPDATE memory_document_versions SET document_id = ?, version = version + ? "
            "WHERE document_id = ?",
            (str(target_id), int(offset), str(source_id)),
        )

    # -- folders -------------------------------------------------------------------------

    def _keep_directories(self, conn: Any, paths: Sequence[str]) -> None:
        for path in paths:
            conn.execute(
                "INSERT OR IGNORE INTO memfs.legacy_directories (workspace, path) VALUES (?, ?)",
                (self.workspace, path),
            )

    def _drop_directory(self, conn: Any, path: str) -> None:
        conn.execute(
            "DELETE FROM memfs.legacy_directories WHERE workspace = ? AND path = ?",
            (self.workspace, path),
        )

    def _send_move(
        self, conn: Any, old: str, new: str, replaced: str | None
    ) -> Callable[[], tuple[bool, dict[UUID, Moved]]]:
        moved = self._move_directory(conn, old, new, replaced)
        return lambda: (moved is not None, moved or {})

    def _folder_taken(self, conn: Any, move: MoveDir) -> bool:
        busy = conn.execute(
            f"SELECT EXISTS (SELECT 1 FROM memory_documents WHERE {_Q} "
            f"  AND (path = ? OR {_BELOW})) "
            "OR EXISTS (SELECT 1 FROM memfs.legacy_directories WHERE workspace = ? "
            f"  AND ((path = ? AND path IS NOT ?) OR {_BELOW}))",
            (*self._scope_params, move.new, move.new, move.new, self.workspace, move.new,
             move.replaced, move.new, move.new),
        ).fetchone()[0]  # fmt: skip
        return bool(busy)

    def _folder_rows(
        self, conn: Any, folder: str, after: str = "", limit: int = -1
    ) -> list[tuple[Any, ...]]:
        """The folder's documents by path after ``after`` (at most ``limit``): id, path,
        updated_at, byte length and the client attributes still valid."""
        return conn.execute(  # type: ignore[no-any-return]
            f"SELECT d.id, d.path, d.updated_at, {_SIZE}, a.mode, a.mtime_ns, "
            f"a.set_against = {_STATE} "
            "FROM memory_documents d LEFT JOIN memfs.legacy_attrs a ON a.document_id = d.id "
            f"WHERE d.user_id = ? AND d.agent_id IS ? AND {_BELOW} AND d.path > ? "
            "ORDER BY d.path LIMIT ?",
            (*self._scope_params, folder, folder, after, limit),
        ).fetchall()

    def _move_directory(
        self, conn: Any, old: str, new: str, replaced: str | None
    ) -> dict[UUID, Moved] | None:
        """The folder's move in the caller's transaction, made only if nothing the mount
        does not show lies at or below ``new`` (None: it was not free)."""
        move = MoveDir(old, new, replaced)
        if self._folder_taken(conn, move):
            return None
        if replaced is not None:
            self._drop_directory(conn, replaced)
        moved = self._move_rows(conn, move, self._folder_rows(conn, old))
        self._move_kept_folders(conn, old, new)
        return moved

    def _move_rows(self, conn: Any, move: MoveDir, rows: Sequence[tuple[Any, ...]]
                   ) -> dict[UUID, Moved]:  # fmt: skip
        """Move ``rows`` (``_folder_rows``) below ``move.new``.  Each keeps its client
        attributes (its mtime: a move is not an edit) and is re-chunked where the indexing
        rules of the two places differ."""
        differ = self._rules_differ(conn, move.old, move.new)
        cut = len(move.old)
        moved: dict[UUID, Moved] = {}
        for doc_id, path, updated_at, size, mode, mtime, valid in rows:
            conn.execute("UPDATE memory_documents SET path = ? WHERE id = ?",
                         (move.new + path[cut:], doc_id))  # fmt: skip
            before = legacy_token(updated_at, int(size))
            kept = attrs_of(mode, mtime) if valid else FileAttrs()
            if kept.mtime_ns is None:
                kept = FileAttrs(kept.mode, _ns(before))
            self._write_attrs(conn, UUID(doc_id), kept)
            after = self._state(conn, UUID(doc_id))
            assert after is not None
            moved[UUID(doc_id)] = Moved(before, after)
            if differ:
                row = self._row(conn, "id = ?", doc_id)
                assert row is not None
                self._reindex_row(conn, row)
        self._note_moves(conn, [(p, move.new + p[cut:]) for _, p, *_ in rows])
        return moved

    def _move_kept_folders(self, conn: Any, old: str, new: str) -> None:
        conn.execute(
            "UPDATE memfs.legacy_directories SET path = ? || substr(path, ?) "
            f"WHERE workspace = ? AND (path = ? OR {_BELOW})",
            (new, len(old) + 1, self.workspace, old, old, old),
        )

    # -- folders too large for one transaction -------------------------------------------

    def _part_limit(self) -> int | None:
        return MOVE_LIMIT

    def _delete_weight(self) -> int:
        """Under IronClaw's vector index a removal costs about four moves (each embedded
        chunk leaves the index: 2.3 ms a document against 0.35 ms a move, 20,000
        documents, 384 dimensions, ``benchmarks/bench_libsql.py``)."""
        return 4 if self.file.writer is not None else 1

    def _folder_size(self, path: str) -> int:
        row = self.file.read(lambda c: c.execute(
            f"SELECT count(*) FROM memory_documents WHERE {_Q} AND {_BELOW}",
            (*self._scope_params, path, path),
        ).fetchone())  # fmt: skip
        return int(row[0]) if row else 0

    def _move_log(self) -> tuple[PartsLog, str] | None:
        return self.deleted, self.workspace

    def _move_part(self, conn: Any, move: MoveDir, after: str, limit: int,
                   outcome: BatchOutcome) -> str | None:  # fmt: skip
        rows = self._folder_rows(conn, move.old, after, limit)
        if not rows:
            self._move_kept_folders(conn, move.old, move.new)
            return None
        free = []
        for row in rows:
            target = move.new + row[1][len(move.old) :]
            taken = conn.execute(
                f"SELECT 1 FROM memory_documents WHERE {_Q} AND path = ? LIMIT 1",
                (*self._scope_params, target),
            ).fetchone()
            if taken is not None:
                outcome.skipped.append((move, f"another writer's document is at {target!r}"))
            else:
                free.append(row)
        outcome.moved.update(self._move_rows(conn, move, free))
        return str(rows[-1][1])
