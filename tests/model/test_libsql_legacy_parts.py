"""Folder moves and removals too large for one transaction of IronClaw's legacy libSQL
file (with its vector index: every write through IronClaw's libSQL engine's process).

A write transaction holds the whole file's lock and IronClaw's writers wait 5 s at most:
a folder of many documents moves ``MOVE_LIMIT`` documents per transaction, noted in
memfs's move log first (a mount stopped halfway finishes the move at its next start), and
``rm -rf`` removes at most that many per transaction.  The limit is made 3 here, so a
folder of 10 documents shows every part.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memfs.config import Settings
from memfs.db import open_libsql
from memfs.db.deferred import Delete, MoveDir
from memfs.db.interface import FileAttrs
from memfs.db.legacy.libsql import writes as legacy_writes
from memfs.db.legacy.libsql.writes import LegacyLibsqlWriter
from memfs.db.libsql.database import LibsqlDatabase
from tests.ironclaw_libsql import (
    legacy_ironclaw_db,
    legacy_vector_index,
    legacy_write_by_libsql,
    libsql_statements,
)


class Opened:
    """The legacy workspace as a mount opens it, its write transactions counted with the
    documents each moved or removed."""

    def __init__(self, file: Path) -> None:
        self.database: LibsqlDatabase = open_libsql(file)
        settings = Settings(user_id="default")
        settings.given.add("user_id")
        store = self.database.workspace(settings).documents
        assert isinstance(store, LegacyLibsqlWriter)
        self.store = store
        self.changed: dict[int, int] = {}
        #: Called before the BEGIN of each write transaction, with its number.
        self.before_begin: Callable[[int], None] = lambda n: None
        self._transactions = 0
        begin, moves, deletes = (self.database.file.transaction, store._move_rows,
                                 store._delete_rows)  # fmt: skip

        def transaction() -> Any:
            self._transactions += 1
            self.before_begin(self._transactions)
            return begin()

        def counted_moves(conn: Any, move: Any, rows: Any) -> Any:
            self._count(len(rows))
            return moves(conn, move, rows)

        def counted_deletes(conn: Any, batch: Any, **kwargs: Any) -> Any:
            self._count(len(batch))
            return deletes(conn, batch, **kwargs)

        self.database.file.transaction = transaction  # type: ignore[method-assign]
        store._move_rows = counted_moves  # type: ignore[method-assign]
        store._delete_rows = counted_deletes  # type: ignore[method-assign]

    def _count(self, documents: int) -> None:
        if documents:
            self.changed[self._transactions] = self.changed.get(self._transactions, 0) + documents

    @property
    def per_transaction(self) -> list[int]:
        return list(self.changed.values())

    def close(self) -> None:
        self.database.close()


@pytest.fixture
def file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(legacy_writes, "MOVE_LIMIT", 3)
    return legacy_vector_index(legacy_ironclaw_db(tmp_path / "ironclaw.db"), 4)


@pytest.fixture
def opened(file: Path) -> Iterator[Opened]:
    store = Opened(file)
    yield store
    store.close()


def paths(file: Path) -> list[str]:
    with sqlite3.connect(f"file:{file}?mode=ro", uri=True) as conn:
        return [r[0] for r in conn.execute("SELECT path FROM memory_documents ORDER BY path")]


def moves_begun(file: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(f"{file}.memfs-deleted") as conn:
        return conn.execute("SELECT old_path, new_path FROM folder_moves").fetchall()


def fill(store: LegacyLibsqlWriter, folder: str, count: int) -> None:
    store.commit_documents(
        [(None, f"{folder}/n{i:02d}.md", f"note {i}\n", FileAttrs()) for i in range(count)]
    )


def test_a_large_folder_moves_a_few_documents_per_transaction(opened: Opened, file: Path) -> None:
    fill(opened.store, "big", 10)
    opened.store.create_directory("big/empty")
    opened.changed.clear()
    moved = opened.store.rename_directory("big", "moved", None)
    assert opened.per_transaction == [3, 3, 3, 1]
    assert len(moved) == 10
    assert paths(file) == [f"moved/n{i:02d}.md" for i in range(10)]
    assert opened.store.load_directories() == ["moved/empty"]
    assert moves_begun(file) == []
    (check,) = libsql_statements(file, ("PRAGMA integrity_check", ()))
    assert check == [["ok"]]


def test_a_small_folder_moves_in_one_transaction(opened: Opened, file: Path) -> None:
    fill(opened.store, "small", 3)
    opened.changed.clear()
    opened.store.rename_directory("small", "other", None)
    assert opened.per_transaction == [3]


def test_a_move_stopped_halfway_is_finished_by_the_next_start(opened: Opened, file: Path) -> None:
    fill(opened.store, "big", 10)

    def stop(n: int) -> None:
        if n == opened._transactions and len(opened.changed) == 2:
            raise KeyboardInterrupt  # the process stops between two parts

    opened.before_begin = stop
    with pytest.raises(KeyboardInterrupt):
        opened.store.rename_directory("big", "moved", None)
    half = paths(file)
    assert sum(p.startswith("moved/") for p in half) == 6 and len(half) == 10
    assert moves_begun(file) == [("big", "moved")]
    opened.close()
    again = Opened(file)
    try:
        listed = sorted(r.path for r in again.store.load_documents())
        assert listed == [f"moved/n{i:02d}.md" for i in range(10)]
        assert again.per_transaction == [3, 1]
        assert moves_begun(file) == []
    finally:
        again.close()


def test_another_writer_s_document_at_the_new_path_stays(opened: Opened, file: Path) -> None:
    fill(opened.store, "big", 10)

    def ironclaw_writes(n: int) -> None:
        if len(opened.changed) == 1 and not any(p == "moved/n05.md" for p in paths(file)):
            legacy_write_by_libsql(file, "moved/n05.md", "IronClaw's own\n")

    opened.before_begin = ironclaw_writes
    outcome = opened.store._move_in_parts(MoveDir("big", "moved"))
    assert [reason for _, reason in outcome.skipped] == [
        "another writer's document is at 'moved/n05.md'"
    ]
    listed = paths(file)
    assert "big/n05.md" in listed and "moved/n05.md" in listed
    assert sum(p.startswith("moved/") for p in listed) == 10
    assert moves_begun(file) == []


def test_rm_rf_removes_a_few_documents_per_transaction(
    opened: Opened, file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under the vector index a removal weighs four moves: a limit of 12 removes 3."""
    assert opened.store._delete_weight() == 4
    monkeypatch.setattr(legacy_writes, "MOVE_LIMIT", 12)
    fill(opened.store, "gone", 8)
    rows = opened.store.load_documents()
    opened.changed.clear()
    opened.store.defer(*[Delete(r.id, r.updated_at, r.path) for r in rows])
    assert opened.store.flush_changes()
    assert opened.per_transaction == [3, 3, 2]
    assert paths(file) == []
    (check,) = libsql_statements(file, ("PRAGMA integrity_check", ()))
    assert check == [["ok"]]


