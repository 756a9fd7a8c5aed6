"""The storage interface of the Reborn layout: the row operations ``RebornStore``'s rules
are written in, one implementation per database (``postgres``, ``sqlite``).

``RebornStore`` decides what IronClaw would write (paths, versions, chunks, metadata,
guards) once; an engine only says how its database reads and writes those rows.  Paths
here are full row paths (``/memory/tenants/…``); record values are built above
(``Record``), so both engines store the same bytes and JSON.

Answers: a read whose answer the rules need at once returns rows; one that may wait
(PostgreSQL sends it in the transaction's pipeline and reads the answer after the commit)
returns an ``Answer``, whose ``fetchone``/``fetchall`` give the rows when called.  SQLite
answers at once; PostgreSQL's cursors are answers.

Every read-modify-write runs in one transaction of ``open_transaction``: PostgreSQL
locks the rows it reads (``FOR UPDATE``), SQLite takes the write lock at ``BEGIN
IMMEDIATE``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, NamedTuple, Protocol

from memfs.db.deferred import PartsLog
from memfs.db.interface import FileAttrs


class Answer(Protocol):
    """Rows of a statement, read when asked (after the commit on pipelining engines)."""

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Record(NamedTuple):
    """One row as IronClaw writes it; ``indexed`` is IronClaw's JSON text of the keys."""

    path: str
    contents: bytes
    content_type: str
    kind: str | None
    indexed: str
    version: int = 1
    #: None: the time of the write, taken by the database (``memfs migrate`` carries the
    #: source's times instead).
    created_at: datetime | None = None
    updated_at: datetime | None = None


class Family(NamedTuple):
    """A document's row and the ranges of its sidecars (full paths)."""

    doc: str
    meta: str
    chunks: str
    versions: str


class KeepAs(NamedTuple):
    """Where a deleted document is kept (``memfs undelete``, ``.at/``): the workspace's
    key in memfs's tables, and the document's relative path."""

    workspace: str
    relative: str


