"""MetaStore: the documents of a workspace in ``memory_documents``: loading the tree,
reading content, and IronClaw's writes (saves, renames, deletes) with memfs's own tables.

Search, embeddings, the reindex queue and the workspace commands have stores of their own
(``search_store``, ``embedding_store``, ``reindex_store``, ``whole_documents``).  All methods are
synchronous and meant to run in a worker thread (see ``memfs.vfs``); each
one borrows a pooled connection and runs one transaction.  Every query is parameterised and
scoped to the mount's ``user_id`` and ``agent_id`` (``IS NOT DISTINCT FROM``, so a NULL agent
matches only NULL rows, as IronClaw does).
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, NamedTuple
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb

from memfs.db.deferred import (
    DeferredChanges,
    DeferringStore,
    Delete,
    Moved,
)
from memfs.db.interface import (
    CommitResult,
    Content,
    DocRow,
    ExportRow,
    FileAttrs,
    Overwritten,
    Rename,
    Replacement,
    SaveOptions,
    StoredDocument,
    attrs_of,
)
from memfs.db.known import EMPTY_METADATA_MD5, KnownFolder, KnownRow, KnownRows
from memfs.db.legacy.postgres.chunks import replace_chunks
from memfs.db.legacy.postgres.reindex_store import ReindexStore
from memfs.db.legacy.postgres.whole_documents import WholeDocumentStore
from memfs.db.legacy.rename_over import LegacyRenameOver, Source
from memfs.db.limits import legacy_max_path
from memfs.db.records import PLAIN_SAVE, Write
from memfs.db.schema import SchemaInfo
from memfs.db.scoped import (
    ATTRS_JOIN,
    DOC_SCOPE,
    FOLDER_JOIN,
    REQUEUE,
    SCOPE,
    Conn,
    Cursor,
    Pool,
    Scope,
    ScopedStore,
    fetch_all,
    folder_config_paths,
)
from memfs.errors import WriteRefused
from memfs.ironclaw.chunker import DEFAULT_CONFIG, ChunkConfig, chunk_document
from memfs.ironclaw.hashing import bytes_hash, content_hash
from memfs.ironclaw.legacy_save import (
    Merging,
    SavePlan,
    StoredRow,
    plan_save,
    plan_save_merging,
)
from memfs.ironclaw.write_rules import (
    DocumentMetadata,
    is_engine_runtime_path,
    legacy_content_problem,
)
from memfs.paths import conflict_copy, escape_like

log = logging.getLogger(__name__)


class _Decided(NamedTuple):
    """``plan_save``'s decision on the row (or the new document's folder) as known."""

    known: KnownRow | None
    folder: KnownFolder | None
    plan: SavePlan


class _Other(NamedTuple):
    """Another writer's change to a row a save is about to overwrite, to keep first."""

    doc_id: UUID
    path: str
    stored_hash: str


@dataclass
class _PendingCommit:
    """A commit whose statements are queued in a pipeline; ``result`` once they have run."""

    created: bool
    #: A new row's id is generated here, as IronClaw's get_or_create does; an existing
    #: row's replaces it.
    doc_id: UUID = field(default_factory=uuid.uuid4)
    changed: bool = True
    updated_at: datetime | None = None
    #: The INSERT/UPDATE's cursor; its row is the new updated_at.
    returning: psycopg.Cursor[tuple[Any, ...]] | None = None
    version: psycopg.Cursor[tuple[Any, ...]] | None = None
    chunks: int = 0
    conflict: str | None = None
    replaced_hash: str | None = None
    #: The text written where the save's ``merge`` made it.
    merged: str | None = None
    #: What the row's metadata and folder were (remembered for one-round-trip saves).
    own: Any = None
    own_md5: str = EMPTY_METADATA_MD5
    folder: Any = None
    folder_md5: str | None = None

    def result(self) -> CommitResult:
        updated_at = self.updated_at
        if self.returning is not None:
            row = self.returning.fetchone()
            assert row is not None
            updated_at = row[0]
        assert updated_at is not None
        versioned = self.version is not None and self.version.rowcount == 1
        return CommitResult(
            self.doc_id, updated_at, self.created, self.changed, self.chunks, versioned,
            self.conflict, self.replaced_hash, self.merged,
        )  # fmt: skip


#: ``content_hash`` of a row's content, computed by the server.
_SERVER_HASH = "'sha256:' || encode(sha256(convert_to(d.content, 'UTF8')), 'hex')"
#: SQLSTATEs: ``memfs.expect`` found the row changed; the function is missing.
_CHANGED = "MF001"
_UNDEFINED_FUNCTION = "42883"
_EMPTY_HASH = bytes_hash(b"")
#: The scope's nearest ``.config`` among %(configs)s (add a SELECT list in front).
#: True when documents moved from under ``old_configs`` to under ``new_configs`` may be
#: indexed differently: the nearest ``.config`` above differs, or an engine path is involved
#: (chunks depend on the effective metadata and the engine-path rule, not on the path).
_RULES_DIFFER = (
    "(%(engine)s OR (SELECT md5(metadata::text) FROM memory_documents "
    f"  WHERE {SCOPE} AND path = ANY(%(old_configs)s) ORDER BY length(path) DESC LIMIT 1) "
    "IS DISTINCT FROM (SELECT md5(metadata::text) FROM memory_documents "
    f"  WHERE {SCOPE} AND path = ANY(%(new_configs)s) ORDER BY length(path) DESC LIMIT 1))"
)


def _answer(cursor: Cursor) -> bool:
    """A ``set_config`` guard's answer (read after the commit)."""
    row = cursor.fetchone()
    return row is not None and row[0] == "true"


def _move_params(old_path: str, new_path: str) -> dict[str, Any]:
    """``_RULES_DIFFER``'s parameters for a move of ``old_path`` to ``new_path``."""
    return {
        "engine": old_path.startswith("engine") or new_path.startswith("engine"),
        "old_configs": folder_config_paths(old_path),
        "new_configs": folder_config_paths(new_path),
    }


_NEAREST_CONFIG = (
    f"FROM memory_documents WHERE {SCOPE} AND path = ANY(%(configs)s) "
    "ORDER BY length(path) DESC LIMIT 1"
)


