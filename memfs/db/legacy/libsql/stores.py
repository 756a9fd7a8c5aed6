"""A legacy (IronClaw <= v1.0) workspace in IronClaw's libSQL file, read
(docs/ironclaw/libsql.md §8; requirements 12, 13).

The file holds ``memory_documents``, ``memory_chunks`` (with its FTS5 external-content
table) and ``memory_document_versions``, with text ids and times.  Here: every document,
its versions, ``.at/`` and IronClaw v1.0's full-text search; writes are
``memfs.db.legacy.libsql.writes``'s.  ``LegacyLibsqlStore`` alone is a read-only mount's
store (a Turso replica, or a vector index with no libSQL engine here): it refuses every
write with EROFS, whose reason names the file.

The vector leg of search answers nothing: IronClaw falls back to full text whenever its
vector query fails, and plain SQLite has no ``vector_top_k``.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NoReturn
from uuid import UUID

from pgvector import Vector

from memfs.db.capabilities import ChunkHit
from memfs.db.health import Duplicate
from memfs.db.interface import (
    NO_ATTRS,
    CommitResult,
    Content,
    DocRow,
    DocumentHistory,
    ExportRow,
    FileAttrs,
    PastVersion,
    StoredDocument,
    VersionInfo,
)
from memfs.db.legacy.health import stale_documents
from memfs.db.legacy.versions import LegacyVersions
from memfs.db.libsql.connection import LibsqlFile
from memfs.db.libsql.row_times import as_text, parse_time, token
from memfs.db.scoped import Scope
from memfs.errors import FsError, WriteRefused
from memfs.ironclaw.chunker import DEFAULT_CONFIG
from memfs.ironclaw.hashing import bytes_hash

#: The scope's rows (IronClaw matches the agent with ``IS``: NULL only NULL).
_SCOPE = "d.user_id = :user AND d.agent_id IS :agent"
#: The same where rows are looked up by id: ``+`` keeps SQLite's planner off the (user,
#: agent, path) index, which it otherwise prefers to the id's for an ``id IN (…)`` and then
#: walks every row of the user for each look-up (a cold ``grep -r`` of 100,000 documents
#: took 164 s, 39 times the local disk).
_SCOPE_BY_ID = "+d.user_id = :user AND d.agent_id IS :agent"
#: A document's content as UTF-8 bytes (IronClaw stores text).
_BYTES = "CAST(d.content AS BLOB)"
#: Documents read per query when copying a workspace elsewhere.
BATCH = 200
#: The longest path a mount takes (Linux's PATH_MAX).
PATH_MAX = 4096


def legacy_token(updated_at: str, size: int) -> datetime:
    """A legacy row's version token: ``updated_at`` (IronClaw's milliseconds) plus its
    content's byte length modulo 1,000 as microseconds (a legacy write changes nothing
    else, and two writes within one millisecond then still differ unless their lengths
    agree modulo 1,000)."""
    return token(updated_at, size % 1000)


def _scope_for(where: str) -> str:
    """The scope's condition for rows chosen by ``where`` (by id: ``_SCOPE_BY_ID``)."""
    return _SCOPE_BY_ID if where.startswith("d.id ") else _SCOPE


def _params(scope: Scope, **extra: Any) -> dict[str, Any]:
    agent = str(scope.agent_id) if scope.agent_id is not None else None
    return {"user": scope.user_id, "agent": agent, **extra}


def _text(value: Any) -> bytes:
    """A text column's value as UTF-8 bytes (a blob some other tool wrote, as it is)."""
    return value.encode("utf-8") if isinstance(value, str) else bytes(value or b"")


def fts5_query(text: str) -> str | None:
    """IronClaw v1.0's MATCH text: each whitespace-separated token as a quoted phrase
    (inner quotes doubled), all required; None when there is no token (no query runs)."""
    phrases = ['"' + token.replace('"', '""') + '"' for token in text.split()]
    return " ".join(phrases) if phrases else None