def removals_begun(file: Path) -> int:
    with sqlite3.connect(f"{file}.memfs-deleted") as conn:
        return int(conn.execute("SELECT count(*) FROM removals_begun").fetchone()[0])


def test_an_rm_rf_stopped_halfway_is_finished_by_the_next_start(
    opened: Opened, file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch of removals that goes in parts is noted first: a mount stopped after its
    first part makes the rest at its next start (each kept for undelete, as any removal),
    except a document another writer changed meanwhile, which stays."""
    monkeypatch.setattr(legacy_writes, "MOVE_LIMIT", 12)  # 3 removals a part
    fill(opened.store, "gone", 8)
    rows = opened.store.load_documents()
    opened.changed.clear()

    def stop(n: int) -> None:
        if len(opened.changed) == 1:
            raise KeyboardInterrupt  # the process stops between two parts

    opened.before_begin = stop
    opened.store.defer(*[Delete(r.id, r.updated_at, r.path) for r in rows])
    with pytest.raises(KeyboardInterrupt):
        opened.store.flush_changes()
    assert len(paths(file)) == 5 and removals_begun(file) == 5  # the first part's forgotten
    opened.close()
    legacy_write_by_libsql(file, "gone/n07.md", "IronClaw changed it meanwhile\n")
    again = Opened(file)
    try:
        listed = [r.path for r in again.store.load_documents()]
        assert listed == ["gone/n07.md"] and paths(file) == listed
        assert again.per_transaction == [3, 2]  # the five not made yet, one of them kept
        assert removals_begun(file) == 0
        with sqlite3.connect(f"{file}.memfs-deleted") as conn:
            kept = conn.execute("SELECT count(*) FROM deleted_documents").fetchone()[0]
        assert kept == 7
    finally:
        again.close()