class RebornRows(Protocol):
    """How one database reads and writes the Reborn rows (see the module docstring)."""

    #: The errors of the engine's database library.
    error: type[Exception]
    #: How many documents one write transaction may remove or move (None: any number; on
    #: SQLite a transaction holds the whole file's write lock, which IronClaw's own writes
    #: wait for 5 s at most).
    move_limit: int | None
    #: Where moves made in several transactions are noted (None: not kept).
    move_log: PartsLog | None

    def read_connection(self, pool: Any) -> AbstractContextManager[Any]:
        """A connection for reads outside any write transaction."""
        ...

    def open_transaction(self, pool: Any) -> AbstractContextManager[Any]:
        """A connection in a write transaction, committed when the block ends."""
        ...

    def plain_transaction(self, pool: Any) -> AbstractContextManager[Any]:
        """A connection in a write transaction whose statements are answered one by one
        (a copy or a rebuild reads as it goes; nothing deferred rides on it)."""
        ...

    def is_refusal(self, exc: Exception) -> bool:
        """Whether ``exc`` is the database refusing data (not an outage)."""
        ...

    def is_unique_violation(self, exc: Exception) -> bool:
        """Whether ``exc`` is an insert meeting a row another writer made meanwhile."""
        ...

    def guard_failure(self, exc: Exception) -> str | None:
        """The message of a guarded write that found no row to change (None: another
        error)."""
        ...

    # -- reads -----------------------------------------------------------------------------

    def documents(self, conn: Any, prefix: str) -> list[tuple[Any, ...]]:
        """(path, size, created_at, updated_at, mode, mtime_ns) of every document row
        below ``prefix``, with the client attributes set against its current version."""
        ...

    def documents_at(self, conn: Any, paths: Sequence[str]) -> list[tuple[Any, ...]]:
        """The same for the document rows at ``paths``."""
        ...

    def folder_documents(
        self, conn: Any, folder: str, after: str, limit: int
    ) -> list[tuple[str, Any]]:
        """(path, updated_at) of the next ``limit`` document rows below ``folder`` whose
        paths sort after ``after``, in path order (a move in parts)."""
        ...

    def count_documents(self, conn: Any, folder: str) -> int:
        """How many document rows lie below ``folder``."""
        ...

    def versions(self, conn: Any, prefix: str) -> list[tuple[str, Any]]:
        """(path, updated_at) of every document row below ``prefix``, ``updated_at`` as
        ``documents`` gives it (the model's version of the row) and nothing else: what a
        poll compares with what the mount shows before it reads any whole row."""
        ...

    def kinds(self, conn: Any, prefix: str) -> list[tuple[str, str]]:
        """(path, kind) of the document and chunk rows below ``prefix``."""
        ...

    def directories(self, conn: Any, prefix: str) -> list[str]:
        """The kept folders (memfs's own rows) below ``prefix``."""
        ...

    def contents(self, conn: Any, paths: Sequence[str]) -> list[tuple[str, bytes, Any]]:
        """(path, contents, updated_at) of the document rows at ``paths``."""
        ...

    def by_hash(self, conn: Any, doc: str, versions: str, digest: str) -> list[tuple[bytes, str]]:
        """(contents, kind) of the document row at ``doc`` if its content has ``digest``,
        and of the version rows below ``versions`` whose body names it."""
        ...

    def fingerprint(self, conn: Any, prefix: str) -> tuple[int, str]:
        """A value that changes whenever a document row below ``prefix`` does."""
        ...

    def lock_row(self, conn: Any, path: str) -> Answer:
        """(contents, version, updated_at, is_dir, kind) of the row at ``path``, locked."""
        ...

    def blocker(self, conn: Any, path: str, ancestors: Sequence[str]) -> Answer:
        """(path) of a row below ``path`` or a document row at one of ``ancestors``."""
        ...

    def taken(self, conn: Any, path: str) -> Answer:
        """A row if any lies at or below ``path``."""
        ...

    def rows_at(self, conn: Any, paths: Sequence[str]) -> Answer:
        """(path, contents) of the non-directory rows at ``paths``."""
        ...

    def chunked(self, conn: Any, docs: Sequence[str]) -> Answer:
        """(doc) of each of ``docs`` with a row below ``doc.chunks``."""
        ...

    def lock_documents(self, conn: Any, paths: Sequence[str]) -> Answer:
        """(path, updated_at) of the document rows at ``paths``, locked, by path."""
        ...

    def lock_folder(
        self, conn: Any, old: str, new: str, replaced: str | None
    ) -> list[tuple[Any, ...]]:
        """For a folder move: rows (taken, path, updated_at) — whether anything (rows,
        kept folders other than ``replaced``) lies at or below ``new``, and the document
        rows below ``old``, locked (at least one row, path None when there are none).
        Two moves onto one new name wait for each other."""
        ...

    def locked_contents(self, conn: Any, path: str) -> bytes | None:
        """The contents of the document row at ``path``, locked."""
        ...

    def row_kind(self, conn: Any, path: str) -> tuple[bytes, bool, str | None] | None:
        """(contents, is_dir, kind) of the row at ``path``."""
        ...

    def version_rows(self, conn: Any, paths: Sequence[str]) -> list[tuple[str, bytes, Any]]:
        """(path, contents, created_at) of the version rows below each of ``paths``
        (``R.versions``), by path."""
        ...

    def count_kind(self, conn: Any, below: str, kind: str) -> int:
        """How many rows of ``kind`` lie below ``below``."""
        ...

    # -- writes ----------------------------------------------------------------------------

    def insert(self, conn: Any, record: Record) -> Answer:
        """Insert ``record`` (put "absent"); answers (updated_at)."""
        ...

    def insert_many(self, conn: Any, records: Sequence[Record]) -> None:
        """Insert ``records`` (chunks, a copied history)."""
        ...

    def update(self, conn: Any, record: Record, version: int, below: str) -> Answer:
        """Put "version ``version``": ``record``'s columns over the row at its path,
        ``version + 1``, only if nothing lies below it; answers (updated_at) or fails the
        transaction (``guard_failure``)."""
        ...

    def insert_version(self, conn: Any, below: str, record: Record) -> Answer:
        """``record`` at ``below/<n>``, n one more than the highest version number below,
        which the record's ``indexed`` gains as ``version``; answers (n)."""
        ...

    def delete_chunks(self, conn: Any, below: str) -> None:
        """Every chunk row below ``below``."""
        ...

    def write_attrs(self, conn: Any, path: str, attrs: FileAttrs, against: Any) -> None:
        """Client attributes of ``path``, trusted while its row is at ``against`` (None:
        the time this transaction writes)."""
        ...

    def set_attrs(self, conn: Any, path: str, attrs: FileAttrs) -> Answer:
        """Client attributes of the document at ``path`` against its current version;
        answers a row if there is such a document."""
        ...

    def carry_versions(
        self, conn: Any, source: Family, target: str, relative: str, seen: Any
    ) -> None:
        """The version rows of ``source`` moved below ``target``, numbered after the
        target's own, their ``doc_relative_path`` made ``relative``: only if the source's
        row is at ``seen`` (None: any)."""
        ...

    def keep_family(self, conn: Any, family: Family, seen: Any, keep: KeepAs) -> None:
        """Keep the document with its versions in memfs's storage (``memfs undelete``,
        ``.at/``), if its row is at ``seen`` (None: any), before a delete in the same
        transaction removes it: durably before that delete commits."""
        ...

    def delete_family(self, conn: Any, family: Family, seen: Any) -> Answer:
        """The document with its sidecars and attributes, only if its row is at ``seen``
        (None: any); answers (removed, still there)."""
        ...

    def note_moves(self, conn: Any, workspace: str, moves: Sequence[tuple[str, str]]) -> None:
        """Record documents' moves (old relative path, new) for ``.at/``: one statement."""
        ...

    def note_empty_spell(self, conn: Any, workspace: str, path: str, emptied_at: datetime) -> None:
        """Record that the document at ``path`` (relative), filled now, was empty since
        ``emptied_at`` (``KeptHistory.empty_spells``): one statement."""
        ...

    def move_families(
        self, conn: Any, olds: Sequence[str], news: Sequence[str], relatives: Sequence[str]
    ) -> Answer:
        """Documents moved with their sidecars and attributes, sidecars' ``indexed``
        learning the new relative path, every moved row's version up by one; answers
        (new path, updated_at) per document."""
        ...

    # -- what ``memfs doctor`` reads and mends (``memfs.db.reborn.health``) -----------------

    def file_rows(self, conn: Any, prefix: str) -> list[tuple[str, str | None, bytes]]:
        """(full path, kind, contents) of every file row below ``prefix``, by path."""
        ...

    def delete_chunk_rows(self, conn: Any, paths: Sequence[str]) -> int:
        """Delete the chunk rows at ``paths``; how many went."""
        ...

    def orphan_attrs(self, conn: Any, prefix: str, *, delete: bool) -> int:
        """memfs's attribute rows below ``prefix`` whose row is gone (deleted if asked)."""
        ...

    def invalid_indexes(self, pool: Any) -> list[str]:
        """Indexes of IronClaw's table the database does not use ([] where none can be)."""
        ...

    def keep_directories(self, conn: Any, paths: Sequence[str]) -> None: ...

    def drop_directory(self, conn: Any, path: str) -> None: ...

    def move_directories(self, conn: Any, old: str, new: str) -> None:
        """Kept folders at or below ``old`` moved to ``new``."""
        ...


