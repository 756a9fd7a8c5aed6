"""The Reborn rows in IronClaw's libSQL file (``RebornRows`` on stdlib ``sqlite3``).

IronClaw's ``root_filesystem_entries`` with its storage classes (docs/ironclaw/libsql.md §4,
requirement 5): ``contents`` a blob, ``indexed`` IronClaw's JSON text, ``is_dir`` and
``version`` integers, timestamps the text ``strftime('%Y-%m-%dT%H:%M:%fZ', 'now')`` gives,
set by SQL on every insert and update (``created_at`` left to the column default).
memfs's own rows (kept folders, client attributes) live in memfs's file beside it,
attached as ``memfs`` (``LibsqlFile``): IronClaw's file holds nothing of memfs's.

Every write runs in the ``BEGIN IMMEDIATE`` transaction ``open_transaction`` opens, so
reads inside it see the rows as they will be changed (the write lock is this process's);
answers are read at once.

The version token (``memfs.db.libsql.row_times``): ``updated_at`` plus ``version % 1000``
microseconds; a guard compares both parts (``_seen``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memfs.db.deferred import PartsLog
from memfs.db.interface import FileAttrs
from memfs.db.libsql.connection import MOVE_LIMIT, LibsqlFile, blob
from memfs.db.libsql.row_times import NOW, TABLE, parse_time, token
from memfs.db.libsql.row_times import as_text as _text
from memfs.db.reborn import layout
from memfs.db.reborn.rows import BELOW, Answer, Family, KeepAs, Record, SharedRows, answers
from memfs.ironclaw.hashing import bytes_hash

if TYPE_CHECKING:
    from memfs.db.libsql.engine_process import EngineProcess
    from memfs.db.libsql.kept import DeletedFile

log = logging.getLogger(__name__)


AT_OR_BELOW = f"(path = :p OR {BELOW})"
_IN = "IN (SELECT value FROM json_each(:{}))"
#: memfs's own tables, in its file beside IronClaw's (attached as ``memfs``).
OWN_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS memfs.reborn_directories (path TEXT PRIMARY KEY)",
    "CREATE TABLE IF NOT EXISTS memfs.reborn_attrs (path TEXT PRIMARY KEY, mode INTEGER, "
    "mtime_ns INTEGER, set_against TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS memfs.path_history (workspace TEXT NOT NULL, "
    "old_path TEXT NOT NULL, new_path TEXT NOT NULL, folder INTEGER NOT NULL DEFAULT 0, "
    "moved_at TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS memfs.path_history_by_time ON path_history (workspace, moved_at)",
    "CREATE TABLE IF NOT EXISTS memfs.history_start (workspace TEXT PRIMARY KEY, "
    "started_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS memfs.empty_spells (workspace TEXT NOT NULL, "
    "path TEXT NOT NULL, emptied_at TEXT NOT NULL, filled_at TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS memfs.empty_spells_by_time ON empty_spells (workspace, filled_at)",
)
#: A delete's guard: the row is at the version the mount showed (no ``:at``: any).
_GUARD = "(:at IS NULL OR (updated_at = :at AND version % 1000 = :extra))"
#: A row's state as the attributes table keeps it.
_STATE = "e.updated_at || '|' || e.version"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def own_file(ironclaw_file: Path) -> Path:
    """memfs's file beside IronClaw's: kept folders and client attributes (0600)."""
    return ironclaw_file.with_name(ironclaw_file.name + ".memfs")


def open_file(
    path: Path,
    *,
    read_only: bool = False,
    foreign_keys: bool = False,
    writer: EngineProcess | None = None,
    schema: Sequence[str] = (),
) -> LibsqlFile:
    """IronClaw's libSQL file with memfs's own file attached as ``memfs`` (created 0600 if
    missing, with ``OWN_SCHEMA`` and ``schema``); ``foreign_keys`` for the legacy layout,
    as IronClaw's engine has them; ``writer``: where its write transactions run."""
    own: Path | str = own_file(path)
    made_here = not read_only
    if not Path(own).exists():
        if read_only:  # nothing is written beside a file opened read-only: an empty one
            own, made_here = f"file:memfs-own-{uuid.uuid4().hex}?mode=memory&cache=shared", True
        else:
            os.close(os.open(own, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    opened = LibsqlFile(path, read_only=read_only, attach={"memfs": own},
                        foreign_keys=foreign_keys, writer=writer)  # fmt: skip
    if made_here:  # (the first connection stays open: the in-memory one lives as long)
        conn = opened.connection()
        for statement in (*OWN_SCHEMA, *schema):
            conn.execute(statement)
    return opened


class GuardFailed(sqlite3.DatabaseError):
    """A guarded write found no row to change (the transaction is rolled back)."""


def _seen(value: Any) -> tuple[str | None, int | None]:
    """A token back in its parts: IronClaw's ``updated_at`` text and ``version % 1000``."""
    if not isinstance(value, datetime):
        return None, None
    extra = value.microsecond % 1000
    at = (value - timedelta(microseconds=extra)).astimezone(UTC)
    return f"{at.strftime('%Y-%m-%dT%H:%M:%S')}.{at.microsecond // 1000:03d}Z", extra


class SqliteRows(SharedRows):
    """``RebornRows`` in a libSQL file."""

    error: type[Exception] = sqlite3.Error

    @contextlib.contextmanager
    def read_connection(self, pool: LibsqlFile) -> Iterator[Any]:
        yield pool.connection()

    def open_transaction(self, pool: LibsqlFile) -> contextlib.AbstractContextManager[Any]:
        return pool.transaction()

    def plain_transaction(self, pool: LibsqlFile) -> contextlib.AbstractContextManager[Any]:
        return pool.transaction()

    def is_refusal(self, exc: Exception) -> bool:
        return isinstance(exc, sqlite3.IntegrityError | sqlite3.DataError)

    def is_unique_violation(self, exc: Exception) -> bool:
        return isinstance(exc, sqlite3.IntegrityError) and "UNIQUE" in str(exc)

    def guard_failure(self, exc: Exception) -> str | None:
        return str(exc) if isinstance(exc, GuardFailed) else None

    # -- reads -----------------------------------------------------------------------------

    def _documents(self, conn: Any, where: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
        rows = conn.execute(
            "SELECT e.path, length(e.contents), e.created_at, e.updated_at, e.version, "
            f"a.mode, a.mtime_ns FROM {TABLE} e LEFT JOIN memfs.reborn_attrs a "
            f"ON a.path = e.path AND a.set_against = {_STATE} "
            f"WHERE {where} AND e.is_dir = 0 AND e.kind = 'memory_document' ORDER BY e.path",
            params,
        ).fetchall()
        return [(p, size, parse_time(c), token(u, v), mode, mtime)
                for p, size, c, u, v, mode, mtime in rows]  # fmt: skip

    def documents(self, conn: Any, prefix: str) -> list[tuple[Any, ...]]:
        return self._documents(conn, "e.path >= :p || '/' AND e.path < :p || '0'", {"p": prefix})

    def documents_at(self, conn: Any, paths: Sequence[str]) -> list[tuple[Any, ...]]:
        return self._documents(conn, f"e.path {_IN.format('paths')}", {"paths": json.dumps(paths)})

    def folder_documents(
        self, conn: Any, folder: str, after: str, limit: int
    ) -> list[tuple[str, Any]]:
        rows = conn.execute(
            f"SELECT path, updated_at, version FROM {TABLE} WHERE {BELOW} AND path > :after "
            "AND is_dir = 0 AND kind = 'memory_document' ORDER BY path LIMIT :limit",
            {"p": folder, "after": after, "limit": limit},
        ).fetchall()
        return [(p, token(u, v)) for p, u, v in rows]

    def versions(self, conn: Any, prefix: str) -> list[tuple[str, Any]]:
        rows = conn.execute(
            f"SELECT path, updated_at, version FROM {TABLE} WHERE {BELOW} AND is_dir = 0 "
            "AND kind = 'memory_document'",
            {"p": prefix},
        ).fetchall()
        return [(p, token(u, v)) for p, u, v in rows]

    def contents(self, conn: Any, paths: Sequence[str]) -> list[tuple[str, bytes, Any]]:
        rows = conn.execute(
            f"SELECT path, contents, updated_at, version FROM {TABLE} "
            f"WHERE path {_IN.format('paths')} AND is_dir = 0 AND kind = 'memory_document'",
            {"paths": json.dumps(paths)},
        ).fetchall()
        return [(p, blob(data), token(u, v)) for p, data, u, v in rows]

    def by_hash(self, conn: Any, doc: str, versions: str, digest: str) -> list[tuple[bytes, str]]:
        """SQLite has no SHA-256: the document row is hashed here."""
        rows = conn.execute(
            f"SELECT contents, kind FROM {TABLE} WHERE (path = :doc "
            "AND kind = 'memory_document') OR (path >= :p || '/' AND path < :p || '0' "
            "AND kind = 'memory_document_version' AND instr(contents, :hash) > 0)",
            {"doc": doc, "p": versions, "hash": digest.encode("utf-8")},
        ).fetchall()
        found = []
        for data, kind in rows:
            if kind == layout.DOCUMENT_KIND and bytes_hash(blob(data)) != digest:
                continue
            found.append((blob(data), kind))
        return found

    def __init__(
        self, file: LibsqlFile, deleted: DeletedFile | None = None, *,
        move_limit: int = MOVE_LIMIT,
    ) -> None:  # fmt: skip
        #: Where deleted documents are kept (``memfs.db.libsql.kept``; None: not kept).
        self.deleted = deleted
        #: Documents a transaction removes or moves at most (``RebornRows.move_limit``).
        self.move_limit: int | None = move_limit
        #: Moves in parts are noted in the file deleted documents are kept in.
        self.move_log: PartsLog | None = deleted
        #: The file, whose count of this process's own commits joins ``data_version``
        #: (which moves with other connections' commits only).
        self.file = file
        #: The last fingerprint per (connection, scope), with the connection's
        #: ``data_version`` and the process's commit count when it was taken.
        self._fingerprints: dict[tuple[int, str], tuple[tuple[int, int], tuple[int, str]]] = {}

    # -- what ``memfs doctor`` reads and mends ----------------------------------------------

    def file_rows(self, conn: Any, prefix: str) -> list[tuple[str, str | None, bytes]]:
        rows = conn.execute(
            f"SELECT path, kind, contents FROM {TABLE} WHERE {BELOW} AND is_dir = 0 ORDER BY path",
            {"p": prefix},
        ).fetchall()
        return [(path, kind, blob(data)) for path, kind, data in rows]

    def delete_chunk_rows(self, conn: Any, paths: Sequence[str]) -> int:
        return int(conn.execute(
            f"DELETE FROM {TABLE} WHERE path {_IN.format('paths')} AND kind = 'memory_chunk'",
            {"paths": json.dumps(list(paths))},
        ).rowcount)  # fmt: skip

    def orphan_attrs(self, conn: Any, prefix: str, *, delete: bool) -> int:
        where = (
            f"FROM memfs.reborn_attrs WHERE path >= :p || '/' AND path < :p || '0' "
            f"AND NOT EXISTS (SELECT 1 FROM {TABLE} e WHERE e.path = memfs.reborn_attrs.path)"
        )
        if delete:
            return int(conn.execute(f"DELETE {where}", {"p": prefix}).rowcount)
        row = conn.execute(f"SELECT count(*) {where}", {"p": prefix}).fetchone()
        return int(row[0]) if row else 0

    def invalid_indexes(self, pool: Any) -> list[str]:
        return []  # SQLite has no index left half-built (no concurrent index builds)

    def fingerprint(self, conn: Any, prefix: str) -> tuple[int, str]:
        """Taken again only when ``PRAGMA data_version`` says another connection committed
        since (IronClaw's heartbeats and journals move it too), or this process did (a
        connection's own commits do not move its ``data_version``)."""
        version = (int(conn.execute("PRAGMA data_version").fetchone()[0]), self.file.commits)
        cached = self._fingerprints.get((id(conn), prefix))
        if cached is not None and cached[0] == version:
            return cached[1]
        found = self._scope_fingerprint(conn, prefix)
        self._fingerprints[(id(conn), prefix)] = (version, found)
        return found

    def _scope_fingerprint(self, conn: Any, prefix: str) -> tuple[int, str]:
        """SQLite's own aggregates (no function of Python's per row: at 100,000 documents
        that cost 0.3 s a poll): the count, the sums of versions, path lengths and rowids,
        and the latest ``updated_at``.  An insert or update moves the latest time or a
        version sum, a delete the count; all of them stay put only if, within the
        millisecond of the latest write, one document went and another of the same version,
        path length and rowid came."""
        row = conn.execute(
            "SELECT count(*), total(version), max(updated_at), total(length(path)), "
            f"total(rowid) FROM {TABLE} WHERE {BELOW} AND kind = 'memory_document'",
            {"p": prefix},
        ).fetchone()
        if row is None:
            return (0, "0")
        return (int(row[0]), "|".join(repr(value) for value in row[1:]))

    def lock_row(self, conn: Any, path: str) -> Answer:
        row = conn.execute(
            f"SELECT contents, version, updated_at, is_dir, kind FROM {TABLE} WHERE path = ?",
            (path,),
        ).fetchone()
        if row is None:
            return answers([])
        data, version, updated, is_dir, kind = row
        return answers([(blob(data), version, token(updated, version), bool(is_dir), kind)])

    def blocker(self, conn: Any, path: str, ancestors: Sequence[str]) -> Answer:
        return answers(conn.execute(
            f"SELECT path FROM {TABLE} WHERE {BELOW} OR (path {_IN.format('up')} "
            "AND is_dir = 0 AND kind = 'memory_document') LIMIT 1",
            {"p": path, "up": json.dumps(ancestors)},
        ).fetchall())  # fmt: skip

    def taken(self, conn: Any, path: str) -> Answer:
        return answers(
            conn.execute(
                f"SELECT 1 FROM {TABLE} WHERE {AT_OR_BELOW} LIMIT 1", {"p": path}
            ).fetchall()
        )

    def rows_at(self, conn: Any, paths: Sequence[str]) -> Answer:
        rows = conn.execute(
            f"SELECT path, contents FROM {TABLE} WHERE path {_IN.format('paths')} AND is_dir = 0",
            {"paths": json.dumps(paths)},
        ).fetchall()
        return answers([(p, blob(data)) for p, data in rows])

    def chunked(self, conn: Any, docs: Sequence[str]) -> Answer:
        return answers(conn.execute(
            f"SELECT j.value FROM json_each(:docs) j WHERE EXISTS (SELECT 1 FROM {TABLE} t "
            "WHERE t.path >= j.value || '.chunks/' AND t.path < j.value || '.chunks0')",
            {"docs": json.dumps(docs)},
        ).fetchall())  # fmt: skip

    def lock_documents(self, conn: Any, paths: Sequence[str]) -> Answer:
        rows = conn.execute(
            f"SELECT path, updated_at, version FROM {TABLE} WHERE path {_IN.format('paths')} "
            "AND kind = 'memory_document' AND is_dir = 0 ORDER BY path",
            {"paths": json.dumps(paths)},
        ).fetchall()
        return answers([(p, token(u, v)) for p, u, v in rows])

    def lock_folder(
        self, conn: Any, old: str, new: str, replaced: str | None
    ) -> list[tuple[Any, ...]]:
        """The write lock is held since ``BEGIN IMMEDIATE``: moves take turns."""
        taken = conn.execute(
            f"SELECT EXISTS (SELECT 1 FROM {TABLE} WHERE {AT_OR_BELOW}) OR EXISTS (SELECT 1 "
            "FROM memfs.reborn_directories WHERE (path = :p AND path IS NOT :replaced) "
            "OR (path >= :p || '/' AND path < :p || '0'))",
            {"p": new, "replaced": replaced},
        ).fetchone()[0]
        rows = conn.execute(
            f"SELECT path, updated_at, version FROM {TABLE} WHERE path >= :old || '/' "
            "AND path < :old || '0' AND kind = 'memory_document' AND is_dir = 0 ORDER BY path",
            {"old": old},
        ).fetchall()
        if not rows:
            return [(bool(taken), None, None)]
        return [(bool(taken), p, token(u, v)) for p, u, v in rows]

    def locked_contents(self, conn: Any, path: str) -> bytes | None:
        row = conn.execute(
            f"SELECT contents FROM {TABLE} WHERE path = ? AND is_dir = 0 "
            "AND kind = 'memory_document'",
            (path,),
        ).fetchone()
        return blob(row[0]) if row is not None else None

    def row_kind(self, conn: Any, path: str) -> tuple[bytes, bool, str | None] | None:
        row = conn.execute(
            f"SELECT contents, is_dir, kind FROM {TABLE} WHERE path = ?", (path,)
        ).fetchone()
        return (blob(row[0]), bool(row[1]), row[2]) if row is not None else None

    def version_rows(self, conn: Any, paths: Sequence[str]) -> list[tuple[str, bytes, Any]]:
        rows = conn.execute(
            f"SELECT t.path, t.contents, t.created_at FROM json_each(:v) m JOIN {TABLE} t "
            "ON t.path >= m.value || '/' AND t.path < m.value || '0' "
            "AND t.kind = 'memory_document_version' ORDER BY t.path",
            {"v": json.dumps(paths)},
        ).fetchall()
        return [(path, blob(data), parse_time(created)) for path, data, created in rows]

    # -- writes ----------------------------------------------------------------------------

    def insert(self, conn: Any, record: Record) -> Answer:
        row = conn.execute(
            f"INSERT INTO {TABLE} (path, contents, content_type, kind, indexed, version, "
            f"updated_at) VALUES (?, ?, ?, ?, ?, ?, {NOW}) RETURNING updated_at, version",
            (record.path, record.contents, record.content_type, record.kind, record.indexed,
             record.version),
        ).fetchone()  # fmt: skip
        return answers([(token(row[0], row[1]),)])

    def insert_many(self, conn: Any, records: Sequence[Record]) -> None:
        conn.executemany(
            f"INSERT INTO {TABLE} (path, contents, content_type, kind, indexed, version, "
            f"created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, COALESCE(?, {NOW}), "
            f"COALESCE(?, {NOW}))",
            [(r.path, r.contents, r.content_type, r.kind, r.indexed, r.version,
              _text(r.created_at), _text(r.updated_at)) for r in records],
        )  # fmt: skip

    def update(self, conn: Any, record: Record, version: int, below: str) -> Answer:
        row = conn.execute(
            f"UPDATE {TABLE} SET contents = :data, content_type = :type, kind = :kind, "
            f"indexed = :indexed, version = version + 1, updated_at = {NOW} "
            "WHERE path = :path AND is_dir = 0 AND version = :v "
            f"AND NOT EXISTS (SELECT 1 FROM {TABLE} WHERE {BELOW}) "
            "RETURNING updated_at, version",
            {"path": record.path, "p": below, "data": record.contents,
             "type": record.content_type, "kind": record.kind, "indexed": record.indexed,
             "v": version},
        ).fetchone()  # fmt: skip
        if row is None:
            raise GuardFailed(f"path (it has rows below it) {record.path}")
        return answers([(token(row[0], row[1]),)])

    def insert_version(self, conn: Any, below: str, record: Record) -> Answer:
        """The number is found here (the write lock is held): IronClaw's JSON text of the
        keys with ``version`` among them, sorted, as its serde_json writes them."""
        number = self._highest_version(conn, below) + 1
        indexed = layout.dumps({**json.loads(record.indexed), "version": number})
        self.insert(conn, record._replace(path=f"{below}/{number}", indexed=indexed))
        return answers([(number,)])

    def write_attrs(self, conn: Any, path: str, attrs: FileAttrs, against: Any) -> None:
        """Set against the row as this transaction leaves it (``against`` is always None
        on this layout: attributes follow a write of the row)."""
        self.set_attrs(conn, path, attrs)

    def set_attrs(self, conn: Any, path: str, attrs: FileAttrs) -> Answer:
        found = conn.execute(
            f"SELECT {_STATE} FROM {TABLE} e WHERE e.path = ? AND e.kind = 'memory_document'",
            (path,),
        ).fetchall()
        if attrs.empty or not found:
            conn.execute("DELETE FROM memfs.reborn_attrs WHERE path = ?", (path,))
        else:
            conn.execute(
                "INSERT OR REPLACE INTO memfs.reborn_attrs (path, mode, mtime_ns, set_against) "
                "VALUES (?, ?, ?, ?)",
                (path, attrs.mode, attrs.mtime_ns, found[0][0]),
            )
        return answers(found)

    @staticmethod
    def _highest_version(conn: Any, below: str) -> int:
        """The highest version number among the version rows below ``below`` (0: none)."""
        row = conn.execute(
            "SELECT COALESCE(max(CAST(json_extract(indexed, '$.version') AS INTEGER)), 0) "
            f"FROM {TABLE} WHERE {BELOW} AND kind = 'memory_document_version'",
            {"p": below},
        ).fetchone()
        return int(row[0])

    def carry_versions(
        self, conn: Any, source: Family, target: str, relative: str, seen: Any
    ) -> None:
        at, extra = _seen(seen)
        there = conn.execute(
            f"SELECT 1 FROM {TABLE} WHERE path = :doc AND kind = 'memory_document' AND {_GUARD}",
            {"doc": source.doc, "at": at, "extra": extra},
        ).fetchone()
        if there is None:
            return  # another writer changed the source: it stays, with its history
        offset = self._highest_version(conn, target)
        carried = conn.execute(
            f"SELECT path, indexed FROM {TABLE} WHERE {BELOW} AND kind = 'memory_document_version'",
            {"p": source.versions},
        ).fetchall()
        for path, indexed in carried:
            keys = json.loads(indexed)
            number = int(keys.get("version", 0)) + offset
            keys.update(version=number, doc_relative_path=relative)
            conn.execute(
                f"UPDATE {TABLE} SET path = ?, indexed = ?, version = version + 1, "
                f"updated_at = {NOW} WHERE path = ?",
                (f"{target}/{number}", layout.dumps(keys), path),
            )

    def keep_family(self, conn: Any, family: Family, seen: Any, keep: KeepAs) -> None:
        if self.deleted is not None:
            at, extra = _seen(seen)
            self.deleted.keep_row(conn, family, (_GUARD, {"at": at, "extra": extra}), keep)

    def delete_family(self, conn: Any, family: Family, seen: Any) -> Answer:
        at, extra = _seen(seen)
        guard = _GUARD
        gone = conn.execute(
            f"DELETE FROM {TABLE} WHERE path = :doc AND kind = 'memory_document' AND is_dir = 0 "
            f"AND {guard} RETURNING path",
            {"doc": family.doc, "at": at, "extra": extra},
        ).fetchall()
        if gone:
            conn.execute(
                f"DELETE FROM {TABLE} WHERE path = :meta OR (path >= :chunks || '/' AND "
                "path < :chunks || '0' AND kind = 'memory_chunk') OR (path >= :versions || '/' "
                "AND path < :versions || '0' AND kind = 'memory_document_version')",
                family._asdict(),
            )
            conn.execute("DELETE FROM memfs.reborn_attrs WHERE path = ?", (family.doc,))
        still = conn.execute(
            f"SELECT count(*) FROM {TABLE} WHERE path = ? AND kind = 'memory_document'",
            (family.doc,),
        ).fetchone()[0]
        return answers([(len(gone), still)])

    def note_moves(self, conn: Any, workspace: str, moves: Sequence[tuple[str, str]]) -> None:
        conn.executemany(
            "INSERT INTO memfs.path_history (workspace, old_path, new_path, folder, moved_at) "
            f"VALUES (?, ?, ?, 0, {NOW})",
            [(workspace, old, new) for old, new in moves],
        )

    def note_empty_spell(self, conn: Any, workspace: str, path: str, emptied_at: datetime) -> None:
        when = emptied_at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        conn.execute(
            "INSERT INTO memfs.empty_spells (workspace, path, emptied_at, filled_at) "
            f"VALUES (?, ?, ?, {NOW})",
            (workspace, path, when),
        )

    def move_families(
        self, conn: Any, olds: Sequence[str], news: Sequence[str], relatives: Sequence[str]
    ) -> Answer:
        """Attributes follow the documents, and a move is not an edit: each keeps its mtime
        (its client's, or its ``updated_at`` before the move) and its valid mode, trusted
        against the moved row's state.  Attributes a document deleted behind the mount
        left at a new path are stale and go."""
        moved = []
        for old, new, relative in zip(olds, news, relatives, strict=True):
            kept = conn.execute(
                f"SELECT CASE WHEN a.set_against = {_STATE} THEN a.mode END, "
                f"CASE WHEN a.set_against = {_STATE} THEN a.mtime_ns END, e.updated_at, e.version "
                f"FROM {TABLE} e LEFT JOIN memfs.reborn_attrs a ON a.path = e.path "
                "WHERE e.path = ? AND e.kind = 'memory_document'",
                (old,),
            ).fetchone()
            sidecars = conn.execute(
                f"SELECT path, kind, indexed FROM {TABLE} WHERE path = :old || '.meta' "
                "OR (path >= :old || '.chunks/' AND path < :old || '.chunks0') "
                "OR (path >= :old || '.versions/' AND path < :old || '.versions0')",
                {"old": old},
            ).fetchall()
            for path, kind, keys in sidecars:
                indexed = keys
                if kind in (layout.CHUNK_KIND, layout.VERSION_KIND):
                    # IronClaw's JSON text, re-made as its serde_json writes it.
                    indexed = layout.dumps({**json.loads(keys), "doc_relative_path": relative})
                conn.execute(
                    f"UPDATE {TABLE} SET path = ?, indexed = ?, version = version + 1, "
                    f"updated_at = {NOW} WHERE path = ?",
                    (new + path[len(old) :], indexed, path),
                )
            row = conn.execute(
                f"UPDATE {TABLE} SET path = ?, version = version + 1, updated_at = {NOW} "
                "WHERE path = ? AND kind = 'memory_document' RETURNING path, updated_at, version",
                (new, old),
            ).fetchone()
            conn.execute("DELETE FROM memfs.reborn_attrs WHERE path IN (?, ?)", (old, new))
            if row is not None:
                moved.append((row[0], token(row[1], row[2])))
                if kept is not None:
                    mode, mtime, before, version = kept
                    shown = (token(before, version) - _EPOCH) // timedelta(microseconds=1) * 1000
                    conn.execute(
                        "INSERT INTO memfs.reborn_attrs (path, mode, mtime_ns, set_against) "
                        "VALUES (?, ?, ?, ?)",
                        (new, mode, shown if mtime is None else mtime, f"{row[1]}|{row[2]}"),
                    )
        return answers(moved)

    def keep_directories(self, conn: Any, paths: Sequence[str]) -> None:
        conn.executemany(
            "INSERT OR IGNORE INTO memfs.reborn_directories (path) VALUES (?)",
            [(p,) for p in paths],
        )