class MetaStore(DeferringStore, ScopedStore, LegacyRenameOver):
    """The documents of one workspace in IronClaw's ``memory_documents`` (the legacy
    engine behind ``memfs.db.interface.DocumentStore``)."""

    #: IronClaw's chunking: its indexer's fixed constants.
    chunk_config: ChunkConfig = DEFAULT_CONFIG

    def __init__(
        self,
        pool: Pool,
        scope: Scope,
        schema: SchemaInfo,
        origin: str | None = None,
        settings: dict[str, str] | None = None,
    ) -> None:
        super().__init__(pool, scope)
        #: Server settings each write transaction sets for itself (through a pooler).
        self.settings = settings or {}
        self.schema = schema
        #: Tags this mount's writes so its change-feed listener can skip their echoes.
        self.origin = origin
        #: Rows this store last saw, for saves in one round trip (checked by the server).
        self.known = KnownRows()
        #: Changes waiting for the next transaction (``unlink``, ``rmdir``, ``mv dir``: see
        #: ``db.deferred``).
        self.deferred = DeferredChanges()
        self.fast_saves = True
        self.max_path_bytes = legacy_max_path(scope.user_id)

    def _tag(self, conn: Conn) -> None:
        """Mark the transaction as memfs's own, which keeps and records what it deletes and
        moves itself: memfs's trigger then does not keep a second copy.  A store with no
        origin (``memfs sync``, ``memfs restore``: no change feed to tell its events
        apart) is tagged all the same."""
        conn.execute(
            "SELECT set_config('memfs.origin', %s, true)", (self.origin or "memfs",),
            prepare=True,
        )  # fmt: skip

    def _begin(self, conn: Conn) -> None:
        for name, value in self.settings.items():
            conn.execute("SELECT set_config(%s, %s, true)", (name, value))

    def _before_changes(self, conn: Conn) -> None:
        self._tag(conn)

    def _send_deletes(self, conn: Conn, deletes: Sequence[Delete]) -> Callable[[], set[UUID]]:
        left = self._delete_rows(conn, deletes)[1]
        return lambda: {r[0] for r in left.fetchall()}

    def _send_move(
        self, conn: Conn, old: str, new: str, replaced: str | None
    ) -> Callable[[], tuple[bool, dict[UUID, Moved]]]:
        free, rows = self._move_directory(conn, old, new, replaced)
        return lambda: (_answer(free), {r[0]: Moved(r[2], r[1]) for r in rows.fetchall()})

    def _delete_rows(
        self, conn: Conn, deletes: Sequence[Delete], *, keep: bool = True
    ) -> tuple[Cursor, Cursor]:
        """IronClaw's delete of documents (chunks and versions cascade) and memfs's state
        about them, each only while its row is at the version the mount showed (``seen``;
        None: any).  Returns cursors answering the ids deleted, and the ids of rows left in
        place (their guard failed: another writer changed them)."""
        params = self._params(
            ids=[d.doc_id for d in deletes], seen=[d.seen for d in deletes],
            hashes=[self._known_hash(d) for d in deletes],
        )  # fmt: skip
        guarded = (
            "memory_documents d USING unnest(%(ids)s::uuid[], %(seen)s::timestamptz[], "
            f"  %(hashes)s::text[]) AS g(id, seen, hash) WHERE d.id = g.id AND {DOC_SCOPE} "
            "    AND (g.seen IS NULL OR d.updated_at = g.seen) "
            f"    AND (g.hash IS NULL OR {_SERVER_HASH} = g.hash)"
        )
        # Kept with its versions before the delete takes them (memfs.keep_document); the
        # rows are locked first, so the delete's guard sees what was kept.
        if keep:
            conn.execute(
                "SELECT memfs.keep_document(k.id, 'mount') FROM (SELECT d.id FROM "
                + guarded.replace(" USING ", ", ", 1)
                + " FOR UPDATE OF d) AS k",
                params,
                prepare=True,
            )
        gone = conn.execute(
            f"WITH gone AS (DELETE FROM {guarded} RETURNING d.id), "
            "attrs AS (DELETE FROM memfs.file_attrs WHERE document_id IN (SELECT id FROM gone)), "
            "queue AS (DELETE FROM memfs.reindex_queue WHERE document_id IN (SELECT id FROM gone)) "
            "SELECT id FROM gone",
            params,
            prepare=True,
        )
        for doc_id in params["ids"]:
            self.known.forget(doc_id)
        left = conn.execute(
            f"SELECT id FROM memory_documents WHERE id = ANY(%(ids)s) AND {SCOPE}",
            params,
            prepare=True,
        )
        return gone, left

    def _known_hash(self, delete: Delete) -> str | None:
        """The content hash of the row as the mount showed it, when this store knows it:
        ``updated_at`` is the writing transaction's start (two transactions may leave the
        same value), so a removal also checks the content where it can."""
        if delete.seen is None:
            return None
        known = self.known.row(delete.doc_id)
        return known.stored_hash if known is not None and known.updated_at == delete.seen else None

    def _drop_directory(self, conn: Conn, path: str) -> None:
        conn.execute(
            f"DELETE FROM memfs.directories WHERE {SCOPE} AND path = %(path)s",
            self._params(path=path),
        )

    def path_problem(self, path: str) -> str | None:
        """None: ``memory_documents`` takes every path ``memfs.paths`` accepts."""
        return None

    def content_problem(self, path: str, text: str) -> WriteRefused | None:
        return legacy_content_problem(path, text)

    # -- reading -------------------------------------------------------------------------

    def _doc_rows(self, where: str, params: dict[str, Any]) -> list[DocRow]:
        """``DocRow`` of the scope's documents matching ``where``, in path order, without
        those this mount deleted and has not sent yet (``db.deferred``)."""
        with self.deferred.deletions_during() as hidden, self.pool.connection() as conn:
            rows = conn.execute(
                "SELECT d.id, d.path, octet_length(d.content), d.created_at, d.updated_at, "
                f"a.mode, a.mtime_ns FROM memory_documents d {ATTRS_JOIN} "
                f"WHERE {DOC_SCOPE} AND {where} ORDER BY d.path, d.updated_at DESC, d.id",
                params,
            ).fetchall()
        return [
            DocRow(r[0], r[1], r[2], r[3], r[4], attrs_of(r[5], r[6]))
            for r in rows
            if r[0] not in hidden
        ]

    def load_documents(self) -> list[DocRow]:
        """Paths and attributes of every document of the scope (no content)."""
        return self._doc_rows("true", self._params())

    def load_directories(self) -> list[str]:
        """Directories memfs keeps for this scope (made by mkdir or emptied by a mount)."""
        rows = fetch_all(
            self.pool,
            f"SELECT path FROM memfs.directories WHERE {SCOPE} ORDER BY path",
            self._params(),
        )
        return sorted(self.deferred.directories({r[0] for r in rows}))

    def find_document(self, path: str) -> StoredDocument | None:
        return WholeDocumentStore(self.pool, self.scope).find_document(path)

    def export_rows(self) -> list[ExportRow]:
        return WholeDocumentStore(self.pool, self.scope).export_rows()

    def reindex_targets(self, paths: Sequence[str] | None) -> list[tuple[UUID, str]]:
        return WholeDocumentStore(self.pool, self.scope).document_ids(paths)

    def reindex(self, doc_id: UUID, path: str) -> int:
        return ReindexStore(self.pool, self.scope).reindex_document(doc_id)

    def read_content(self, doc_id: UUID) -> Content | None:
        """A document's content (UTF-8 bytes) and version, or None if the row is gone.

        Fetched as binary bytea: the bytes the mount serves, without a decoded copy."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT convert_to(content, 'UTF8'), updated_at FROM memory_documents "
                f"WHERE id = %(id)s AND {SCOPE}",
                self._params(id=doc_id),
                binary=True,
            ).fetchone()
        return Content(bytes(row[0]), row[1]) if row else None

    def content_by_hash(self, doc_id: UUID, digest: str) -> bytes | None:
        with self.pool.connection() as conn:
            return self._content_by_hash(conn, doc_id, digest)

    def _content_by_hash(self, conn: Conn, doc_id: UUID, digest: str) -> bytes | None:
        """The row's or a version's bytes by IronClaw's hash, on ``conn`` (a save's
        transaction: a merge's base known by hash alone)."""
        current = (
            "SELECT convert_to(d.content, 'UTF8') FROM memory_documents d "
            f"WHERE d.id = %(id)s AND {DOC_SCOPE} AND {_SERVER_HASH} = %(hash)s"
        )
        kept = (
            "SELECT convert_to(v.content, 'UTF8') FROM memory_document_versions v "
            "JOIN memory_documents d ON d.id = v.document_id "
            f"WHERE v.document_id = %(id)s AND {DOC_SCOPE} AND v.content_hash = %(hash)s"
        )
        query = f"({current}) UNION ALL ({kept}) LIMIT 1" if self.schema.has_versions else current
        row = conn.execute(query, self._params(id=doc_id, hash=digest), binary=True).fetchone()
        return bytes(row[0]) if row is not None else None

    def read_contents(
        self, doc_ids: Sequence[UUID], near: str | None = None
    ) -> dict[UUID, Content]:
        """``read_content`` for several documents in one round trip (those that exist).

        ``near`` is a path in their folder: its ``.config`` metadata comes along, and what
        is read is remembered for one-round-trip saves of these documents.
        """
        configs = folder_config_paths(near) if near is not None else []
        rows = fetch_all(
            self.pool,
            "SELECT d.id, convert_to(d.content, 'UTF8'), d.updated_at, d.path, "
            "  d.metadata, md5(d.metadata::text), f.metadata, md5(f.metadata::text) "
            f"FROM memory_documents d {FOLDER_JOIN} "
            f"WHERE d.id = ANY(%(ids)s) AND {DOC_SCOPE}",
            self._params(ids=list(doc_ids), configs=configs),
            binary=True,
        )
        found = {}
        for doc_id, data, updated_at, path, own, own_md5, folder, folder_md5 in rows:
            found[doc_id] = Content(bytes(data), updated_at)
            if near is not None and folder_config_paths(path) == configs:
                stored = bytes_hash(data)
                row = KnownRow(path, updated_at, stored, own, own_md5, folder, folder_md5)
                self.known.remember(doc_id, row, configs)
        return found

    def changed_documents(self, events: Sequence[Mapping[str, object]]) -> dict[UUID, bool]:
        """The change feed's events (``memfs.notify_change``) of this scope's documents:
        True for a deleted one; this store's own writes (its origin tag) left out."""
        agent = str(self.scope.agent_id) if self.scope.agent_id else None
        found: dict[UUID, bool] = {}
        for event in events:
            if event.get("user") != self.scope.user_id or event.get("agent") != agent:
                continue
            if self.origin and event.get("origin") == self.origin:
                continue  # our own write, already in the tree
            doc_id = UUID(str(event["id"]))
            found.pop(doc_id, None)
            found[doc_id] = event.get("op") == "DELETE"
        return found

    def document_rows(self, doc_ids: Sequence[UUID]) -> dict[UUID, DocRow]:
        """Path and attributes (no content) of those of ``doc_ids`` that exist, in one
        query: a batch of change-feed events costs one round trip."""
        rows = self._doc_rows("d.id = ANY(%(ids)s)", self._params(ids=list(doc_ids)))
        return {row.id: row for row in rows}

    def document_versions(self) -> None:
        return None  # the change feed tells of each change: a poll is rare here

    def fingerprint(self) -> tuple[int, str]:
        """Changes whenever any row of the scope is inserted, updated or deleted (polling)."""
        with self.pool.connection() as conn:
            row = conn.execute(
                "SELECT count(*), COALESCE(sum(hashtextextended(id::text || updated_at::text, 0)),"
                f" 0)::text FROM memory_documents WHERE {SCOPE}",
                self._params(),
            ).fetchone()
        return (int(row[0]), str(row[1])) if row else (0, "0")

    # -- writing -------------------------------------------------------------------------

    def commit_document(
        self, write: Write, attrs: FileAttrs, how: SaveOptions = PLAIN_SAVE
    ) -> CommitResult:
        """Write a document through, IronClaw-style, in one transaction.

        Updates the row ``doc_id`` (or the row at ``path``; inserts one if there is none),
        keeping id, created_at and metadata; saves the previous content as a version where
        IronClaw would.  Creation is serialised with an advisory lock because IronClaw's
        UNIQUE constraint does not stop duplicates while agent_id is NULL.

        With ``index_now`` the chunks are replaced in the same transaction.  Without it the
        document joins ``memfs.reindex_queue`` in that transaction and ``reindex_queued``
        re-chunks it moments later, in a transaction of its own, as IronClaw's write does
        (content update, then reindex).  The queue is a table, so a crash in between loses
        nothing: the next mount finishes the work.

        ``expected`` is the row version the content was based on.  If the row changed since
        (another writer), its newer content is kept before it is overwritten: as a version
        where the versions table exists, otherwise as a ``<path>.conflict-<time>.md`` copy.

        With ``merge``, a row changed since ``expected`` is merged with the save under the
        row lock (``plan_merged``: a third round trip reads its content), and the merge is
        written instead.

        One round trip when this store knows the row as the database has it
        (``_commit_in_one_round_trip``), else two: only the row lock's answer decides what
        follows.  ``unconfigured``: the caller sees no ``.config`` document above ``path``
        (a guess the server checks, as every known fact), so a new document's first save
        in a folder is one round trip too.
        """
        path, content = write.path, write.content
        if not how.index_now and self.fast_saves:
            fast = self._commit_in_one_round_trip(write, attrs, how)
            if fast is not None:
                return fast
        chunks = chunk_document(content, self.chunk_config) if how.index_now else None
        with self._transaction() as conn:
            self._tag(conn)
            pending = self._commit(conn, write, attrs, chunks, how)
        result = pending.result()
        stored = content_hash(pending.merged) if pending.merged is not None else write.new_hash
        self._learn(result, path, stored, pending)
        return result

    def _learn(
        self, result: CommitResult, path: str, stored_hash: str, pending: _PendingCommit
    ) -> None:
        """Remember the row as this commit left it (for the next save's one round trip)."""
        self.known.remember(
            result.doc_id,
            KnownRow(path, result.updated_at, stored_hash, pending.own or {}, pending.own_md5,
                     pending.folder, pending.folder_md5),
            folder_config_paths(path),
        )  # fmt: skip

    def _commit_in_one_round_trip(
        self,
        write: Write,
        attrs: FileAttrs,
        how: SaveOptions,
        replacing: tuple[UUID, datetime, Sequence[str]] | None = None,
    ) -> CommitResult | None:
        """The save in one round trip, when this store knows the row (or, for a new
        document, its folder) as the database has it; None if it does not, or if the
        server finds the row changed (the caller then saves the careful way).

        ``replacing`` (source row, its version, folders to keep) ends the transaction
        with ``replace_document``'s delete of the renamed source, guarded the same way.

        The statements are ``_commit``'s for the same case, decided on what is known, and
        sent together behind a guard (``memfs.expect``) that fails the transaction unless
        the row's path, version, content hash and metadata and its folder's ``.config``
        are exactly what the decisions were made on.
        """
        decided = self._decide_on_known(write, how)
        if decided is None:
            return None
        doc_id = write.doc_id
        pending = _PendingCommit(created=decided.known is None)
        try:
            with self._transaction() as conn:
                self._tag(conn)
                if replacing is not None:
                    self._send_replacing(conn, pending, write, decided, replacing)
                elif decided.known is not None:
                    self._send_known_update(conn, pending, write, decided)
                else:
                    assert decided.folder is not None
                    self._send_known_insert(conn, pending, write, decided.folder)
                conn.execute(
                    f"INSERT INTO memfs.reindex_queue (document_id) VALUES (%s) {REQUEUE}",
                    (pending.doc_id,),
                    prepare=True,
                )
                if not (pending.created and attrs.empty):
                    self._write_attrs(conn, pending.doc_id, attrs)
        except psycopg.Error as exc:
            if exc.sqlstate == _CHANGED:
                if doc_id is not None:
                    self.known.forget(doc_id)
                return None
            if exc.sqlstate == _UNDEFINED_FUNCTION:  # an older memfs schema
                self.fast_saves = False
                return None
            raise
        result = pending.result()
        self._learn(result, write.path, write.new_hash, pending)
        return result

    def _decide_on_known(self, write: Write, how: SaveOptions) -> _Decided | None:
        """``plan_save``'s decision on the row (or, for a new document, the folder) as this
        store knows it; None where the careful save must decide (nothing known, a row
        changed since ``how.expected``, unchanged content, a refusal, an engine path)."""
        doc_id, path, new_hash = write.doc_id, write.path, write.new_hash
        expected, unconfigured = how.expected, how.unconfigured
        if is_engine_runtime_path(path) or (how.stale_base and doc_id is not None):
            return None  # (a stale base: the row as it stands is merged with, read first)
        configs = folder_config_paths(path)
        known = self.known.row(doc_id) if doc_id is not None else None
        folder = self.known.folder(configs) if doc_id is None else None
        if folder is None and doc_id is None and unconfigured:
            folder = KnownFolder(None, None)  # no .config above: checked by the guard
        if doc_id is not None and (
            known is None
            or known.path != path
            or (expected is not None and known.updated_at != expected)
            or known.stored_hash == new_hash  # unchanged: re-indexed the careful way
        ):
            return None
        if doc_id is None and folder is None:
            return None
        stored = None
        if known is not None:
            stored = StoredRow(known.stored_hash, known.stored_hash == _EMPTY_HASH, known.own,
                               known.folder, known.updated_at)  # fmt: skip
        try:  # the careful save's rule, on the row as known (the guard checks it still is)
            plan = plan_save(write, stored, folder.metadata if folder is not None else None,
                             known.updated_at if known is not None else None)  # fmt: skip
        except WriteRefused:
            return None  # refused on what is known: let the careful save decide
        # Sent on what is known: a changed content over an unchanged row (the guard fails
        # the transaction otherwise), so never another writer's content to keep first.
        assert plan.write and not plan.keep_other
        return _Decided(known, folder, plan)

    def _send_known_update(
        self, conn: Conn, pending: _PendingCommit, write: Write, decided: _Decided
    ) -> None:
        """The update of a known row, behind the guard that it is still as known."""
        known, plan = decided.known, decided.plan
        doc_id, path, content = write.doc_id, write.path, write.content
        assert known is not None and doc_id is not None
        pending.doc_id = doc_id
        pending.own, pending.own_md5 = known.own, known.own_md5
        pending.folder, pending.folder_md5 = known.folder, known.folder_md5
        self._expect_row(conn, doc_id, path, folder_config_paths(path), known)
        if plan.version:
            pending.version = self._maybe_save_version(conn, doc_id, known.stored_hash, plan.meta)
        if plan.fills_empty:
            self._note_empty_spell(conn, path, known.updated_at)
        pending.returning = conn.execute(
            "UPDATE memory_documents SET content = %(content)s WHERE id = %(id)s "
            "RETURNING updated_at",
            {"content": content, "id": doc_id},
            prepare=True,
        )

    def _send_known_insert(
        self, conn: Conn, pending: _PendingCommit, write: Write, folder: KnownFolder
    ) -> None:
        """The insert of a new document, behind the guard that its path is free and its
        folder's ``.config`` is as known."""
        path, content = write.path, write.content
        pending.folder, pending.folder_md5 = folder.metadata, folder.md5
        self._lock_path(conn, path)
        conn.execute(
            "SELECT memfs.expect(NOT EXISTS (SELECT 1 FROM memory_documents "
            f"  WHERE {SCOPE} AND path = %(path)s) AND (SELECT md5(metadata::text) "
            f"  {_NEAREST_CONFIG}) IS NOT DISTINCT FROM %(folder)s, 'path')",
            self._params(path=path, configs=folder_config_paths(path), folder=folder.md5),
            prepare=True,
        )
        pending.returning = conn.execute(
            "INSERT INTO memory_documents (id, user_id, agent_id, path, content, "
            "metadata) VALUES (%(id)s, %(user)s, %(agent)s, %(path)s, %(content)s, "
            "'{}'::jsonb) RETURNING updated_at",
            self._params(id=pending.doc_id, path=path, content=content),
            prepare=True,
        )

    def _note_empty_spell(self, conn: Conn, path: str, emptied_at: datetime) -> None:
        """The row at ``path``, filled by this save, was empty since ``emptied_at``."""
        conn.execute(
            "INSERT INTO memfs.empty_spells (workspace, path, emptied_at) "
            "VALUES (memfs.legacy_workspace(%(user)s, %(agent)s), %(path)s, %(at)s)",
            self._params(path=path, at=emptied_at),
            prepare=True,
        )

    def _send_replacing(
        self,
        conn: Conn,
        pending: _PendingCommit,
        write: Write,
        decided: _Decided,
        replacing: tuple[UUID, datetime, Sequence[str]],
    ) -> None:
        """``replace_document``'s steps (``LegacyRenameOver``) with the target's write
        decided on what is known, guarded on the source's version the mount showed: its
        step 5 cannot apply (a changed source fails the transaction), nor can step 2 (the
        guard holds the target to a content other than ``content``)."""
        source_id, source_at, keep_dirs = replacing
        conn.execute(
            "SELECT memfs.expect(EXISTS (SELECT 1 FROM memory_documents "
            f"  WHERE id = %(id)s AND {SCOPE} AND updated_at = %(at)s "
            "  FOR UPDATE), 'source')",
            self._params(id=source_id, at=source_at),
            prepare=True,
        )

        def update() -> _PendingCommit:
            self._send_known_update(conn, pending, write, decided)
            return pending

        assert write.doc_id is not None
        self._rename_over(conn, Source(source_id, None), write.doc_id, write.content, update)
        self._keep_directories(conn, keep_dirs)

    def _expect_row(
        self, conn: Conn, doc_id: UUID, path: str, configs: list[str], known: KnownRow
    ) -> None:
        """Lock the row, and fail the transaction (MF001) unless it is as ``known``."""
        conn.execute(
            "SELECT memfs.expect(EXISTS (SELECT 1 FROM memory_documents d "
            f"{FOLDER_JOIN} WHERE d.id = %(id)s AND {DOC_SCOPE} AND d.path = %(path)s "
            f"  AND d.updated_at = %(at)s AND {_SERVER_HASH} = %(hash)s "
            "  AND md5(d.metadata::text) = %(own)s "
            "  AND md5(f.metadata::text) IS NOT DISTINCT FROM %(folder)s "
            "  FOR NO KEY UPDATE OF d), 'document')",
            self._params(
                id=doc_id, path=path, configs=configs, at=known.updated_at,
                hash=known.stored_hash, own=known.own_md5, folder=known.folder_md5,
            ), prepare=True,
        )  # fmt: skip

    def _send_save(
        self, conn: Conn, doc_id: UUID | None, path: str, content: str, attrs: FileAttrs
    ) -> Callable[[], CommitResult]:
        chunks = chunk_document(content, self.chunk_config)
        return self._commit(conn, Write(doc_id, path, content), attrs, chunks).result

    def _commit(
        self,
        conn: Conn,
        write: Write,
        attrs: FileAttrs,
        chunks: list[str] | None,
        how: SaveOptions = PLAIN_SAVE,
    ) -> _PendingCommit:
        """Queue one document's statements; the caller's transaction end resolves them.

        IronClaw's write (``memfs.ironclaw.legacy_save``): the row is locked and read,
        ``plan_save`` decides, and its plan is sent; an unchanged save changes no row but
        is re-indexed (chunks missing or stale are rebuilt).  A refused write raises
        ``WriteRefused`` and the transaction rolls back.
        """
        doc_id, path, content = write.doc_id, write.path, write.content
        expected, merge = how.expected, how.merge
        conflict = None
        pending, stored = self._read_for_save(conn, doc_id, path)
        stored = self._unseen(pending.doc_id, stored, expected, stale=how.stale_base)
        merging = None
        if merge is not None:
            doc_id_now = pending.doc_id
            merging = Merging(
                lambda theirs: merge(theirs, lambda h: self._content_by_hash(conn, doc_id_now, h)),
                lambda: self._stored_content(conn, doc_id_now).encode("utf-8"),
            )
        content, _, plan, merged = plan_save_merging(
            write, stored, pending.folder, expected, merging
        )
        if merged:
            pending.merged = content
            chunks = chunk_document(content, self.chunk_config) if chunks is not None else None
        pending.changed, pending.replaced_hash = plan.changed, plan.replaced_hash
        if plan.keep_other:
            assert stored is not None
            conflict = self._keep_concurrent_change(
                conn, _Other(pending.doc_id, path, stored.stored_hash), plan.meta,
                index_now=chunks is not None,
            )  # fmt: skip
        if plan.version:
            assert stored is not None
            pending.version = self._maybe_save_version(
                conn, pending.doc_id, stored.stored_hash, plan.meta
            )
        if plan.fills_empty:
            assert stored is not None
            self._note_empty_spell(conn, path, stored.updated_at)
        if plan.created:
            pending.returning = conn.execute(
                "INSERT INTO memory_documents (id, user_id, agent_id, path, content, metadata) "
                "VALUES (%(id)s, %(user)s, %(agent)s, %(path)s, %(content)s, '{}'::jsonb) "
                "RETURNING updated_at",
                self._params(id=pending.doc_id, path=path, content=content),
            )
        elif plan.write:
            pending.returning = conn.execute(
                "UPDATE memory_documents SET content = %(content)s WHERE id = %(id)s "
                "RETURNING updated_at",
                {"content": content, "id": pending.doc_id},
            )
        pending.conflict = conflict
        # IronClaw re-indexes after every write, changed or not: a row whose chunks are
        # missing (inserted by SQL) or stale gets them now.
        if chunks is None:
            conn.execute(
                f"INSERT INTO memfs.reindex_queue (document_id) VALUES (%s) {REQUEUE}",
                (pending.doc_id,),
            )
        else:
            indexed = chunks if plan.index else []
            replace_chunks(conn, {pending.doc_id: indexed}, fresh=pending.created)
            pending.chunks = len(indexed)
        if not (pending.created and attrs.empty):  # a new row has no attributes to clear
            self._write_attrs(conn, pending.doc_id, attrs)
        return pending

    def _unseen(
        self, doc_id: UUID, stored: StoredRow | None, expected: datetime | None, *, stale: bool
    ) -> StoredRow | None:
        """``stored``, marked changed by another writer if the save's base is older than
        any version of it (``stale``), or its content is not what this store knew at
        ``expected`` although its ``updated_at`` is (two transactions that began within one
        microsecond)."""
        if stored is not None and stale:
            return dataclasses.replace(stored, unseen_change=True)
        if stored is None or expected is None or stored.updated_at != expected:
            return stored
        known = self.known.row(doc_id)
        if known is None or known.updated_at != expected or known.stored_hash == stored.stored_hash:
            return stored
        return dataclasses.replace(stored, unseen_change=True)

    def _read_for_save(
        self, conn: Conn, doc_id: UUID | None, path: str
    ) -> tuple[_PendingCommit, StoredRow | None]:
        """The row a save writes, locked (by id, else by path under the path's advisory
        lock, with the folder's ``.config``), as the save's pending result and the stored
        row ``plan_save`` decides on (None: a new document)."""
        row = None
        folder_row = None
        if doc_id is not None:
            row = self._lock_document(conn, "id = %(id)s", id=doc_id, path=path)
        if row is None:
            self._lock_path(conn, path)
            folder_cur = conn.execute(
                f"SELECT metadata, md5(metadata::text) {_NEAREST_CONFIG}",
                self._params(configs=folder_config_paths(path)),
            )
            row = self._lock_document(conn, "path = %(path)s", path=path)
            folder_row = folder_cur.fetchone()
        pending = _PendingCommit(created=row is None)
        if row is None:
            if folder_row:
                pending.folder, pending.folder_md5 = folder_row[0], folder_row[1]
            return pending, None
        pending.doc_id, stored_hash, stored_empty, own, folder, pending.updated_at = row[:6]
        pending.own, pending.folder, pending.own_md5, pending.folder_md5 = (
            own,
            folder,
            row[6],
            row[7],
        )
        return pending, StoredRow(stored_hash, stored_empty, own, folder, pending.updated_at)

    def _keep_concurrent_change(
        self, conn: Conn, other: _Other, meta: DocumentMetadata, *, index_now: bool
    ) -> str:
        """Someone else changed the row since we read it: keep their content too."""
        doc_id, path, newer_hash = other
        if self.schema.has_versions:
            self._maybe_save_version(conn, doc_id, newer_hash, meta, force=True)
            row = conn.execute(
                "SELECT max(version) FROM memory_document_versions WHERE document_id = %s",
                (doc_id,),
            ).fetchone()
            return f"version {row[0] if row else '?'}"
        copy = conflict_copy(path, datetime.now(UTC))
        newer = self._stored_content(conn, doc_id)
        chunks = chunk_document(newer, self.chunk_config) if index_now else None
        self._commit(conn, Write(None, copy, newer), FileAttrs(), chunks).result()
        return f"copy {copy}"

    def _lock_document(self, conn: Conn, where: str, **params: Any) -> tuple[Any, ...] | None:
        """Lock a document row: (id, content hash, content is empty, metadata, folder
        metadata, updated_at).

        The content itself stays on the server: a save compares hashes, and the version it
        keeps is copied from the row by the server, so a 50 MB document is not fetched and
        sent back on every save.  FOR NO KEY UPDATE is the lock an UPDATE of its content
        takes anyway; unlike FOR UPDATE it does not hold up inserting chunks (their foreign
        key check), so a save and a re-chunk never wait for each other."""
        path = params["path"]
        row = conn.execute(
            f"SELECT d.id, {_SERVER_HASH}, d.content = '', d.metadata, f.metadata, "
            "  d.updated_at, md5(d.metadata::text), md5(f.metadata::text) "
            f"FROM memory_documents d {FOLDER_JOIN} WHERE d.{where} AND {DOC_SCOPE} "
            "ORDER BY d.updated_at DESC LIMIT 1 FOR NO KEY UPDATE OF d",
            self._params(configs=folder_config_paths(path), **params),
        ).fetchone()
        return tuple(row) if row else None

    @staticmethod
    def _stored_content(conn: Conn, doc_id: UUID) -> str:
        row = conn.execute("SELECT content FROM memory_documents WHERE id = %s", (doc_id,))
        content: str = row.fetchone()[0]  # type: ignore[index]
        return content

    def _lock_path(self, conn: Conn, path: str) -> None:
        """Serialise creations at ``path`` (IronClaw's unique index does not while agent_id
        is NULL), and hold every folder above it against a move onto it (shared: creations
        in one folder do not wait for each other)."""
        key = f"memfs\n{self.scope.user_id}\n{self.scope.agent_id or ''}\n{path}"
        parts = path.split("/")[:-1]
        folders = [self._dir_key("/".join(parts[: n + 1])) for n in range(len(parts))]
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0)), "
            "(SELECT count(pg_advisory_xact_lock_shared(hashtextextended(f, 0))) "
            " FROM unnest(%s::text[]) AS f)",
            (key, folders),
            prepare=True,
        )

    def _maybe_save_version(
        self,
        conn: Conn,
        doc_id: UUID,
        stored_hash: str,
        meta: DocumentMetadata,
        *,
        force: bool = False,
    ) -> psycopg.Cursor[tuple[Any, ...]] | None:
        """IronClaw's ``maybe_save_version``: keep the row's current content as version
        MAX+1 (copied by the server, before the caller's UPDATE replaces it).

        Skipped without the versions table, under effective ``skip_versioning``, or when the
        newest version already has this content's hash (``stored_hash``, IronClaw's format).
        The caller skips empty content and holds the row lock.  Returns the INSERT's cursor
        (its rowcount says whether a version was written) or None if skipped.
        """
        skip = not meta.versioned and not force
        if not self.schema.has_versions or skip:
            return None
        return conn.execute(
            "INSERT INTO memory_document_versions "
            "  (document_id, version, content, content_hash, changed_by) "
            "SELECT d.id, COALESCE((SELECT MAX(v.version) FROM memory_document_versions v "
            "  WHERE v.document_id = d.id), 0) + 1, d.content, %(hash)s, %(user)s "
            "FROM memory_documents d WHERE d.id = %(id)s "
            "AND %(hash)s IS DISTINCT FROM ("
            "  SELECT l.content_hash FROM memory_document_versions l "
            "  WHERE l.document_id = %(id)s ORDER BY l.version DESC LIMIT 1)",
            {"id": doc_id, "hash": stored_hash, "user": self.scope.user_id},
            prepare=True,
        )

    def _write_attrs(
        self, conn: Conn, doc_id: UUID, attrs: FileAttrs, updated_at: datetime | None = None
    ) -> None:
        """Store client attributes against ``updated_at`` (default: the row's, as of this
        statement; nothing if the row is gone, so it needs no answer before it)."""
        if attrs.empty:
            conn.execute(
                "DELETE FROM memfs.file_attrs WHERE document_id = %s", (doc_id,), prepare=True
            )
            return
        conn.execute(
            "INSERT INTO memfs.file_attrs (document_id, mode, mtime_ns, set_against) "
            "SELECT d.id, %(mode)s, %(mtime)s, COALESCE(%(at)s, d.updated_at) "
            "FROM memory_documents d WHERE d.id = %(id)s "
            "ON CONFLICT (document_id) DO UPDATE SET mode = EXCLUDED.mode, "
            "  mtime_ns = EXCLUDED.mtime_ns, set_against = EXCLUDED.set_against",
            {"id": doc_id, "mode": attrs.mode, "mtime": attrs.mtime_ns, "at": updated_at},
            prepare=True,
        )

    def merge_metadata(self, doc_id: UUID, path: str, overlay: Mapping[str, Any]) -> bool:
        """IronClaw's metadata merge (``DocumentMetadata::merge``: the overlay's top-level
        keys win, a non-object is taken as ``{}``), in one round trip; the row's version
        is left as it is (the save that follows sets it).  False if the row is gone."""
        with self._transaction() as conn:
            done = conn.execute(
                "UPDATE memory_documents SET metadata = (CASE WHEN jsonb_typeof(metadata) "
                "= 'object' THEN metadata ELSE '{}'::jsonb END) || %(overlay)s "
                f"WHERE id = %(id)s AND {SCOPE} RETURNING 1",
                self._params(id=doc_id, overlay=Jsonb(dict(overlay))),
            )
        self.known.forget(doc_id)  # the next save reads the row's metadata again
        return done.fetchone() is not None

    def set_attrs(self, doc_id: UUID, attrs: FileAttrs) -> bool:
        """Persist mode/mtime for a document against its current updated_at, in one round
        trip.  Returns False if the row is gone."""
        with self._transaction() as conn:
            found = conn.execute(
                f"SELECT 1 FROM memory_documents WHERE id = %(id)s AND {SCOPE} FOR SHARE",
                self._params(id=doc_id),
            )
            self._write_attrs(conn, doc_id, attrs)
        return found.fetchone() is not None

    def _keep_directories(self, conn: Conn, paths: Sequence[str]) -> None:
        if paths:
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memfs.directories (user_id, agent_id, path) "
                    "VALUES (%(user)s, %(agent)s, %(path)s) ON CONFLICT DO NOTHING",
                    [self._params(path=p) for p in paths],
                )

    def _delete_row(self, conn: Conn, doc_id: UUID, *, keep: bool = True) -> Cursor:
        """``_delete_rows`` of one document, whatever its version; the cursor answers its
        id if it was there."""
        return self._delete_rows(conn, [Delete(doc_id)], keep=keep)[0]

    def delete_document(
        self, doc_id: UUID, keep_dirs: Sequence[str] = (), seen: datetime | None = None
    ) -> bool:
        """Delete a document (chunks and versions cascade), as IronClaw's delete does.

        One pipelined round trip for the whole transaction.
        """
        with self._transaction() as conn:
            self._tag(conn)
            cur = self._delete_rows(conn, [Delete(doc_id, seen)])[0]
            self._keep_directories(conn, keep_dirs)
        return cur.fetchone() is not None

    def rename_document(
        self, rename: Rename, attrs: FileAttrs, replaced: Overwritten | None = None
    ) -> Moved | None:
        """Move a document to ``rename.new_path`` (deleting ``replaced`` first, only at the
        version the mount showed); its versions before and after, or None if it is gone.

        It is queued for re-chunking unless ``rename.old_path`` is given and the indexing
        rules of both places are the same (the chunks then stay right)."""
        doc_id, new_path, old_path = rename.doc_id, rename.new_path, rename.old_path
        keep_dirs = rename.keep_dirs
        try:
            with self._transaction() as conn:
                self._tag(conn)
                if replaced is not None:  # only as the mount showed it (else EEXIST below)
                    self._delete_rows(conn, [Delete(replaced.doc_id, replaced.seen)])
                # Another row may sit at the target path without this mount showing it (another
                # writer just made it): never two rows at one path, and never delete a row the
                # mount did not show.  The rename is refused (EEXIST); the feed shows the row.
                self._lock_path(conn, new_path)
                conn.execute(
                    "SELECT memfs.expect(NOT EXISTS (SELECT 1 FROM memory_documents "
                    f"  WHERE {SCOPE} AND path = %(path)s AND id <> %(id)s), 'target')",
                    self._params(path=new_path, id=doc_id),
                )
                moved = conn.execute(
                    "WITH old AS (SELECT id, updated_at, path FROM memory_documents "
                    f"  WHERE id = %(id)s AND {SCOPE} FOR UPDATE), "
                    "moved AS (UPDATE memory_documents d SET path = %(path)s FROM old "
                    "  WHERE d.id = old.id "
                    "  RETURNING d.updated_at AS after, old.updated_at AS before, old.path), "
                    "noted AS (INSERT INTO memfs.path_history (workspace, old_path, new_path) "
                    "  SELECT memfs.legacy_workspace(%(user)s, %(agent)s), path, %(path)s "
                    "  FROM moved WHERE path <> %(path)s) "
                    "SELECT after, before FROM moved",
                    self._params(path=new_path, id=doc_id),
                )
                # Queued without waiting for the UPDATE's answer: both do nothing if it is gone.
                self._write_attrs(conn, doc_id, attrs)
                if old_path is None:
                    self._queue_reindex(conn, [doc_id])  # the new location's indexing rules
                else:
                    conn.execute(
                        "INSERT INTO memfs.reindex_queue (document_id) SELECT id FROM "
                        f"memory_documents WHERE id = %(id)s AND {_RULES_DIFFER} {REQUEUE}",
                        self._params(id=doc_id, **_move_params(old_path, new_path)),
                    )
                self._keep_directories(conn, keep_dirs)
        except psycopg.Error as exc:
            if exc.sqlstate != _CHANGED:
                raise
            raise WriteRefused(
                errno.EEXIST,
                "memfs's rename",
                f"another writer's document is at {new_path!r} (this mount did not show it)",
            ) from None
        row = moved.fetchone()  # answered at the commit's Sync: one round trip in all
        known = self.known.row(doc_id)
        self.known.forget(doc_id)
        if row is None:
            return None
        versions = Moved(row[1], row[0])
        configs = folder_config_paths(new_path)
        if (
            known is not None
            and known.updated_at == versions.before  # nobody else wrote it since
            and folder_config_paths(known.path) == configs
        ):
            row_now = dataclasses.replace(known, path=new_path, updated_at=versions.after)
            self.known.remember(doc_id, row_now, configs)
        return versions

    def _queue_reindex(self, conn: Conn, doc_ids: Sequence[UUID]) -> None:
        conn.execute(
            "INSERT INTO memfs.reindex_queue (document_id) "
            f"SELECT id FROM memory_documents WHERE id = ANY(%s) {REQUEUE}",
            (list(doc_ids),),
        )

    def replace_document(self, replacement: Replacement, how: SaveOptions) -> CommitResult | None:
        """A document renamed over another: IronClaw's write of the path (the row
        ``target_id``), then IronClaw's delete of the source, with memfs's history rules
        between (``LegacyRenameOver``), in one transaction.  ``content`` None means the
        source's stored content.  None if the source row is gone.  ``how.expected``
        is the target version the caller last saw (a newer one is kept, as ``commit``).

        One round trip when the content is given, ``source_at`` (the source's version it
        came from) still holds and the target is known as ``commit_document``'s fast save
        needs; otherwise two or three.
        """
        source_id, target_id, path = replacement.source_id, replacement.target_id, replacement.path
        content, attrs, source_at = replacement.content, replacement.attrs, replacement.source_at
        keep_dirs = replacement.keep_dirs
        fits_one = source_at is not None and not how.index_now and self.fast_saves
        if content is not None and source_at is not None and fits_one:
            self.known.forget(source_id)
            fast = self._commit_in_one_round_trip(
                Write(target_id, path, content), attrs, how, (source_id, source_at, keep_dirs)
            )
            if fast is not None:
                return fast
        with self._transaction() as conn:
            self._tag(conn)
            if content is None:
                row = conn.execute(
                    f"SELECT content FROM memory_documents WHERE id = %(id)s AND {SCOPE} "
                    "FOR UPDATE",
                    self._params(id=source_id),
                ).fetchone()
                if row is None:
                    return None
                content = str(row[0])
            text = content
            chunks = chunk_document(text, self.chunk_config) if how.index_now else None
            pending = self._rename_over(
                conn, Source(source_id, source_at), target_id, text,
                lambda: self._commit(conn, Write(target_id, path, text), attrs, chunks, how),
            )  # fmt: skip
            self._keep_directories(conn, keep_dirs)
        result = pending.result()
        self._learn(result, path, content_hash(pending.merged or content), pending)
        return result

    def _version_if_kept(self, conn: Conn, target_id: UUID, content: str) -> None:
        conn.execute(
            "INSERT INTO memory_document_versions (document_id, version, content, "
            "  content_hash, changed_by) "
            "SELECT d.id, COALESCE((SELECT max(v.version) FROM memory_document_versions v "
            f"  WHERE v.document_id = d.id), 0) + 1, d.content, {_SERVER_HASH}, %(user)s "
            "FROM memory_documents d WHERE d.id = %(id)s AND d.content = %(content)s "
            f"  AND d.content <> '' AND {_SERVER_HASH} IS DISTINCT FROM (SELECT l.content_hash "
            "  FROM memory_document_versions l WHERE l.document_id = d.id "
            "  ORDER BY l.version DESC LIMIT 1)",
            self._params(id=target_id, content=content),
        )

    def _keeps_versions(self) -> bool:
        return self.schema.has_versions

    def _keep_source(self, conn: Conn, source_id: UUID) -> None:
        conn.execute("SELECT memfs.keep_document(%s, 'mount')", (source_id,), prepare=True)

    def _version_if_changed(
        self, conn: Conn, source_id: UUID, source_at: datetime, target_id: UUID
    ) -> None:
        conn.execute(
            "INSERT INTO memory_document_versions (document_id, version, content, "
            "  content_hash, changed_by) "
            "SELECT %(target)s, COALESCE((SELECT max(v.version) FROM "
            "  memory_document_versions v WHERE v.document_id = %(target)s), 0) + 1, "
            f"  d.content, {_SERVER_HASH}, %(user)s "
            "FROM memory_documents d WHERE d.id = %(source)s "
            "  AND d.updated_at IS DISTINCT FROM %(at)s",
            self._params(target=target_id, source=source_id, at=source_at),
        )

    def _delete_source(self, conn: Conn, source_id: UUID) -> None:
        self._delete_row(conn, source_id, keep=False)

    def _carry_versions(self, conn: Conn, source_id: UUID, target_id: UUID) -> None:
        conn.execute(
            "UPDATE memory_document_versions v SET document_id = %(target)s, "
            "  version = v.version + (SELECT COALESCE(max(o.version), 0) "
            "    FROM memory_document_versions o WHERE o.document_id = %(target)s) "
            "WHERE v.document_id = %(source)s AND %(source)s <> %(target)s",
            {"source": source_id, "target": target_id},
            prepare=True,
        )

    def _move_directory(
        self,
        conn: Conn,
        old_path: str,
        new_path: str,
        replaced_dir: str | None,
    ) -> tuple[Cursor, Cursor]:
        """``rename_directory``'s statements, made only if nothing the mount does not show
        lies at or below ``new_path`` (the mount showed it free, or ``replaced_dir`` empty):
        the first cursor answers whether it was free, the second (id, new updated_at, old
        updated_at) of each moved document.

        The target folder's lock (exclusive; every creation below it holds it shared, see
        ``_lock_path``) makes two mounts moving folders onto one new name take turns: the
        second finds the first's documents there and moves nothing."""
        old_prefix = escape_like(old_path + "/") + "%"
        new_prefix = escape_like(new_path + "/") + "%"
        cut = len(old_path) + 1
        params = self._params(
            prefix=old_prefix, new=new_path, new_prefix=new_prefix, cut=cut, old=old_path,
            replaced=replaced_dir, **_move_params(old_path, new_path),
        )  # fmt: skip
        conn.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (self._dir_key(new_path),)
        )
        free = conn.execute(
            "SELECT set_config('memfs.move_free', (NOT EXISTS (SELECT 1 FROM memory_documents "
            f"  WHERE {SCOPE} AND (path = %(new)s OR path LIKE %(new_prefix)s ESCAPE '\\')) "
            "AND NOT EXISTS (SELECT 1 FROM memfs.directories "
            f"  WHERE {SCOPE} AND (path = %(new)s AND path IS DISTINCT FROM %(replaced)s "
            "    OR path LIKE %(new_prefix)s ESCAPE '\\')))::text, true)",
            params,
        )
        go = "current_setting('memfs.move_free') = 'true'"
        if replaced_dir is not None:
            conn.execute(
                f"DELETE FROM memfs.directories WHERE {SCOPE} AND path = %(replaced)s AND {go}",
                params,
            )
        rows = conn.execute(
            "WITH moved AS ("
            "  SELECT id, updated_at AS old_at, path AS old_path FROM memory_documents "
            f"  WHERE {SCOPE} AND path LIKE %(prefix)s ESCAPE '\\' AND {go} FOR UPDATE"
            "), upd AS ("
            "  UPDATE memory_documents d SET path = %(new)s || substr(d.path, %(cut)s) "
            "  FROM moved WHERE d.id = moved.id "
            "  RETURNING d.id, d.updated_at, moved.old_at, moved.old_path, d.path AS new_path"
            "), noted AS ("
            # Each document's move, for .at/: one folder-wide row would also move, in the
            # past, documents made in the new folder afterwards.
            "  INSERT INTO memfs.path_history (workspace, old_path, new_path) "
            "  SELECT memfs.legacy_workspace(%(user)s, %(agent)s), old_path, new_path FROM upd"
            "), att AS ("
            # Keep each moved document's mtime (a rename must not look like an edit).
            "  INSERT INTO memfs.file_attrs (document_id, mode, mtime_ns, set_against) "
            "  SELECT upd.id, a.mode, "
            "    COALESCE(a.mtime_ns, (extract(epoch FROM upd.old_at) * 1000000000)::bigint), "
            "    upd.updated_at "
            "  FROM upd LEFT JOIN memfs.file_attrs a "
            "    ON a.document_id = upd.id AND a.set_against = upd.old_at "
            "  ON CONFLICT (document_id) DO UPDATE SET mode = EXCLUDED.mode, "
            "    mtime_ns = EXCLUDED.mtime_ns, set_against = EXCLUDED.set_against"
            "), queued AS ("
            # Re-apply the indexing rules of the new location where they may differ (a
            # skip_indexing .config above one place and not the other): chunks do not
            # hold the path, so a move under the same rules keeps them as they are.
            "  INSERT INTO memfs.reindex_queue (document_id) SELECT id FROM upd "
            f"  WHERE {_RULES_DIFFER} {REQUEUE}"
            ") SELECT id, updated_at, old_at FROM upd",
            params,
        )
        conn.execute(
            "UPDATE memfs.directories SET path = %(new)s || substr(path, %(cut)s) "
            f"WHERE {SCOPE} AND (path = %(old)s OR path LIKE %(prefix)s ESCAPE '\\') AND {go}",
            params,
        )
        return free, rows

    def _dir_key(self, folder: str) -> str:
        """The advisory lock key of a folder (see ``_move_directory``)."""
        return f"memfs-dir\n{self.scope.user_id}\n{self.scope.agent_id or ''}\n{folder}"