class LegacyLibsqlStore:
    """One legacy workspace's documents in the file (``DocumentStore``), read-only."""

    origin: str | None = None

    def __init__(self, file: LibsqlFile, scope: Scope) -> None:
        self.file = file
        self._scope = scope
        #: SQLite's text keys have no length limit of an index's (PostgreSQL's btree).
        self.max_path_bytes = PATH_MAX
        #: The last fingerprint per connection, with the connection's ``data_version`` and
        #: the process's commit count when it was taken.
        self._fingerprints: dict[int, tuple[tuple[int, int], tuple[int, str]]] = {}

    @property
    def scope(self) -> Scope:
        return self._scope

    def _refuse(self) -> NoReturn:
        raise FsError(
            errno.EROFS,
            f"{self.file.path} holds IronClaw's legacy (<= v1.0) memory, which memfs "
            "mounts read-only",
        )

    def path_problem(self, path: str) -> str | None:
        return None

    def content_problem(self, path: str, text: str) -> WriteRefused | None:
        return None

    # -- reading ---------------------------------------------------------------------------

    def _rows(self, where: str, **params: Any) -> list[DocRow]:
        rows = self.file.read(lambda c: c.execute(
            f"SELECT d.id, d.path, length({_BYTES}), d.created_at, d.updated_at "
            f"FROM memory_documents d WHERE {_scope_for(where)} AND {where} "
            "ORDER BY d.path, d.updated_at DESC, d.id",
            _params(self._scope, **params),
        ).fetchall())  # fmt: skip
        return [
            DocRow(UUID(i), p, int(s or 0), parse_time(c), legacy_token(u, int(s or 0)), NO_ATTRS)
            for i, p, s, c, u in rows
        ]

    def load_documents(self) -> list[DocRow]:
        return self._rows("1")

    def load_directories(self) -> list[str]:
        return []

    def document_rows(self, doc_ids: Sequence[UUID]) -> dict[UUID, DocRow]:
        ids = json.dumps([str(d) for d in doc_ids])
        rows = self._rows("d.id IN (SELECT value FROM json_each(:ids))", ids=ids)
        return {row.id: row for row in rows}

    def read_content(self, doc_id: UUID) -> Content | None:
        return self.read_contents([doc_id]).get(doc_id)

    def read_contents(
        self, doc_ids: Sequence[UUID], near: str | None = None
    ) -> dict[UUID, Content]:
        ids = json.dumps([str(d) for d in doc_ids])
        rows = self.file.read(lambda c: c.execute(
            f"SELECT d.id, {_BYTES}, d.updated_at FROM memory_documents d "
            f"WHERE {_SCOPE_BY_ID} AND d.id IN (SELECT value FROM json_each(:ids))",
            _params(self._scope, ids=ids),
        ).fetchall())  # fmt: skip
        found = {}
        for i, data, at in rows:
            text = _text(data)
            found[UUID(i)] = Content(text, legacy_token(at, len(text)))
        return found

    def content_by_hash(self, doc_id: UUID, digest: str) -> bytes | None:
        """SQLite has no SHA-256: the current content is hashed here; versions carry
        IronClaw's hash in their row."""
        current = self.read_content(doc_id)
        if current is not None and bytes_hash(current.data) == digest:
            return current.data
        row = self.file.read(lambda c: c.execute(
            "SELECT CAST(v.content AS BLOB) FROM memory_document_versions v "
            f"JOIN memory_documents d ON d.id = v.document_id WHERE {_SCOPE_BY_ID} "
            "AND v.document_id = :id AND v.content_hash = :hash LIMIT 1",
            _params(self._scope, id=str(doc_id), hash=digest),
        ).fetchone())  # fmt: skip
        return _text(row[0]) if row is not None else None

    def _whole(self, where: str, **params: Any) -> list[tuple[Any, ...]]:
        return self.file.read(lambda c: c.execute(  # type: ignore[no-any-return]
            f"SELECT d.id, d.path, d.content, d.updated_at FROM memory_documents d "
            f"WHERE {_SCOPE} AND {where} ORDER BY d.path, d.updated_at DESC, d.id",
            _params(self._scope, **params),
        ).fetchall())  # fmt: skip

    def find_document(self, path: str) -> StoredDocument | None:
        rows = self._whole("d.path = :path", path=path)
        if not rows:
            return None
        doc_id, _, content, updated = rows[0]
        return StoredDocument(UUID(doc_id), content, legacy_token(updated, len(_text(content))))

    def export_rows(self) -> list[ExportRow]:
        return [
            ExportRow(path, content, legacy_token(updated, len(_text(content))), None, UUID(doc_id))
            for doc_id, path, content, updated in self._whole("1")
        ]

    def reindex_targets(self, paths: Sequence[str] | None) -> list[tuple[UUID, str]]:
        rows = self.load_documents()
        wanted = set(paths) if paths is not None else None
        return [(r.id, r.path) for r in rows if wanted is None or r.path in wanted]

    # -- other writers -------------------------------------------------------------------

    def changed_documents(self, events: Sequence[Mapping[str, object]]) -> dict[UUID, bool]:
        return {}  # no change feed in IronClaw's file: mounts poll

    def document_versions(self) -> list[tuple[UUID, str, datetime]] | None:
        return None  # read-only: the whole list (``LegacyLibsqlWriter`` reads versions first)

    def fingerprint(self) -> tuple[int, str]:
        """Taken again only when ``PRAGMA data_version`` of the reading connection says
        another connection committed, or this process did (a connection's own commits do
        not move its ``data_version``): the count, the newest ``updated_at`` and the sum of
        rowids.  Cached per connection: each connection counts on its own."""

        def read(conn: Any) -> tuple[int, str]:
            version = (int(conn.execute("PRAGMA data_version").fetchone()[0]), self.file.commits)
            cached = self._fingerprints.get(id(conn))
            if cached is not None and cached[0] == version:
                return cached[1]
            row = conn.execute(
                "SELECT count(*), max(d.updated_at), total(d.rowid) FROM memory_documents d "
                f"WHERE {_SCOPE}",
                _params(self._scope),
            ).fetchone()
            found = (int(row[0]), f"{row[1]}|{row[2]}") if row else (0, "")
            self._fingerprints[id(conn)] = (version, found)
            return found

        return self.file.read(read)

    # -- writes: refused ---------------------------------------------------------------

    def reindex(self, doc_id: UUID, path: str) -> int:
        self._refuse()

    def commit_document(self, *args: Any, **kwargs: Any) -> CommitResult:
        self._refuse()

    def commit_documents(self, *args: Any, **kwargs: Any) -> list[CommitResult]:
        self._refuse()

    def replace_document(self, *args: Any, **kwargs: Any) -> CommitResult | None:
        self._refuse()

    def rename_document(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse()

    def rename_directory(self, *args: Any, **kwargs: Any) -> Any:
        self._refuse()

    def delete_document(self, *args: Any, **kwargs: Any) -> bool:
        self._refuse()

    def merge_metadata(self, doc_id: UUID, path: str, overlay: Mapping[str, Any]) -> bool:
        self._refuse()

    def set_attrs(self, doc_id: UUID, attrs: FileAttrs) -> bool:
        self._refuse()

    def create_directory(self, path: str) -> None:
        self._refuse()

    def delete_directory(self, path: str, keep_dirs: Sequence[str] = ()) -> None:
        self._refuse()

    # -- deferred changes: none are ever made -----------------------------------------------

    def defer(self, *changes: Any) -> None:
        self._refuse()

    def flush_changes(self) -> bool:
        return False

    def moving(self) -> bool:
        return False

    def take_moved(self) -> dict[UUID, Any]:
        return {}

    def changes_waiting(self) -> bool:
        return False

    def changes_queued(self) -> int:
        return 0

    def take_skipped(self) -> list[tuple[Any, str]]:
        return []

    def counts(self) -> tuple[int, int]:
        """(documents, chunks) of the workspace, for ``memfs status``."""
        row = self.file.read(lambda c: c.execute(
            "SELECT (SELECT count(*) FROM memory_documents d WHERE " + _SCOPE + "), "
            "(SELECT count(*) FROM memory_chunks c JOIN memory_documents d "
            "ON d.id = c.document_id WHERE " + _SCOPE + ")",
            _params(self._scope),
        ).fetchone())  # fmt: skip
        return (int(row[0]), int(row[1])) if row else (0, 0)


class LegacyLibsqlVersionStore(LegacyVersions):
    """``LegacyVersions`` in IronClaw v0.25-v1.0's libSQL file."""

    def __init__(self, file: LibsqlFile, scope: Scope, *, available: bool) -> None:
        super().__init__(available=available)
        self.file = file
        self.scope = scope

    _DOCUMENT = (
        f"(SELECT d.id FROM memory_documents d WHERE {_SCOPE} AND d.path = :path "
        "ORDER BY d.updated_at DESC LIMIT 1)"
    )

    def _listed(self, path: str) -> list[VersionInfo]:
        rows = self.file.read(lambda c: c.execute(
            "SELECT version, created_at, changed_by, length(CAST(content AS BLOB)) "
            f"FROM memory_document_versions WHERE document_id = {self._DOCUMENT} "
            "ORDER BY version",
            _params(self.scope, path=path),
        ).fetchall())  # fmt: skip
        return [VersionInfo(n, parse_time(at), who, int(size or 0)) for n, at, who, size in rows]

    def _content(self, path: str, number: int) -> bytes | None:
        row = self.file.read(lambda c: c.execute(
            "SELECT CAST(content AS BLOB) FROM memory_document_versions "
            f"WHERE document_id = {self._DOCUMENT} AND version = :number",
            _params(self.scope, path=path, number=number),
        ).fetchone())  # fmt: skip
        return _text(row[0]) if row is not None else None

    def _since(self, at: datetime) -> tuple[list[str], list[tuple[str, VersionInfo]]]:
        """Times compared as IronClaw's text, to the millisecond."""
        born_sql = f"SELECT d.path FROM memory_documents d WHERE {_SCOPE} AND d.created_at > :at"
        kept_sql = (
            "SELECT d.path, v.version, v.created_at, v.changed_by, "
            "  length(CAST(v.content AS BLOB)) FROM memory_documents d "
            "JOIN memory_document_versions v ON v.document_id = d.id "
            f"WHERE {_SCOPE} AND v.created_at > :at ORDER BY d.path, v.version"
        )
        params = _params(self.scope, at=as_text(at))

        def read(conn: Any) -> tuple[list[Any], list[Any]]:
            born = conn.execute(born_sql, params).fetchall()
            kept = conn.execute(kept_sql, params).fetchall() if self.available else []
            return born, kept

        born, kept = self.file.read(read)
        return [p for (p,) in born], [
            (path, VersionInfo(number, parse_time(created), who, int(size)))
            for path, number, created, who, size in kept
        ]


class LegacyLibsqlSearchStore:
    """IronClaw v1.0's search legs on the file (``ChunkSearch``): FTS5 over chunks."""

    def __init__(self, file: LibsqlFile, scope: Scope) -> None:
        self.file = file
        self._scope = scope

    @property
    def scope(self) -> Scope:
        return self._scope

    def search_fts(
        self, query: str, limit: int, users: Sequence[str] | None = None
    ) -> list[ChunkHit]:
        """IronClaw's MATCH of every token (``fts5_query``) ranked by FTS5's ``rank``
        (bm25); equal ranks in the order FTS5 gives them, as IronClaw's own query does."""
        match = fts5_query(query)
        if match is None:
            return []
        params = _params(self._scope, q=match, limit=limit,
                         users=json.dumps(list(users or [self._scope.user_id])))  # fmt: skip
        rows = self.file.read(lambda c: c.execute(
            "SELECT c.id, c.document_id, d.path, c.chunk_index, c.content, d.user_id "
            "FROM memory_chunks_fts f JOIN memory_chunks c ON c._rowid = f.rowid "
            "JOIN memory_documents d ON d.id = c.document_id "
            "WHERE d.user_id IN (SELECT value FROM json_each(:users)) AND d.agent_id IS :agent "
            "AND memory_chunks_fts MATCH :q ORDER BY f.rank LIMIT :limit",
            params,
        ).fetchall())  # fmt: skip
        return [ChunkHit(UUID(i), UUID(d), p, n, text, u) for i, d, p, n, text, u in rows]

    def search_vector(
        self, embedding: Vector, limit: int, users: Sequence[str] | None = None
    ) -> list[ChunkHit]:
        """Nothing: IronClaw answers full text alone when its vector query fails, and
        plain SQLite has no ``vector_top_k`` (see the module docstring)."""
        return []


class LegacyLibsqlHistoryStore:
    """Every legacy document of the workspace with its versions, for ``memfs migrate``."""

    def __init__(self, file: LibsqlFile, scope: Scope, *, with_versions: bool) -> None:
        self.file = file
        self.scope = scope
        self.with_versions = with_versions

    def count(self) -> int:
        row = self.file.read(lambda c: c.execute(
            f"SELECT count(DISTINCT d.path) FROM memory_documents d WHERE {_SCOPE}",
            _params(self.scope),
        ).fetchone())  # fmt: skip
        return int(row[0]) if row else 0

    def paths(self) -> list[str]:
        """Every document's path (a duplicated path once), without contents."""
        rows = self.file.read(lambda c: c.execute(
            f"SELECT DISTINCT d.path FROM memory_documents d WHERE {_SCOPE}",
            _params(self.scope),
        ).fetchall())  # fmt: skip
        return [r[0] for r in rows]

    def histories(self, batch: int = BATCH) -> Any:
        """Every document by path, the newest row where a path is duplicated, with its
        versions in order."""
        after = ""
        while True:
            docs = self.file.read(
                lambda c, a=after: c.execute(  # type: ignore[misc]
                    "SELECT d.id, d.path, d.content, d.metadata, d.created_at, d.updated_at, "
                    "  (SELECT count(*) - 1 FROM memory_documents o WHERE o.user_id = d.user_id "
                    "   AND o.agent_id IS d.agent_id AND o.path = d.path) "
                    f"FROM memory_documents d WHERE {_SCOPE} AND d.path > :after AND d.id = "
                    "  (SELECT n.id FROM memory_documents n WHERE n.user_id = d.user_id "
                    "   AND n.agent_id IS d.agent_id AND n.path = d.path "
                    "   ORDER BY n.updated_at DESC, n.id LIMIT 1) "
                    "ORDER BY d.path LIMIT :batch",
                    _params(self.scope, after=a, batch=batch),
                ).fetchall()
            )
            if not docs:
                return
            versions: dict[str, list[PastVersion]] = {}
            if self.with_versions:
                ids = json.dumps([d[0] for d in docs])
                for doc_id, number, content, who, created in self.file.read(
                    lambda c, i=ids: c.execute(  # type: ignore[misc]
                        "SELECT document_id, version, content, changed_by, created_at "
                        "FROM memory_document_versions WHERE document_id IN "
                        "(SELECT value FROM json_each(:ids)) ORDER BY document_id, version",
                        {"ids": i},
                    ).fetchall()
                ):
                    versions.setdefault(doc_id, []).append(
                        PastVersion(number, content, who, parse_time(created))
                    )
            for doc_id, path, content, metadata, created, updated, duplicates in docs:
                yield DocumentHistory(
                    path, content, json_object(metadata), parse_time(created), parse_time(updated),
                    tuple(versions.get(doc_id, ())), int(duplicates),
                )  # fmt: skip
            after = docs[-1][1]


def legacy_settings(file: LibsqlFile, owner: str, keys: Sequence[str]) -> dict[str, Any]:
    """IronClaw v1.0's ``settings`` rows of ``owner`` among ``keys``, each value its JSON
    text decoded ({} without the table; a value that is not JSON is left out)."""

    def read(conn: Any) -> list[Any]:
        table = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'settings'"
        ).fetchone()
        if table is None:
            return []
        return conn.execute(  # type: ignore[no-any-return]
            "SELECT key, value FROM settings WHERE user_id = ? "
            "AND key IN (SELECT value FROM json_each(?))",
            (owner, json.dumps(list(keys))),
        ).fetchall()

    found = {}
    for key, text in file.read(read):
        try:
            found[key] = json.loads(text)
        except (TypeError, ValueError):
            continue
    return found


