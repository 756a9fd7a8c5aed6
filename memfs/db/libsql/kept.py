"""What memfs keeps beside IronClaw's libSQL file: deleted documents with their versions,
and every move, for ``memfs undelete`` and ``.at/``.

Deleted documents go to a file of their own, ``<file>.memfs-deleted`` (0600), through a
connection of their own, committed (``synchronous = FULL``) while the deleting transaction
is still open: IronClaw's file and an attached one do not commit atomically in WAL mode,
and a write transaction on a connection locks every file attached to it, so the copy
cannot share the delete's transaction and must not follow it.  A copy whose delete then
did not commit (another writer changed the row, the process died) is told apart by the
row it was taken from still being there at the same ``updated_at`` and ``version``.
Moves are recorded in the delete-less way, in the same transaction, in memfs's attached
file (``memfs.path_history``): losing one to a crash misplaces a document in ``.at/``,
never loses it.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memfs.db.capabilities import Deletion, EmptySpell, KeptDocument, Move, SaverCopy
from memfs.db.kept_store import AGED_BY, past_versions
from memfs.db.libsql.connection import LibsqlFile, blob, sqlite_uri
from memfs.db.libsql.row_times import NOW, TABLE, parse_time
from memfs.db.reborn.rows import Family, KeepAs

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS deleted_documents (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "workspace TEXT NOT NULL, path TEXT NOT NULL, content TEXT NOT NULL, created_at TEXT, "
    "updated_at TEXT, versions TEXT NOT NULL DEFAULT '[]', deleted_at TEXT NOT NULL, "
    "deleted_by TEXT NOT NULL, row_path TEXT, row_state TEXT)",
    "CREATE INDEX IF NOT EXISTS deleted_documents_by_path "
    "ON deleted_documents (workspace, path, deleted_at)",
    "CREATE TABLE IF NOT EXISTS folder_moves (workspace TEXT NOT NULL, old_path TEXT NOT NULL, "
    "new_path TEXT NOT NULL, begun_at TEXT NOT NULL, PRIMARY KEY (workspace, old_path, new_path))",
    # A writer's bytes as saved where the stored content is not them (a merge): the
    # safety net under the merge rule, never a row of IronClaw's file.
    "CREATE TABLE IF NOT EXISTS saver_copies (id INTEGER PRIMARY KEY AUTOINCREMENT, "
    "workspace TEXT NOT NULL, path TEXT NOT NULL, reason TEXT NOT NULL, content BLOB NOT NULL, "
    "kept_at TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS saver_copies_by_path ON saver_copies (workspace, path, kept_at)",
    "CREATE TABLE IF NOT EXISTS removals_begun (workspace TEXT NOT NULL, key TEXT NOT NULL, "
    "path TEXT NOT NULL, seen TEXT, begun_at TEXT NOT NULL, PRIMARY KEY (workspace, key))",
)
#: memfs's tables of the ``.memfs-deleted`` file beside IronClaw's; the rest of what
#: ``AGED_BY`` names lives in the ``memfs`` schema of IronClaw's file itself.
_DELETED_FILE_TABLES = frozenset({"deleted_documents", "saver_copies"})
_DELETION = (
    "id, path, created_at, updated_at, deleted_at, deleted_by, length(CAST(content AS BLOB))"
)


def deleted_file(ironclaw_file: Path) -> Path:
    return ironclaw_file.with_name(ironclaw_file.name + ".memfs-deleted")


class DeletedFile:
    """``<file>.memfs-deleted``: one connection per thread, never the mount's own."""

    def __init__(self, ironclaw_file: Path, *, read_only: bool = False) -> None:
        self.path = deleted_file(ironclaw_file)
        self.read_only = read_only
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()

    def connection(self) -> sqlite3.Connection | None:
        """This thread's connection (None: read-only and no file yet)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn
        if not self.path.exists():
            if self.read_only:
                return None
            with contextlib.suppress(FileExistsError):
                os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        conn = sqlite3.connect(
            sqlite_uri(self.path, read_only=self.read_only), uri=True, isolation_level=None,
            check_same_thread=False, timeout=15.0,
        )  # fmt: skip
        if not self.read_only:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = FULL")
            for statement in _SCHEMA:
                conn.execute(statement)
        self._local.conn = conn
        with self._lock:
            self._all.append(conn)
        return conn

    def keep(self, values: dict[str, Any]) -> None:
        """One deleted document, committed durably now."""
        self.keep_all([values])

    def keep_all(self, documents: list[dict[str, Any]]) -> None:
        """Deleted documents, committed durably now in one transaction (one sync)."""
        if not documents:
            return
        self._commit_many(
            "INSERT INTO deleted_documents (workspace, path, content, created_at, "
            "updated_at, versions, deleted_at, deleted_by, row_path, row_state) VALUES "
            "(:workspace, :path, :content, :created_at, :updated_at, :versions, "
            f"{NOW}, 'mount', :row_path, :row_state)",
            documents,
        )

    def commit_one(self, statement: str, row: Sequence[Any]) -> None:
        """``statement`` once, durable on return."""
        self._commit_many(statement, [row])

    def _commit_many(self, statement: str, rows: Sequence[Any]) -> None:
        """``statement`` for each of ``rows`` in one transaction, durable on return
        (``synchronous = FULL``)."""
        conn = self.connection()
        assert conn is not None
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(statement, rows)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # -- folder moves in parts (``PartsLog``) ------------------------------------------

    def moves_begun(self, workspace: str) -> list[tuple[str, str]]:
        conn = self.connection()
        if conn is None:
            return []
        return [(old, new) for old, new in conn.execute(
            "SELECT old_path, new_path FROM folder_moves WHERE workspace = ? ORDER BY begun_at",
            (workspace,),
        ).fetchall()]  # fmt: skip

    def begin_move(self, workspace: str, old: str, new: str) -> None:
        conn = self.connection()
        assert conn is not None
        conn.execute(  # autocommit, synchronous = FULL: durable on return
            f"INSERT OR IGNORE INTO folder_moves VALUES (?, ?, ?, {NOW})", (workspace, old, new)
        )

    def end_move(self, workspace: str, old: str, new: str) -> None:
        conn = self.connection()
        assert conn is not None
        conn.execute(
            "DELETE FROM folder_moves WHERE workspace = ? AND old_path = ? AND new_path = ?",
            (workspace, old, new),
        )

    # -- removals in parts (``PartsLog``) ----------------------------------------------------

    def removals_begun(self, workspace: str) -> list[tuple[str, str, str | None]]:
        conn = self.connection()
        if conn is None:
            return []
        return [(key, path, seen) for key, path, seen in conn.execute(
            "SELECT key, path, seen FROM removals_begun WHERE workspace = ? "
            "ORDER BY begun_at, path", (workspace,),
        ).fetchall()]  # fmt: skip

    def begin_removals(self, workspace: str, removals: list[tuple[str, str, str | None]]) -> None:
        self._commit_many(
            f"INSERT OR REPLACE INTO removals_begun VALUES (?, ?, ?, ?, {NOW})",
            [(workspace, key, path, seen) for key, path, seen in removals],
        )

    def end_removals(self, workspace: str, keys: list[str]) -> None:
        self._commit_many(
            "DELETE FROM removals_begun WHERE workspace = ? AND key = ?",
            [(workspace, key) for key in keys],
        )

    def keep_row(
        self, conn: sqlite3.Connection, family: Family, guard: tuple[str, dict[str, Any]],
        keep: KeepAs,
    ) -> None:  # fmt: skip
        """Keep the document of ``family`` (if the SQL ``guard`` holds, with its
        parameters) with its versions, before the transaction on ``conn`` deletes it
        (``SqliteRows.delete_family``)."""
        doc, versions = family.doc, family.versions
        (condition, params), workspace, relative = guard, keep.workspace, keep.relative
        row = conn.execute(
            f"SELECT contents, created_at, updated_at, version FROM {TABLE} WHERE path = :doc "
            f"AND kind = 'memory_document' AND is_dir = 0 AND {condition}",
            {**params, "doc": doc},
        ).fetchone()
        if row is None:
            return
        kept = []
        for number, body, created in conn.execute(
            f"SELECT CAST(json_extract(indexed, '$.version') AS INTEGER), contents, created_at "
            f"FROM {TABLE} WHERE path >= :v || '/' AND path < :v || '0' "
            "AND kind = 'memory_document_version' ORDER BY 1",
            {"v": versions},
        ).fetchall():
            try:
                parsed = json.loads(blob(body))
            except ValueError:
                continue
            if isinstance(parsed, dict):
                kept.append({"version": number, "content": parsed.get("content") or "",
                             "changed_by": parsed.get("changed_by"),
                             "created_at": parse_time(created).isoformat()})  # fmt: skip
        self.keep({
            "workspace": workspace, "path": relative,
            "content": blob(row[0]).decode("utf-8", errors="replace"),
            "created_at": row[1], "updated_at": row[2], "versions": json.dumps(kept),
            "row_path": doc, "row_state": f"{row[2]}|{row[3]}",
        })  # fmt: skip

    def close(self) -> None:
        with self._lock:
            conns, self._all = self._all, []
        for conn in conns:
            with contextlib.suppress(sqlite3.Error):
                conn.close()


def _time(value: str | None) -> datetime | None:
    return parse_time(value) if value else None


#: A kept copy's row still there as it was (its delete did not commit): the Reborn layout
#: keeps a row's path and ``updated_at|version``.
REBORN_UNDONE = (
    f"SELECT 1 FROM {TABLE} WHERE path = ? AND kind = 'memory_document' "
    "AND updated_at || '|' || version = ?"
)
#: The same in the legacy layout: a row's id and ``updated_at|byte length % 1000``
#: (``memfs.db.legacy.libsql.writes``).
LEGACY_UNDONE = (
    "SELECT 1 FROM memory_documents WHERE id = ? "
    "AND updated_at || '|' || (length(CAST(content AS BLOB)) % 1000) = ?"
)


class LibsqlKeptStore:
    """``KeptHistory`` of one workspace of IronClaw's libSQL file."""

    def __init__(
        self, file: LibsqlFile, deleted: DeletedFile, workspace: str, *,
        undone: str = REBORN_UNDONE,
    ) -> None:  # fmt: skip
        self.file = file
        self.deleted = deleted
        self.workspace = workspace
        #: The query telling a copy whose delete did not commit (``_undone``).
        self.undone = undone

    def start(self) -> datetime:
        def work(conn: sqlite3.Connection) -> str:
            conn.execute(
                "INSERT OR IGNORE INTO memfs.history_start (workspace, started_at) "
                f"VALUES (?, {NOW})",
                (self.workspace,),
            )
            row = conn.execute(
                "SELECT started_at FROM memfs.history_start WHERE workspace = ?",
                (self.workspace,),
            ).fetchone()
            return str(row[0])

        return parse_time(self.file.write(work))

    def _rows(self, sql: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        conn = self.deleted.connection()
        return conn.execute(sql, params).fetchall() if conn is not None else []

    def _undone(self, row_path: str | None, row_state: str | None) -> bool:
        """A copy whose delete did not commit: its row is still there, unchanged."""
        if not row_path or not row_state:
            return False
        found = self.file.read(lambda c: c.execute(self.undone, (row_path, row_state)).fetchone())
        return found is not None

    @staticmethod
    def _deletion(row: tuple[Any, ...]) -> Deletion:
        return Deletion(int(row[0]), row[1], _time(row[2]), _time(row[3]),
                        parse_time(row[4]), row[5], int(row[6] or 0))  # fmt: skip

    def deletions(self, path: str | None = None) -> list[Deletion]:
        rows = self._rows(
            f"SELECT {_DELETION}, row_path, row_state FROM deleted_documents "
            "WHERE workspace = ? AND (? IS NULL OR path = ?) ORDER BY deleted_at, id",
            (self.workspace, path, path),
        )
        return [self._deletion(r[:7]) for r in rows if not self._undone(r[7], r[8])]

    def kept_document(self, deletion_id: int) -> KeptDocument | None:
        rows = self._rows(
            f"SELECT {_DELETION}, content, versions, row_path, row_state "
            "FROM deleted_documents WHERE workspace = ? AND id = ?",
            (self.workspace, deletion_id),
        )
        if not rows or self._undone(rows[0][9], rows[0][10]):
            return None
        row = rows[0]
        return KeptDocument(self._deletion(row[:7]), row[7], past_versions(row[8]))

    def forget(self, deletion_id: int) -> None:
        conn = self.deleted.connection()
        if conn is not None:
            conn.execute(
                "DELETE FROM deleted_documents WHERE workspace = ? AND id = ?",
                (self.workspace, deletion_id),
            )

    def moves(self, after: datetime) -> list[Move]:
        since = after.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        rows = self.file.read(lambda c: c.execute(
            "SELECT old_path, new_path, folder, moved_at FROM memfs.path_history "
            "WHERE workspace = ? AND moved_at > ? ORDER BY moved_at, rowid",
            (self.workspace, since),
        ).fetchall())  # fmt: skip
        return [Move(old, new, bool(folder), parse_time(at)) for old, new, folder, at in rows]

    def empty_spells(self, at: datetime) -> list[EmptySpell]:
        when = at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        rows = self.file.read(lambda c: c.execute(
            "SELECT path, emptied_at, filled_at FROM memfs.empty_spells "
            "WHERE workspace = ? AND filled_at > ? AND emptied_at <= ? ORDER BY filled_at, rowid",
            (self.workspace, when, when),
        ).fetchall())  # fmt: skip
        return [EmptySpell(path, parse_time(emptied), parse_time(filled))
                for path, emptied, filled in rows]  # fmt: skip

    def keep_saver_copy(self, path: str, data: bytes, reason: str) -> None:
        self.deleted.commit_one(
            "INSERT INTO saver_copies (workspace, path, reason, content, kept_at) "
            f"VALUES (?, ?, ?, ?, {NOW})",
            (self.workspace, path, reason, data),
        )

    def saver_copies(self, path: str) -> list[SaverCopy]:
        rows = self._rows(
            "SELECT id, path, kept_at, reason, length(content) FROM saver_copies "
            "WHERE workspace = ? AND path = ? ORDER BY kept_at, id",
            (self.workspace, path),
        )
        return [SaverCopy(int(r[0]), r[1], parse_time(r[2]), r[3], int(r[4])) for r in rows]

    def saver_copy(self, copy_id: int) -> bytes | None:
        rows = self._rows(
            "SELECT content FROM saver_copies WHERE workspace = ? AND id = ?",
            (self.workspace, copy_id),
        )
        return bytes(rows[0][0]) if rows else None

    def purge(self, before: datetime) -> int:
        cut = before.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"

        def forget(conn: sqlite3.Connection, schema: str, tables: list[tuple[str, str]]) -> int:
            """Forget rows older than the cut, table by table; the first table's count."""
            counts = []
            for table, column in tables:
                statement = f'DELETE FROM {schema}"{table}" WHERE workspace = ? AND "{column}" < ?'
                counts.append(conn.execute(statement, (self.workspace, cut)).rowcount)
            return counts[0] if counts else 0

        aged = list(AGED_BY.items())
        conn = self.deleted.connection()
        beside = [(table, column) for table, column in aged if table in _DELETED_FILE_TABLES]
        gone = forget(conn, "", beside) if conn is not None else 0
        inside = [(table, column) for table, column in aged if table not in _DELETED_FILE_TABLES]
        self.file.write(lambda conn: forget(conn, "memfs.", inside))
        return gone