def answers(rows: list[Any]) -> Answer:
    """An answer holding rows already read (engines that answer at once)."""
    return _Rows(rows)


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self._rows: Iterator[Any] = iter(rows)

    def fetchone(self) -> Any:
        return next(self._rows, None)

    def fetchall(self) -> list[Any]:
        return list(self._rows)


_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
TABLE = "root_filesystem_entries"
#: Rows below P (bytewise ranges: '/' is 0x2F, '0' is 0x30), as IronClaw selects.
BELOW = "(path >= :p || '/' AND path < :p || '0')"


@functools.cache  # a few statements, each converted once rather than at every call
def psycopg_named(sql: str) -> str:
    """A statement written with SQLite's named parameters (``:name``) in psycopg's
    (``%(name)s``); a cast (``::text``) is left as it is.  For the shared statements
    only: none holds a ``:`` or a ``%`` in a string literal."""
    return _NAMED.sub(r"%(\1)s", sql)


class SharedRows:
    """The statements both databases run as written: counts and kinds below a path, and
    memfs's own directories table.  They are written once in SQLite's named style;
    ``named`` gives a statement in the database's own (PostgreSQL: ``psycopg_named``)."""

    @staticmethod
    def named(sql: str) -> str:
        return sql

    def count_kind(self, conn: Any, below: str, kind: str) -> int:
        sql = f"SELECT count(*) FROM {TABLE} WHERE {BELOW} AND kind = :kind"
        row = conn.execute(self.named(sql), {"p": below, "kind": kind}).fetchone()
        return int(row[0]) if row is not None else 0

    def count_documents(self, conn: Any, folder: str) -> int:
        sql = (
            f"SELECT count(*) FROM {TABLE} WHERE {BELOW} AND NOT is_dir "
            "AND kind = 'memory_document'"
        )
        row = conn.execute(self.named(sql), {"p": folder}).fetchone()
        return int(row[0]) if row else 0

    def kinds(self, conn: Any, prefix: str) -> list[tuple[str, str]]:
        sql = (
            f"SELECT path, kind FROM {TABLE} WHERE {BELOW} AND NOT is_dir "
            "AND kind IN ('memory_document', 'memory_chunk')"
        )
        return [(path, kind) for path, kind in conn.execute(self.named(sql), {"p": prefix})]

    def directories(self, conn: Any, prefix: str) -> list[str]:
        sql = f"SELECT path FROM memfs.reborn_directories WHERE {BELOW} ORDER BY path"
        return [r[0] for r in conn.execute(self.named(sql), {"p": prefix}).fetchall()]

    def delete_chunks(self, conn: Any, below: str) -> None:
        sql = f"DELETE FROM {TABLE} WHERE {BELOW} AND kind = 'memory_chunk'"
        conn.execute(self.named(sql), {"p": below})

    def drop_directory(self, conn: Any, path: str) -> None:
        sql = "DELETE FROM memfs.reborn_directories WHERE path = :path"
        conn.execute(self.named(sql), {"path": path})

    def move_directories(self, conn: Any, old: str, new: str) -> None:
        sql = (
            "UPDATE memfs.reborn_directories SET path = :new || substr(path, :cut) "
            "WHERE path = :old OR (path >= :old || '/' AND path < :old || '0')"
        )
        conn.execute(self.named(sql), {"new": new, "old": old, "cut": len(old) + 1})