def json_object(text: Any) -> dict[str, Any]:
    """A metadata column's JSON object ({} for anything else)."""
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class LegacyLibsqlHealth:
    """What ``memfs doctor`` reads in the legacy file and mends (``WorkspaceHealth``);
    nothing is mended where the file is read-only (a Turso replica, or IronClaw's vector
    index without its libSQL engine here)."""

    def __init__(self, file: LibsqlFile, scope: Scope) -> None:
        self.file = file
        self.scope = scope

    def _refuse(self) -> NoReturn:
        raise FsError(
            errno.EROFS,
            f"{self.file.path} is IronClaw's legacy file, which memfs opens read-only here",
        )

    def _writing(self, work: Any) -> Any:
        if self.file.read_only:
            self._refuse()
        return self.file.write(work)

    def duplicate_paths(self) -> list[Duplicate]:
        rows = self.file.read(lambda c: c.execute(
            "SELECT d.path, json_group_array(d.id) FROM (SELECT path, id FROM memory_documents d "
            f"WHERE {_SCOPE} ORDER BY path, updated_at DESC, id) d GROUP BY d.path "
            "HAVING count(*) > 1 ORDER BY d.path",
            _params(self.scope),
        ).fetchall())  # fmt: skip
        found = []
        for path, ids in rows:
            order = [UUID(i) for i in json.loads(ids)]
            found.append(Duplicate(path, order[0], order[1:]))
        return found

    def separate_duplicates(self) -> list[str]:
        """Give each older row of a duplicated path a name of its own
        (``notes.duplicate-1a2b3c4d.md``): every row stays, and IronClaw shows each."""
        renamed: list[str] = []

        def work(conn: Any) -> None:
            for duplicate in self.duplicate_paths():
                stem, dot, ext = duplicate.path.rpartition(".")
                for doc_id in duplicate.older:
                    tag = f"duplicate-{doc_id.hex[:8]}"
                    new = f"{stem}.{tag}.{ext}" if dot and "/" not in ext else f"{ext}.{tag}"
                    conn.execute("UPDATE memory_documents SET path = ? WHERE id = ?",
                                 (new, str(doc_id)))  # fmt: skip
                    renamed.append(new)

        self._writing(work)
        return renamed

    def stale_chunks(self) -> list[str]:
        folders, docs = self.file.read_together((
            f"SELECT d.path, d.metadata FROM memory_documents d WHERE {_SCOPE} "
            "AND (d.path = '.config' OR d.path LIKE '%/.config') ORDER BY d.updated_at",
            "SELECT d.path, d.content, d.metadata, (SELECT json_group_array(c.content) FROM "
            "  (SELECT content FROM memory_chunks WHERE document_id = d.id "
            "   ORDER BY chunk_index) c), (SELECT json_group_array(c.chunk_index) FROM "
            "  (SELECT chunk_index FROM memory_chunks WHERE document_id = d.id "
            f"   ORDER BY chunk_index) c) FROM memory_documents d WHERE {_SCOPE} "
            "ORDER BY d.path",
        ), _params(self.scope))  # fmt: skip
        rows = [
            (path, content, json_object(own), json.loads(texts), json.loads(indexes))
            for path, content, own, texts, indexes in docs
        ]
        meta = {path: json_object(own) for path, own in folders}
        return list(stale_documents(rows, meta, DEFAULT_CONFIG))

    def orphans(self) -> dict[str, int]:
        """Chunks and versions whose document is gone (IronClaw's foreign keys cascade, so
        only a write without them leaves any)."""
        row = self.file.read(lambda c: c.execute(
            "SELECT (SELECT count(*) FROM memory_chunks c WHERE NOT EXISTS (SELECT 1 FROM "
            "memory_documents d WHERE d.id = c.document_id)), (SELECT count(*) FROM "
            "memory_document_versions v WHERE NOT EXISTS (SELECT 1 FROM memory_documents d "
            "WHERE d.id = v.document_id))"
        ).fetchone())  # fmt: skip
        return {"chunks": int(row[0]), "versions": int(row[1])} if row else {}

    def drop_orphans(self) -> dict[str, int]:
        """Chunks and versions whose document is gone, removed (chunks through IronClaw's
        engine where its vector index holds them)."""

        def work(conn: Any) -> dict[str, int]:
            gone = "NOT IN (SELECT id FROM memory_documents)"
            chunks = conn.execute(f"DELETE FROM memory_chunks WHERE document_id {gone}")
            versions = conn.execute(
                f"DELETE FROM memory_document_versions WHERE document_id {gone}"
            )
            return {"chunks": max(chunks.rowcount, 0), "versions": max(versions.rowcount, 0)}

        return self._writing(work)  # type: ignore[no-any-return]

    def invalid_indexes(self) -> list[str]:
        return []

    def rebuild_index(self, name: str) -> None:
        self._refuse()
