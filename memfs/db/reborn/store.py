"""RebornStore: a workspace of IronClaw's Reborn memory behind ``DocumentStore``.

Documents are ``memory_document`` rows of ``root_filesystem_entries`` under the scope's
prefix (``layout``), keyed by path; the model keys documents by id, so the store gives
each path an id (a UUID derived from the path when first seen) and keeps it across renames
made here.  The version token the model compares is the row's ``updated_at`` to the
millisecond plus ``version % 1000`` microseconds, on both engines (``postgres.token``,
``memfs.db.libsql.row_times``): IronClaw's compare-and-swap key is ``version``, and a
writer that leaves ``updated_at`` as it was still changes the token; the compare-and-swap
the database sees is on ``version``, as IronClaw's own updates are
(docs/ironclaw/reborn.md §4.1, requirement 7).

Every write follows IronClaw v1.3's memory write (docs/ironclaw/reborn.md §4.2): the document
row updated with ``version = version + 1`` (or inserted at version 1 if nothing lies at or
below its path), the replaced content kept as a ``.versions/<n>`` sidecar unless
``skip_versioning``, the ``.chunks/`` rebuilt as its indexer does unless ``skip_indexing``.
Unlike IronClaw, each operation is one transaction, and delete and rename (which IronClaw
does not offer) move or remove the document with its sidecars together (requirement 12).
Directories are never ``is_dir`` rows under ``/memory`` (requirement 4): kept ones live in
memfs's own table, as do client attributes.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from memfs.db.deferred import BatchOutcome, ChangeBatch, DeferredChanges, DeferringStore, PartsLog
from memfs.db.interface import (
    Content,
    Delete,
    DocRow,
    DocumentHistory,
    ExportRow,
    ImportOutcome,
    Moved,
    MoveDir,
    PastVersion,
    StoredDocument,
    attrs_of,
)
from memfs.db.limits import reborn_max_path
from memfs.db.reborn import layout
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.postgres.rows import PostgresRows
from memfs.db.reborn.rows import Answer, Family, KeepAs, RebornRows, Record
from memfs.db.records import (
    PLAIN_SAVE,
    CommitResult,
    FileAttrs,
    Overwritten,
    Rename,
    Replacement,
    SaveOptions,
    Write,
)
from memfs.errors import WriteRefused
from memfs.ironclaw.chunker import DEFAULT_CONFIG, ChunkConfig, chunk_document
from memfs.ironclaw.reborn_save import StoredEntry, Versions, plan_save
from memfs.ironclaw.write_rules import (
    DocumentMetadata,
    check_schema,
    effective_metadata,
    reborn_content_problem,
)
from memfs.paths import conflict_copy

log = logging.getLogger(__name__)

#: Namespace of the ids given to paths (stable across mounts until a rename here).
PATH_IDS = uuid.UUID("0d7b2f5e-6c1a-4b8e-9f3d-52a1c4e7b9a0")
_PATH_IDS_BYTES = PATH_IDS.bytes


#: Rows given their ids under one taking of the store's lock (``_listed_ids``).
_ID_SLICE = 2048


def path_id(full: str) -> UUID:
    """``uuid5(PATH_IDS, full)``, computed as it is without its per-call overhead (a
    mount's load names 100,000 documents: 0.2 s against 0.1 s)."""
    digest = hashlib.sha1(_PATH_IDS_BYTES + full.encode("utf-8")).digest()
    return UUID(bytes=digest[:16], version=5)


#: Documents whose contents one round trip of ``export_rows`` reads.
EXPORT_BATCH = 200


def _ms(at: datetime) -> datetime:
    """A time to the millisecond (what both layouts keep)."""
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


@dataclass(frozen=True)
class _Row:
    contents: bytes
    version: int
    updated_at: datetime


class RebornStore(DeferringStore):
    """The documents of one Reborn workspace (``RebornScope``)."""

    #: IronClaw's chunking: its indexer's fixed constants.
    chunk_config: ChunkConfig = DEFAULT_CONFIG

    def __init__(
        self,
        pool: Any,
        scope: RebornScope,
        *,
        origin: str | None = None,
        rows: RebornRows | None = None,
    ) -> None:
        #: The connections: a psycopg pool, or the libSQL file (``rows`` says which).
        self.pool = pool
        #: How the database reads and writes the rows (``memfs.db.reborn.rows``).
        self.rows: RebornRows = rows if rows is not None else PostgresRows()
        self._db_error = self.rows.error
        self.scope = scope
        #: Where a row's path below the scope starts (``_relative``).
        self._cut = len(scope.prefix) + 1
        self.origin = origin
        self.deferred = DeferredChanges()
        self.max_path_bytes = reborn_max_path(scope.prefix)
        self._lock = threading.Lock()
        #: Per thread: the indexing checks of documents moved by the transaction under
        #: way (``_index_check``), read once it is committed (``_after_transaction``).
        self._moved_checks = threading.local()
        self._ids: dict[str, UUID] = {}
        self._paths: dict[UUID, str] = {}
        #: The old paths of documents a transaction under way moves, until it ends: a
        #: read whose snapshot predates its commit finds the row at its old path, and
        #: must name it by the id it keeps (a fresh id made the mount drop the file).
        self._leaving: dict[str, UUID] = {}
        #: One map per listing under way (``_naming_during``): the old paths of the
        #: documents moves made while it read, which its rows may still show.
        self._listings: list[dict[str, UUID]] = []
        #: Whether moves a stopped mount left half made were looked for (``_finish_moves``).
        self._moves_checked = False

    # -- identity ----------------------------------------------------------------------

    def id_of(self, relative: str) -> UUID:
        """The id the model knows ``relative``'s document by."""
        with self._lock:
            return self._id_locked(relative, None)

    def _id_locked(self, relative: str, full: str | None) -> UUID:
        """``id_of`` with the lock held (``full``: the row's path, if at hand)."""
        found = self._ids.get(relative) or self._leaving.get(relative)
        if found is None:
            found = path_id(full if full is not None else self.scope.row(relative))
            if found in self._paths:
                # The id this path was first given went with a document moved away
                # from it: a new document here is another one, with an id of its own
                # (sharing it made a removal of one delete the other).
                found = uuid.uuid4()
            self._ids[relative] = found
            self._paths[found] = relative
        return found

    def path_of(self, doc_id: UUID) -> str | None:
        with self._lock:
            return self._paths.get(doc_id)

    def _moved_to(self, doc_id: UUID, relative: str) -> None:
        with self._lock:
            old = self._paths.get(doc_id)
            if old is not None and self._ids.get(old) == doc_id:
                del self._ids[old]
            self._ids[relative] = doc_id
            self._paths[doc_id] = relative

    def _moved_in_transaction(self, doc_id: UUID, relative: str) -> None:
        """``_moved_to`` for a move the transaction under way makes: undone if it rolls
        back (``_after_transaction``), so the ids keep naming the rows where they are."""
        with self._lock:
            before = self._paths.get(doc_id)
            undo = (doc_id, before, relative, self._ids.get(relative),
                    None if before is None else self._ids.get(before))  # fmt: skip
            if before is not None:
                self._leaving[before] = doc_id
        self._moved_to(doc_id, relative)
        self._pending_undo().append(undo)

    def _pending_undo(self) -> list[tuple[UUID, str | None, str, UUID | None, UUID | None]]:
        undo: list[tuple[UUID, str | None, str, UUID | None, UUID | None]] | None = getattr(
            self._moved_checks, "undo", None
        )
        if undo is None:
            undo = self._moved_checks.undo = []
        return undo

    def _moves_ended(self) -> None:
        """The transaction that made the pending moves ended: their old paths name
        nothing any more."""
        undo = self._pending_undo()
        with self._lock:
            for doc_id, before, _, _, _ in undo:
                if before is not None and self._leaving.get(before) == doc_id:
                    del self._leaving[before]
                    for leaving in self._listings:
                        leaving.setdefault(before, doc_id)
        undo.clear()

    @contextmanager
    def _naming_during(self) -> Iterator[dict[str, UUID]]:
        """For a listing's read: the old paths of the documents moved while it reads
        (its snapshot may predate their moves' commits), to name its rows by."""
        leaving: dict[str, UUID] = {}
        with self._lock:
            self._listings.append(leaving)
        try:
            yield leaving
        finally:
            with self._lock:
                self._listings.remove(leaving)

    def _undo_moves(self) -> None:
        """The id changes of a rolled-back transaction's moves, undone newest first."""
        undo = self._pending_undo()
        with self._lock:
            for doc_id, before, relative, at_relative, at_before in reversed(undo):
                for path, holder in ((relative, at_relative), (before, at_before)):
                    if path is None:
                        continue
                    if holder is None:
                        self._ids.pop(path, None)
                    else:
                        self._ids[path] = holder
                if before is None:
                    self._paths.pop(doc_id, None)
                else:
                    self._paths[doc_id] = before

    def _forget(self, doc_id: UUID) -> None:
        with self._lock:
            old = self._paths.pop(doc_id, None)
            if old is not None and self._ids.get(old) == doc_id:
                del self._ids[old]

    def _relative(self, full: str) -> str:
        return full[self._cut :]

    # -- transactions and deferred changes ---------------------------------------------

    def _open_transaction(self) -> AbstractContextManager[Any]:
        return self.rows.open_transaction(self.pool)

    def _is_refusal(self, exc: Exception) -> bool:
        return self.rows.is_refusal(exc)

    def _refused(self, exc: Exception) -> BaseException | None:
        guard = self.rows.guard_failure(exc)
        if guard is None:
            return None
        return WriteRefused(errno.EISDIR, "IronClaw's document layout", guard)

    def _send_deletes(self, conn: Any, deletes: Sequence[Delete]) -> Callable[[], set[UUID]]:
        """No origin tag is set: nothing of memfs's watches this table (writers are
        polled)."""
        removed = [(c.doc_id, self._delete(conn, c.doc_id, c.seen)) for c in deletes]
        return lambda: {doc_id for doc_id, answer in removed if answer() is False}

    def _send_move(
        self, conn: Any, old: str, new: str, replaced: str | None
    ) -> Callable[[], tuple[bool, dict[UUID, Moved]]]:
        moved = self._move_entries(conn, old, new, replaced)
        return lambda: (moved is not None, moved or {})

    def path_problem(self, path: str) -> str | None:
        """IronClaw's rules for a document path (docs/ironclaw/reborn.md §6): no segment ending in
        ``.meta``, ``.chunks`` or ``.versions`` (its sidecars), among others."""
        return layout.path_problem(path)

    def content_problem(self, path: str, text: str) -> WriteRefused | None:
        return reborn_content_problem(path, text)

    # -- reading -------------------------------------------------------------------------

    def load_documents(self) -> list[DocRow]:
        """IronClaw's document list of the scope (reborn.md §3.3), with memfs's attributes."""
        self._finish_moves()
        with self._naming_during() as leaving:
            with self.deferred.deletions_during() as hidden, self._reading() as conn:
                rows = self.rows.documents(conn, self.scope.prefix)
            listed = self._listed_ids([row[0] for row in rows], leaving)
        found = []
        for row, doc_id in zip(rows, listed, strict=True):
            full, size, created, updated, mode, mtime_ns = row
            if doc_id is not None and doc_id not in hidden:
                attrs = attrs_of(mode, mtime_ns)
                found.append(DocRow(doc_id, self._relative(full), size, created, updated, attrs))
        return found

    def document_versions(self) -> list[tuple[UUID, str, datetime]] | None:
        """(id, path, updated_at) of every document ``load_documents`` lists, read without
        sizes, creation times or attributes: a poll's first look (at 100,000 documents
        about half the whole list's cost)."""
        with self._naming_during() as leaving:
            with self.deferred.deletions_during() as hidden, self._reading() as conn:
                rows = self.rows.versions(conn, self.scope.prefix)
            listed = self._listed_ids([full for full, _ in rows], leaving)
        return [
            (doc_id, self._relative(full), updated)
            for (full, updated), doc_id in zip(rows, listed, strict=True)
            if doc_id is not None and doc_id not in hidden
        ]

    def _listed_ids(self, fulls: Sequence[str], leaving: dict[str, UUID]) -> list[UUID | None]:
        """The id of each row IronClaw lists as a document (None for the others: sidecars,
        paths it skips); a row at a path a document left while the rows were read is that
        document's (``leaving``).  The lock is taken per slice of rows, not for the whole
        list: other threads' saves need ids while a list of 100,000 is read."""
        ids: list[UUID | None] = []
        for start in range(0, len(fulls), _ID_SLICE):
            with self._lock:
                for full in fulls[start : start + _ID_SLICE]:
                    relative = self._relative(full)
                    if not layout.is_listed(relative):
                        ids.append(None)
                    elif relative in leaving and relative not in self._ids:
                        ids.append(leaving[relative])
                    else:
                        ids.append(self._id_locked(relative, full))
        return ids

    def counts(self) -> tuple[int, int]:
        """(documents IronClaw lists, chunk rows) of the scope; reads IronClaw's table
        only (``memfs status`` creates nothing, memfs's own tables included)."""
        with self._reading() as conn:
            rows = self.rows.kinds(conn, self.scope.prefix)
        documents = sum(
            1 for full, kind in rows
            if kind == layout.DOCUMENT_KIND and layout.is_listed(self._relative(full))
        )  # fmt: skip
        return documents, sum(1 for _, kind in rows if kind == layout.CHUNK_KIND)

    def document_rows(self, doc_ids: Sequence[UUID]) -> dict[UUID, DocRow]:
        wanted = {p: d for d in doc_ids if (p := self.path_of(d)) is not None}
        if not wanted:
            return {}
        with self.deferred.deletions_during() as hidden, self._reading() as conn:
            rows = self.rows.documents_at(conn, [self.scope.row(p) for p in wanted])
        found = {}
        for full, size, created, updated, mode, mtime_ns in rows:
            doc_id = wanted[self._relative(full)]
            if doc_id not in hidden:
                found[doc_id] = DocRow(
                    doc_id, self._relative(full), size, created, updated, attrs_of(mode, mtime_ns)
                )
        return found

    def load_directories(self) -> list[str]:
        with self._reading() as conn:
            rows = self.rows.directories(conn, self.scope.prefix)
        return sorted(self.deferred.directories({self._relative(r) for r in rows}))

    def read_content(self, doc_id: UUID) -> Content | None:
        return self.read_contents([doc_id]).get(doc_id)

    def find_document(self, path: str) -> StoredDocument | None:
        doc_id = self.id_of(path)
        found = self.read_content(doc_id)
        if found is None:
            return None
        return StoredDocument(doc_id, found.data.decode("utf-8", "surrogateescape"),
                              found.version)  # fmt: skip

    def export_rows(self) -> list[ExportRow]:
        """Every document, a batch of ``EXPORT_BATCH`` contents per round trip."""
        docs = self.load_documents()
        rows: list[ExportRow] = []
        for start in range(0, len(docs), EXPORT_BATCH):
            batch = docs[start : start + EXPORT_BATCH]
            contents = self.read_contents([d.id for d in batch])
            for doc in batch:
                found = contents.get(doc.id)
                if found is not None:
                    text = found.data.decode("utf-8", "surrogateescape")
                    rows.append(ExportRow(doc.path, text, found.version, doc.attrs.mtime_ns,
                                          doc.id))  # fmt: skip
        return rows

    def reindex_targets(self, paths: Sequence[str] | None) -> list[tuple[UUID, str]]:
        wanted = set(paths) if paths is not None else None
        return [(row.id, row.path) for row in self.load_documents()
                if wanted is None or row.path in wanted]  # fmt: skip

    def reindex(self, doc_id: UUID, path: str) -> int:
        return self._rebuild_entry_chunks(path)

    def read_contents(
        self, doc_ids: Sequence[UUID], near: str | None = None
    ) -> dict[UUID, Content]:
        wanted = {self.scope.row(p): d for d in doc_ids if (p := self.path_of(d)) is not None}
        if not wanted:
            return {}
        with self._reading() as conn:
            rows = self.rows.contents(conn, list(wanted))
        return {wanted[full]: Content(data, updated) for full, data, updated in rows}

    def content_by_hash(self, doc_id: UUID, digest: str) -> bytes | None:
        relative = self.path_of(doc_id)
        if relative is None:
            return None
        with self._reading() as conn:
            return self._content_by_hash(conn, relative, digest)

    def _content_by_hash(self, conn: Any, relative: str, digest: str) -> bytes | None:
        """The entry's or a version's bytes by IronClaw's hash, on ``conn`` (a save's
        transaction: a merge's base known by hash alone)."""
        full = self.scope.row(relative)
        rows = self.rows.by_hash(conn, full, full + ".versions", digest)
        for data, kind in rows:  # a version's body names the hash: its content must match
            if kind == layout.DOCUMENT_KIND:
                return data
            try:
                found = json.loads(data).get("content")
            except (ValueError, AttributeError):
                continue
            if isinstance(found, str) and layout.content_hash(found.encode("utf-8")) == digest:
                return found.encode("utf-8")
        return None

    def fingerprint(self) -> tuple[int, str]:
        """Changes whenever a row of the scope is inserted, updated or deleted (polling:
        IronClaw notifies nothing, reborn.md §4.4)."""
        with self._reading() as conn:
            return self.rows.fingerprint(conn, self.scope.prefix)

    def _reading(self) -> AbstractContextManager[Any]:
        return self.rows.read_connection(self.pool)

    # -- writing -------------------------------------------------------------------------

    def commit_document(
        self, write: Write, attrs: FileAttrs, how: SaveOptions = PLAIN_SAVE
    ) -> CommitResult:
        """IronClaw's overwrite of ``path`` (reborn.md §4.2); a row changed since
        ``how.expected`` keeps the other writer's content as a version before this content
        replaces it, or with ``how.merge`` is merged with it under the row lock
        (``CommitResult.merged``)."""
        path = write.path
        try:
            with self._transaction() as conn:
                finish = self._write_entry(conn, write, attrs, how)
        except self.rows.error as exc:
            if not self.rows.is_unique_violation(exc):
                raise
            # Another writer created the document between this save's read (no row) and
            # its insert: made again, the save finds their row and keeps it as a version
            # (the caller may merge it back: ``CommitResult.replaced_hash``).
            log.info("%r was created by another writer while this save was on its way; "
                     "saving over it, their content kept", path)  # fmt: skip
            with self._transaction() as conn:
                finish = self._write_entry(conn, write, attrs, how)
        result = finish()
        self._moved_to(result.doc_id, path)
        return result

    def _send_save(
        self, conn: Any, doc_id: UUID | None, path: str, content: str, attrs: FileAttrs
    ) -> Callable[[], CommitResult]:
        return self._write_entry(conn, Write(doc_id, path, content), attrs, PLAIN_SAVE)

    def _saved(self, result: CommitResult, path: str, content: str) -> None:
        self._moved_to(result.doc_id, path)

    def _write_entry(
        self,
        conn: Any,
        write: Write,
        attrs: FileAttrs,
        how: SaveOptions,
        *,
        version_unchanged: bool = False,
    ) -> Callable[[], CommitResult]:
        """Send one document's save (its reads are answered here, its writes are not):
        the answer is read, once the transaction is committed, by calling the result.
        ``version_unchanged``: the content it replaces is kept as a version even if it is
        the same (a rename over the document: its history up to then stays its own
        before the source's versions are carried after it)."""
        relative, data, expected = write.path, write.content.encode("utf-8"), how.expected
        self._refuse_path(relative)
        full = self.scope.row(relative)
        # The reads go together (one round trip, with BEGIN): the row, locked; what its
        # metadata is made of; whether a new document may go there.
        lock, place = self.rows.lock_row(conn, full), self._place_query(conn, relative)
        meta = self._metadata_from(self._metadata_query(conn, relative), relative)
        current = self._locked_row(lock, full)
        text = write.content
        self._refuse_content(relative, text, meta)
        # The writes go together with the COMMIT; their answers are read after it.
        merged: str | None = None
        stored = None
        if current is not None:
            stored = StoredEntry(current.contents, current.updated_at, how.stale_base)
            merged = self._merged(conn, relative, current, data, how, meta)
        plan = plan_save(
            stored, data, expected,
            versions=Versions.kept(meta.versioned, even_unchanged=version_unchanged),
            merged=None if merged is None else merged.encode("utf-8"),
        )  # fmt: skip
        if merged is not None:
            text, data = merged, plan.data
        conflict = None
        version: Answer | None = None
        if current is None:
            self._place_from(place, relative)
            written = self._insert_query(conn, relative, data)
            unwritable = layout.agent_cannot_write(relative)
            if unwritable is not None:
                log.warning("%r is stored, but IronClaw's agent %s", relative, unwritable)
        else:
            if plan.conflict_copy:
                conflict = self._keep_as_copy(conn, relative, current.contents)
            if plan.fills_empty:  # IronClaw keeps no version of an empty one
                self.rows.note_empty_spell(conn, self.scope.prefix, relative, current.updated_at)
            written = self._update_query(conn, full, data, current.version)
            if plan.version:
                version = self._version_query(conn, relative, current.contents)
        chunks = self._rebuild_chunks(conn, relative, text, meta.indexed)
        self._write_entry_attrs(conn, full, attrs, None)

        def finish() -> CommitResult:
            updated_at = self._written_at(written, full)
            kept = conflict
            if version is not None and plan.other_changed:
                kept = f"version {int(self._one(version)[0])}"
            return CommitResult(
                self.id_of(relative),
                updated_at,
                plan.created,
                True,
                chunks,
                plan.version,
                kept,
                plan.replaced_hash,
                merged,
            )

        return finish

    def merge_metadata(self, doc_id: UUID, path: str, overlay: Mapping[str, Any]) -> bool:
        """A write's metadata as IronClaw v1.3 keeps it: the overlay's top-level keys over
        the document's own ``.meta`` sidecar, put (compact JSON, keys sorted) beside the
        document, whose row is not touched.  False if the document is gone."""
        full, meta_full = self.scope.row(path), self.scope.row(layout.meta_path(path))
        with self._transaction() as conn:
            doc, meta = self.rows.lock_row(conn, full), self.rows.lock_row(conn, meta_full)
            found, sidecar = doc.fetchone(), meta.fetchone()
            if found is None or found[3] or found[4] != layout.DOCUMENT_KIND:
                return False
            own = self._parse_meta(bytes(sidecar[0]) if sidecar else None, path)
            merged = {**(own if isinstance(own, dict) else {}), **overlay}
            record = Record(meta_full, layout.dumps(merged).encode(), layout.META_TYPE, None, "{}")
            if sidecar is None:
                self.rows.insert(conn, record)
            else:
                self.rows.update(conn, record, int(sidecar[1]), meta_full)
        return True

    def _merged(  # noqa: PLR0913 - the transaction, the save, the entry found and its metadata
        self, conn: Any, relative: str, current: _Row, data: bytes, how: SaveOptions,
        meta: DocumentMetadata,
    ) -> str | None:  # fmt: skip
        """A save (``data``) merged with another writer's content (``how.merge``), under
        the row lock, where the row changed since ``how.expected`` (or the save's base is
        older than any version, ``how.stale_base``); None if it did not, there is no
        merge, or IronClaw's rules refuse the merged text (logged): the save's own content
        is written, the other kept as a version."""
        merge, expected = how.merge, how.expected
        unchanged = not how.stale_base and expected in (None, current.updated_at)
        if merge is None or unchanged or current.contents == data:
            return None
        text = merge(current.contents, lambda h: self._content_by_hash(conn, relative, h))
        if text is None:
            return None
        try:
            self._refuse_content(relative, text, meta)
        except WriteRefused as exc:
            log.warning("%r: the merge with another writer's change is refused (%s); this "
                        "save alone is written, the other change is kept as a version",
                        relative, exc.reason)  # fmt: skip
            return None
        return text

    @staticmethod
    def _refuse_path(relative: str) -> None:
        """EINVAL for a path IronClaw's layout cannot store."""
        problem = layout.path_problem(relative)
        if problem is not None:
            raise WriteRefused(
                errno.EINVAL,
                "IronClaw's path rules",
                f"{relative!r} {problem}: IronClaw cannot store it",
            )

    def _refuse_content(self, relative: str, text: str, meta: DocumentMetadata) -> None:
        """IronClaw v1.1+'s content rules (prompt files) and the metadata's JSON schema."""
        refused = self.content_problem(relative, text)
        if refused is not None:
            raise refused
        if meta.schema is not None:
            check_schema(relative, text, meta.schema)

    @staticmethod
    def _one(cursor: Answer) -> tuple[Any, ...]:
        row: tuple[Any, ...] | None = cursor.fetchone()
        assert row is not None
        return row

    def _rebuild_entry_chunks(self, relative: str) -> int:
        """The document's chunks rebuilt from its content, as IronClaw's indexer does after
        a write (``memfs reindex``); the number written (0: gone, or not indexed)."""
        # Not ``_transaction``: this runs after a transaction that may carry deferred
        # changes (``_after_transaction``), whose batch is released only after it.
        with self.rows.plain_transaction(self.pool) as conn:
            data = self.rows.locked_contents(conn, self.scope.row(relative))
            if data is None:
                return 0
            indexed = self._metadata(conn, relative).indexed
            return self._rebuild_chunks(conn, relative, data.decode("utf-8"), indexed)

    # -- copying a whole history in (memfs migrate) ----------------------------------------

    def import_history(self, doc: DocumentHistory, *, dry_run: bool = False) -> ImportOutcome:
        """``doc`` with every version, in one transaction: the document row at version
        (last version + 1) with the source's times, a ``.meta`` for non-empty metadata, each
        version as ``R.versions/<n>`` with IronClaw's body (its own ``changed_by`` where the
        source kept one), and chunks built as IronClaw's indexer would.  A path already
        holding this content and as many versions is ``present`` (a re-run); any other
        row there is left alone (``differs``)."""
        problem = layout.path_problem(doc.path)
        if problem is not None:
            return ImportOutcome("refused", reason=f"IronClaw's path rules: it {problem}")
        full = self.scope.row(doc.path)
        data = doc.content.encode("utf-8")
        with self.rows.plain_transaction(self.pool) as conn:  # no deferred changes ride
            current = self.rows.row_kind(conn, full)
            if current is not None:
                if current[1] or current[2] != layout.DOCUMENT_KIND:
                    return ImportOutcome("refused", reason="a row that is not a document is there")
                versions = self.rows.count_kind(conn, full + ".versions", layout.VERSION_KIND)
                if current[0] == data and versions == len(doc.versions):
                    return ImportOutcome("present")
                return ImportOutcome("differs", reason="the target holds another content there")
            try:
                self._check_place(conn, doc.path)
            except WriteRefused as refused:
                return ImportOutcome("refused", reason=refused.reason)
            meta = bool(doc.metadata)
            indexed = self._metadata(conn, doc.path, own=doc.metadata).indexed
            if dry_run:
                chunks = len(chunk_document(doc.content, self.chunk_config)) if indexed else 0
                return ImportOutcome("copied", len(doc.versions), chunks, meta)
            self._insert_history(conn, doc, data)
            chunks = self._rebuild_chunks(conn, doc.path, doc.content, indexed)
        return ImportOutcome("copied", len(doc.versions), chunks, meta)

    def count(self) -> int:
        """Documents IronClaw lists in the scope (``memfs migrate``'s total)."""
        return self.counts()[0]

    def paths(self) -> list[str]:
        """Every document's path in the scope (``memfs migrate``'s check of lengths)."""
        return [row.path for row in self.load_documents()]

    def histories(self, batch: int = EXPORT_BATCH) -> Iterator[DocumentHistory]:
        """Every document with its metadata and every version, by path, to copy into
        another store (``memfs migrate``).  Times are carried to the millisecond (the
        libSQL layout keeps no finer ones)."""
        docs = sorted(self.load_documents(), key=lambda d: d.path)
        for start in range(0, len(docs), batch):
            chunk = docs[start : start + batch]
            contents = self.read_contents([d.id for d in chunk])
            fulls = [self.scope.row(d.path) for d in chunk]
            with self._reading() as conn:
                metas = dict(self.rows.rows_at(
                    conn, [self.scope.row(layout.meta_path(d.path)) for d in chunk]
                ).fetchall())  # fmt: skip
                kept = self.rows.version_rows(conn, [f + ".versions" for f in fulls])
            versions: dict[str, list[PastVersion]] = {}
            for path, body, created in kept:
                doc_full, _, number = path.rpartition(".versions/")
                try:
                    parsed = json.loads(body)
                    past = PastVersion(int(number), str(parsed["content"]),
                                       parsed.get("changed_by"), _ms(created))  # fmt: skip
                except (ValueError, KeyError, TypeError):
                    log.warning("%r: a version row that is not IronClaw's JSON is not "
                                "copied", self._relative(path))  # fmt: skip
                    continue
                versions.setdefault(doc_full, []).append(past)
            for doc, full in zip(chunk, fulls, strict=True):
                found = contents.get(doc.id)
                if found is None:
                    continue
                try:
                    meta = self._parse_meta(metas.get(layout.meta_path(full)), doc.path)
                except WriteRefused:
                    meta = {}  # logged: a broken sidecar is not copied
                yield DocumentHistory(
                    doc.path, found.data.decode("utf-8", "surrogateescape"),
                    meta if isinstance(meta, dict) else {}, _ms(doc.created_at),
                    _ms(doc.updated_at),
                    tuple(sorted(versions.get(full, ()), key=lambda v: v.number)),
                )  # fmt: skip

    def _insert_history(self, conn: Any, doc: DocumentHistory, data: bytes) -> None:
        keys = self.scope.keys()
        last = max((v.number for v in doc.versions), default=0)
        rows = [
            Record(self.scope.row(doc.path), data, layout.RECORD_TYPE, layout.DOCUMENT_KIND,
                   layout.dumps(keys), last + 1, doc.created_at,
                   max(doc.created_at, doc.updated_at))
        ]  # fmt: skip
        if doc.metadata:
            rows.append(
                Record(self.scope.row(layout.meta_path(doc.path)),
                       layout.dumps(doc.metadata).encode(), layout.META_TYPE, None, "{}", 1,
                       doc.updated_at, doc.updated_at)
            )  # fmt: skip
        for version in doc.versions:
            old = version.content.encode("utf-8")
            body = layout.version_body(self.scope, old, version.changed_by)
            indexed = {**keys, "doc_relative_path": doc.path, "version": version.number}
            rows.append(
                Record(self.scope.row(layout.version_path(doc.path, version.number)), body,
                       layout.RECORD_TYPE, layout.VERSION_KIND, layout.dumps(indexed), 1,
                       version.created_at, version.created_at)
            )  # fmt: skip
        self.rows.insert_many(conn, rows)

    def _lock_row(self, conn: Any, full: str) -> _Row | None:
        return self._locked_row(self.rows.lock_row(conn, full), full)

    def _locked_row(self, answer: Answer, full: str) -> _Row | None:
        row = answer.fetchone()
        if row is None:
            return None
        if row[3] or row[4] != layout.DOCUMENT_KIND:
            raise WriteRefused(
                errno.EISDIR,
                "IronClaw's document layout",
                f"{self._relative(full)!r} is held by a row that is not a memory document",
            )
        return _Row(bytes(row[0]), int(row[1]), row[2])

    def _document_record(self, relative: str, data: bytes) -> Record:
        """The document row IronClaw writes for ``relative`` holding ``data``."""
        return Record(self.scope.row(relative), data, layout.RECORD_TYPE,
                      layout.DOCUMENT_KIND, layout.dumps(self.scope.keys()))  # fmt: skip

    def _insert_document(self, conn: Any, relative: str, data: bytes) -> datetime:
        """Put "absent": a new row at version 1, only if nothing lies at or below its path
        and no ancestor is a document."""
        self._check_place(conn, relative)
        return self._written_at(self._insert_query(conn, relative, data), relative)

    def _insert_query(self, conn: Any, relative: str, data: bytes) -> Answer:
        return self.rows.insert(conn, self._document_record(relative, data))

    def _check_place(self, conn: Any, relative: str) -> None:
        """A new document may go at ``relative`` only if nothing lies below it and no
        ancestor is a document (IronClaw's put "absent")."""
        self._place_from(self._place_query(conn, relative), relative)

    def _place_query(self, conn: Any, relative: str) -> Answer:
        parts = relative.split("/")
        ancestors = [self.scope.row("/".join(parts[:i])) for i in range(1, len(parts))]
        return self.rows.blocker(conn, self.scope.row(relative), ancestors)

    def _place_from(self, answer: Answer, relative: str) -> None:
        blocked = answer.fetchone()
        if blocked is not None:
            raise WriteRefused(
                errno.EEXIST,
                "IronClaw's document layout",
                f"{relative!r} cannot be a document: {self._relative(blocked[0])!r} exists",
            )

    def _update_query(self, conn: Any, full: str, data: bytes, version: int) -> Answer:
        """Put "version v": the compare-and-swap IronClaw's updates are, refused when a row
        lies below the path (the row is locked, so only that can refuse it)."""
        return self.rows.update(conn, self._document_record(self._relative(full), data),
                                version, full)  # fmt: skip

    def _written_at(self, answer: Answer, full: str) -> datetime:
        row = answer.fetchone()
        if row is None or row[0] is None:
            raise WriteRefused(
                errno.EISDIR,
                "IronClaw's document layout",
                f"{self._relative(full)!r} has rows below it",
            )
        return row[0]  # type: ignore[no-any-return]

    def _version_query(self, conn: Any, relative: str, old: bytes) -> Answer:
        """``R.versions/<max+1>`` keeping ``old`` (no dedup against the latest, reborn.md §4.2),
        numbered by the database; answers the number."""
        indexed = {**self.scope.keys(), "doc_relative_path": relative}
        body = layout.version_body(self.scope, old)
        record = Record(self.scope.row(relative) + ".versions", body, layout.RECORD_TYPE,
                        layout.VERSION_KIND, layout.dumps(indexed))  # fmt: skip
        return self.rows.insert_version(conn, record.path, record)

    def _keep_as_copy(self, conn: Any, relative: str, theirs: bytes) -> str:
        """Another writer's content that versioning would not keep: a copy beside it."""
        copy = conflict_copy(relative, datetime.now(UTC))
        self._insert_document(conn, copy, theirs)
        return f"copy {copy}"

    def _rebuild_chunks(self, conn: Any, relative: str, text: str, indexed: bool) -> int:
        """IronClaw's indexer (reborn.md §5.1): every chunk row under ``R.chunks/`` replaced by
        fresh rows 0..n-1 (none under ``skip_indexing`` or for blank content)."""
        self.rows.delete_chunks(conn, self.scope.row(relative) + ".chunks")
        chunks = chunk_document(text, self.chunk_config) if indexed else []
        keys = self.scope.keys()
        self.rows.insert_many(conn, [
            Record(self.scope.row(layout.chunk_path(relative, i)), chunk.encode("utf-8"),
                   layout.RECORD_TYPE, layout.CHUNK_KIND,
                   layout.dumps({**keys, "chunk_index": i, "content": chunk,
                                 "doc_relative_path": relative}))
            for i, chunk in enumerate(chunks)
        ])  # fmt: skip
        return len(chunks)

    def _metadata(self, conn: Any, relative: str, own: Any = None) -> Any:
        """Effective metadata (reborn.md §3.4): the nearest ``.config``'s ``.meta`` with the
        document's own ``.meta`` (or ``own``, about to be written) on top."""
        return self._metadata_from(self._metadata_query(conn, relative), relative, own)

    def _metadata_query(self, conn: Any, relative: str) -> Answer:
        """The rows effective metadata is made of (sent, not yet read)."""
        configs = [c for c in layout.config_candidates(relative) if c != relative]
        wanted = [layout.meta_path(relative), *configs, *(layout.meta_path(c) for c in configs)]
        return self.rows.rows_at(conn, [self.scope.row(p) for p in wanted])

    def _metadata_from(self, cursor: Answer, relative: str, own: Any = None) -> Any:
        rows: dict[str, Any] = dict(cursor.fetchall())
        found = {self._relative(full): bytes(data) for full, data in rows.items()}
        return self._effective(found, relative, own)

    def effective_metadata(self, found: Mapping[str, bytes], relative: str) -> Any:
        """Effective metadata of ``relative`` from rows already read (relative path ->
        contents: its ``.meta`` and the ``.config`` documents above it with theirs)."""
        return self._effective(found, relative)

    def _effective(self, found: Mapping[str, bytes], relative: str, own: Any = None) -> Any:
        """Effective metadata of ``relative`` from the sidecar and ``.config`` rows found
        (relative path -> contents)."""
        configs = [c for c in layout.config_candidates(relative) if c != relative]
        # Only a .config with a non-empty .meta counts; one without goes by (reborn.md §3.4).
        folder = next((c for c in configs if c in found and found.get(layout.meta_path(c))),
                      None)  # fmt: skip
        folder_meta = self._parse_meta(
            found.get(layout.meta_path(folder)) if folder else None, folder
        )
        if own is None:
            own = self._parse_meta(found.get(layout.meta_path(relative)), relative)
        return effective_metadata(own, folder_meta)

    @staticmethod
    def _parse_meta(data: bytes | None, owner: str | None) -> Any:
        """A ``.meta`` sidecar as IronClaw reads it: only zero bytes mean none; anything
        else must be JSON (whitespace alone is not), or every write it governs fails."""
        if not data:
            return {}
        try:
            return json.loads(data)
        except ValueError:
            sidecar = layout.meta_path(owner or "")
            log.error("the metadata sidecar %r of %r is not JSON: IronClaw refuses every write "
                      "it governs until it is fixed", sidecar, owner)  # fmt: skip
            raise WriteRefused(
                errno.EINVAL,
                "IronClaw's metadata",
                f"the metadata sidecar {sidecar!r} of {owner!r} is not JSON: IronClaw refuses "
                "every write it governs until it is fixed",
            ) from None

    def _write_entry_attrs(
        self, conn: Any, full: str, attrs: FileAttrs, updated_at: datetime | None
    ) -> None:
        """Client attributes, trusted while the row's ``updated_at`` is ``updated_at``
        (None: the one this transaction gives it)."""
        self.rows.write_attrs(conn, full, attrs, updated_at)

    def set_attrs(self, doc_id: UUID, attrs: FileAttrs) -> bool:
        relative = self.path_of(doc_id)
        if relative is None:
            return False
        with self._transaction() as conn:  # one statement: answered after the commit
            found = self.rows.set_attrs(conn, self.scope.row(relative), attrs)
        return found.fetchone() is not None

    # -- removing and moving (IronClaw has neither: the document goes with its sidecars) --

    def _carry_entry_versions(
        self, conn: Any, source: str, target: str, seen: datetime | None = None
    ) -> None:
        """A document renamed over another keeps its history: the source's version
        sidecars become the target's, numbered after the target's own (memfs's rule:
        IronClaw has no rename; its delete of the source would take them) - only while
        the source is at ``seen``, as its delete is: a source another writer changed
        meanwhile stays, with its own history."""
        self.rows.carry_versions(conn, self._family(source), self.scope.row(target) + ".versions",
                                 target, seen)  # fmt: skip

    def _family(self, relative: str) -> Family:
        """A document's row and its sidecars' ranges."""
        full = self.scope.row(relative)
        return Family(full, full + ".meta", full + ".chunks", full + ".versions")

    def _delete(
        self, conn: Any, doc_id: UUID, seen: datetime | None = None, *, keep: bool = True
    ) -> Callable[[], bool | None]:
        """Send the removal of a document with every sidecar, only while its row is at
        ``seen`` (None: any version).  Calling the result (after the commit) says whether
        it was removed: True, False if its guard failed (another writer changed it), None
        if there was nothing to remove."""
        relative = self.path_of(doc_id)
        if relative is None:
            return lambda: None
        family = self._family(relative)
        if keep:
            self.rows.keep_family(conn, family, seen, KeepAs(self.scope.prefix, relative))
        removed = self.rows.delete_family(conn, family, seen)

        def answer() -> bool | None:
            row = removed.fetchone()
            if row is None or row[0] == 0:
                return False if row is not None and row[1] > 0 else None
            self._forget(doc_id)
            return True

        return answer

    def delete_document(
        self, doc_id: UUID, keep_dirs: Sequence[str] = (), seen: datetime | None = None
    ) -> bool:
        with self._transaction() as conn:
            existed = self._delete(conn, doc_id, seen)
            self._keep_directories(conn, keep_dirs)
        return existed() is True

    def rename_document(
        self, rename: Rename, attrs: FileAttrs, replaced: Overwritten | None = None
    ) -> Moved | None:
        doc_id, new_path, keep_dirs = rename.doc_id, rename.new_path, rename.keep_dirs
        self._refuse_path(new_path)
        relative = self.path_of(doc_id)
        if relative is None:
            return None
        if relative == new_path and replaced is None:
            return self._renamed_in_place(relative, attrs)
        replaced_gone: Callable[[], bool | None] = lambda: None  # noqa: E731
        with self._transaction() as conn:
            if replaced is not None:
                replaced_gone = self._delete(conn, replaced.doc_id, replaced.seen)
            target = self.scope.row(new_path)
            taken = self.rows.taken(conn, target)
            before = self._locked_times(conn, [relative])
            if taken.fetchone() is not None:
                raise WriteRefused(
                    errno.EEXIST,
                    "IronClaw's document layout",
                    f"{new_path!r} is taken by a row the mount does not show",
                )
            found = before.fetchone()
            after = None
            if found is not None:
                after = self._move_query(conn, [(relative, new_path)])
                self._write_entry_attrs(conn, target, attrs, None)
                self.rows.note_moves(conn, self.scope.prefix, [(relative, new_path)])
                self._moved_in_transaction(doc_id, new_path)
            self._keep_directories(conn, keep_dirs)
        replaced_gone()
        if found is None or after is None:
            return None
        return Moved(found[1], self._one(after)[1])

    def _renamed_in_place(self, relative: str, attrs: FileAttrs) -> Moved | None:
        """A document renamed to the path its row has (an editor's backup renamed back,
        ``x -> x~ -> x``): nothing moves, and the row is not another one in the way; the
        attributes the rename carries are kept."""
        with self._transaction() as conn:
            found = self._locked_times(conn, [relative]).fetchone()
            if found is not None and not attrs.empty:
                self._write_entry_attrs(conn, self.scope.row(relative), attrs, None)
        return Moved(found[1], found[1]) if found is not None else None

    def _locked_times(self, conn: Any, relatives: Sequence[str]) -> Answer:
        """The documents' rows locked, answering (path, updated_at) each (sent, not read)."""
        return self.rows.lock_documents(conn, [self.scope.row(r) for r in relatives])

    def _move_query(self, conn: Any, moves: Sequence[tuple[str, str]]) -> Answer:
        """Send the moves of documents (old relative path, new) with their sidecars; chunk
        and version rows learn their new ``doc_relative_path``, and every moved row's
        version goes up by one as IronClaw's updates do.  Answers (new path, updated_at)
        per document moved."""
        moved = self.rows.move_families(
            conn, [self.scope.row(old) for old, _ in moves],
            [self.scope.row(new) for _, new in moves], [new for _, new in moves],
        )  # fmt: skip
        self._index_check(conn, [new for _, new in moves])
        return moved

    def _index_check(self, conn: Any, relatives: Sequence[str]) -> None:
        """Send, for documents just moved, what their indexing at the new path is decided
        by (metadata sidecars and ``.config`` rows above) and whether chunks are there;
        read after the commit (``_after_transaction``), which rebuilds the chunks of those
        that do not match: IronClaw never has chunks under an effective ``skip_indexing``,
        and indexes what leaves one.  No round trip of its own."""
        wanted = set()
        for relative in relatives:
            wanted.add(layout.meta_path(relative))
            for config in layout.config_candidates(relative):
                wanted.update((config, layout.meta_path(config)))
        metadata = self.rows.rows_at(conn, [self.scope.row(p) for p in sorted(wanted)])
        chunked = self.rows.chunked(conn, [self.scope.row(r) for r in relatives])
        checks: list[tuple[list[str], Answer, Answer]] = self._pending_checks()
        checks.append((list(relatives), metadata, chunked))

    def _pending_checks(self) -> list[tuple[list[str], Answer, Answer]]:
        checks: list[tuple[list[str], Answer, Answer]] | None = getattr(
            self._moved_checks, "checks", None
        )
        if checks is None:
            checks = self._moved_checks.checks = []
        return checks

    def _after_transaction(self, committed: bool) -> None:
        checks = self._pending_checks()
        taken, checks[:] = list(checks), []
        if not committed:
            self._undo_moves()
        self._moves_ended()
        if not committed:
            return
        for relatives, metadata, chunked in taken:
            found = {self._relative(full): bytes(data) for full, data in metadata.fetchall()}
            has_chunks = {self._relative(full) for (full,) in chunked.fetchall()}
            for relative in relatives:
                try:
                    indexed = self._effective(found, relative).indexed
                except WriteRefused:
                    continue  # a broken sidecar: every write below it is refused anyway
                if indexed == (relative in has_chunks):
                    continue
                try:
                    count = self._rebuild_entry_chunks(relative)
                except (self.rows.error, WriteRefused) as exc:
                    log.warning("the chunks of %r were not rebuilt for its new folder's "
                                "indexing rules (%s); `memfs reindex` rebuilds them",
                                relative, " ".join(str(exc).split()))  # fmt: skip
                    continue
                log.debug("%r moved %s skip_indexing: %d chunk(s) now", relative,
                          "out of" if indexed else "into", count)  # fmt: skip

    # -- folder moves too large for one transaction (a libSQL file) ------------------------

    def _part_limit(self) -> int | None:
        return self.rows.move_limit

    def _folder_size(self, path: str) -> int:
        with self._reading() as conn:
            return self.rows.count_documents(conn, self.scope.row(path))

    def _move_log(self) -> tuple[PartsLog, str] | None:
        log_ = self.rows.move_log
        return None if log_ is None else (log_, self.scope.prefix)

    def _log_key(self, path: str) -> str:
        return self.scope.row(path)

    def _resumed_removal(self, doc_id: str, path: str, seen: str | None) -> Delete:
        """By its path: ids are this process's names for paths (``id_of``)."""
        return Delete(self.id_of(path), datetime.fromisoformat(seen) if seen else None, path)

    def _log_path(self, key: str) -> str:
        return self._relative(key)

    def _folder_taken(self, conn: Any, move: MoveDir) -> bool:
        replaced = None if move.replaced is None else self.scope.row(move.replaced)
        answer = self.rows.lock_folder(conn, self.scope.row(move.old), self.scope.row(move.new),
                                       replaced)  # fmt: skip
        return bool(answer[0][0])

    def _move_part(self, conn: Any, move: MoveDir, after: str, limit: int,
                   outcome: BatchOutcome) -> str | None:  # fmt: skip
        """Up to ``limit`` documents with their sidecars; IronClaw sees the rest at the old
        path until their part."""
        old_full = self.scope.row(move.old)
        found = self.rows.folder_documents(conn, old_full, after, limit)
        if not found:
            self.rows.move_directories(conn, old_full, self.scope.row(move.new))
            return None
        before = {
            self._relative(full): at for full, at in found if layout.is_listed(self._relative(full))
        }
        moves = []
        for rel in before:
            target = move.new + rel[len(move.old) :]
            if self.rows.taken(conn, self.scope.row(target)).fetchall():
                outcome.skipped.append((move, f"another writer's row is at {target!r}"))
            else:
                moves.append((rel, target))
        moved_at = dict(self._move_query(conn, moves).fetchall()) if moves else {}
        self.rows.note_moves(conn, self.scope.prefix, moves)
        for old_rel, new_rel in moves:
            at = moved_at.get(self.scope.row(new_rel))
            if at is not None:
                doc_id = self.id_of(old_rel)
                outcome.moved[doc_id] = Moved(before[old_rel], at)
                self._moved_in_transaction(doc_id, new_rel)
        return str(found[-1][0])

    def _move_entries(
        self, conn: Any, old_path: str, new_path: str, replaced_dir: str | None
    ) -> dict[UUID, Moved] | None:
        """Move a folder's documents (with their sidecars) and kept folders; None, moving
        nothing, if rows the mount does not show lie at or below ``new_path`` (another
        writer's).  Two mounts moving folders onto one new name take turns on the target's
        lock: the second finds the first's rows there."""
        new_full = self.scope.row(new_path)
        old_full = self.scope.row(old_path)
        # One answer: whether the new name is taken, and the folder's documents, locked.
        answer = self.rows.lock_folder(
            conn, old_full, new_full, None if replaced_dir is None else self.scope.row(replaced_dir)
        )
        if answer and answer[0][0]:
            return None
        if replaced_dir is not None:
            self._drop_directory(conn, replaced_dir)
        locked = [(full, at) for _, full, at in answer if full is not None]
        before = {
            self._relative(full): at
            for full, at in locked
            if layout.is_listed(self._relative(full))
        }
        moves = [(rel, new_path + rel[len(old_path) :]) for rel in before]
        after = self._move_query(conn, moves).fetchall() if moves else []
        self.rows.move_directories(conn, old_full, new_full)
        # Each document's move, for .at/ (not the folder's: documents made in the new
        # folder afterwards were never in the old one).
        self.rows.note_moves(conn, self.scope.prefix, moves)
        moved: dict[UUID, Moved] = {}
        moved_at: dict[str, datetime] = dict(after)
        for old_rel, new_rel in moves:
            doc_id = self.id_of(old_rel)
            at = moved_at.get(self.scope.row(new_rel))
            if at is not None:
                moved[doc_id] = Moved(before[old_rel], at)
                self._moved_in_transaction(doc_id, new_rel)
        return moved

    def replace_document(self, replacement: Replacement, how: SaveOptions) -> CommitResult | None:
        """A document renamed over another: the target takes the source's content as an
        overwrite (its versions keep the replaced content), then the source goes; a
        target changed since ``how.expected`` is merged with it by ``how.merge``."""
        source_id, path, source_at = replacement.source_id, replacement.path, replacement.source_at
        content = replacement.content
        source = self.path_of(source_id)
        if source is None:
            return None
        with self._transaction() as conn:
            if content is None:
                # Locked: the row deleted below is the row read.
                data = self.rows.locked_contents(conn, self.scope.row(source))
                if data is None:
                    return None
                content = data.decode("utf-8")
            finish = self._write_entry(conn, Write(replacement.target_id, path, content),
                                       replacement.attrs, how,
                                       version_unchanged=source != path)  # fmt: skip
            source_gone: Callable[[], bool | None] = lambda: None  # noqa: E731
            if source != path:  # (never the row just written, whatever the ids say)
                # Kept with its own versions before they go to the target.
                self.rows.keep_family(conn, self._family(source), source_at,
                                      KeepAs(self.scope.prefix, source))  # fmt: skip
                self._carry_entry_versions(conn, source, path, source_at)
                source_gone = self._delete(conn, source_id, source_at, keep=False)
            self._keep_directories(conn, replacement.keep_dirs)
        if source_gone() is False:  # another writer changed it after the mount read it
            self.deferred.sent(ChangeBatch(), BatchOutcome(skipped=[(
                Delete(source_id, source_at, source),
                "another writer changed the renamed file after this mount read it",
            )]))  # fmt: skip
        result = finish()
        self._moved_to(result.doc_id, path)
        return result

    # -- directories ---------------------------------------------------------------------

    def _keep_directories(self, conn: Any, paths: Sequence[str]) -> None:
        self.rows.keep_directories(conn, [self.scope.row(p) for p in paths])

    def _drop_directory(self, conn: Any, path: str) -> None:
        self.rows.drop_directory(conn, self.scope.row(path))

    # -- change feed -----------------------------------------------------------------------

    def changed_documents(self, events: Sequence[Mapping[str, object]]) -> dict[UUID, bool]:
        """The documents of this workspace that change-feed events name, True for those
        deleted (this store's own writes left out)."""
        found: dict[UUID, bool] = {}
        prefix = self.scope.prefix + "/"
        for event in events:
            if self.origin and event.get("origin") == self.origin:
                continue
            for key in ("old_path", "path"):
                full = event.get(key)
                if not isinstance(full, str) or not full.startswith(prefix):
                    continue
                relative = full[len(prefix) :]
                if not layout.is_listed(relative):
                    continue
                doc_id = self.id_of(relative)
                found.pop(doc_id, None)
                found[doc_id] = event.get("op") == "DELETE" or key == "old_path"
        return found
