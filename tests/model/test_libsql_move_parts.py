"""Folder moves and removals too large for one transaction of IronClaw's libSQL file.

A write transaction there holds the whole file's lock, and IronClaw's writers wait 5 s at
most: a folder of many documents moves ``move_limit`` documents per transaction, noted in
memfs's move log first, so a mount stopped halfway finishes the move at its next start;
``rm -rf`` removes at most ``move_limit`` documents per transaction.  The limit is made
small here (3) so a folder of 10 documents shows every part; the file is IronClaw's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memfs.db.deferred import Delete, MoveDir
from memfs.db.interface import FileAttrs
from memfs.db.libsql.kept import DeletedFile
from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.libsql.rows import SqliteRows, open_file
from memfs.db.reborn.store import RebornStore
from memfs.db.records import Write
from memfs.errors import WriteRefused
from tests.ironclaw_libsql import reborn_local_dev

S = "/memory/tenants/reborn-cli/users/reborn-cli/agents/reborn-cli-agent/projects/_none"
NO_ATTRS = FileAttrs()
LIMIT = 3


class Opened:
    """A store on the file as a mount opens it (the move log in memfs's kept file), whose
    transactions are counted with the documents each moved or removed."""

    def __init__(self, db: Path) -> None:
        self.file = open_file(db)
        self.deleted = DeletedFile(db)
        self.rows = SqliteRows(self.file, self.deleted, move_limit=LIMIT)
        self.store = RebornStore(self.file, RebornScope(), rows=self.rows)
        #: Documents moved or removed by each write transaction that did either, in order.
        self.changed: dict[int, int] = {}
        #: Called before the BEGIN of each write transaction, with its number.
        self.before_begin: Callable[[int], None] = lambda n: None
        self._transactions = 0
        moves, deletes, begin = (
            self.rows.move_families,
            self.rows.delete_family,
            self.file.transaction,
        )

        def transaction() -> Any:
            self._transactions += 1
            self.before_begin(self._transactions)
            return begin()

        def counted_moves(conn: Any, olds: Any, *rest: Any) -> Any:
            self._count(len(olds))
            return moves(conn, olds, *rest)

        def counted_deletes(conn: Any, *args: Any) -> Any:
            self._count(1)
            return deletes(conn, *args)

        self.file.transaction = transaction  # type: ignore[method-assign]
        self.rows.move_families = counted_moves  # type: ignore[method-assign]
        self.rows.delete_family = counted_deletes  # type: ignore[method-assign]

    def _count(self, documents: int) -> None:
        self.changed[self._transactions] = self.changed.get(self._transactions, 0) + documents

    @property
    def per_transaction(self) -> list[int]:
        return list(self.changed.values())

    def close(self) -> None:
        self.deleted.close()
        self.file.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return reborn_local_dev(tmp_path / "reborn-local-dev.db")


@pytest.fixture
def opened(db: Path) -> Iterator[Opened]:
    found = Opened(db)
    yield found
    found.close()


def paths(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [p.removeprefix(S + "/") for (p,) in conn.execute(
            "SELECT path FROM root_filesystem_entries WHERE path LIKE ? "
            "AND kind = 'memory_document' ORDER BY path", (S + "/%",))]  # fmt: skip


def fill(store: RebornStore, folder: str, count: int) -> None:
    for n in range(count):
        store.commit_document(Write(None, f"{folder}/n{n:02}.md", f"note {n}\n"), NO_ATTRS)


def test_a_large_folder_moves_a_few_documents_per_transaction(opened: Opened, db: Path) -> None:
    store = opened.store
    fill(store, "d", 10)
    store.commit_document(Write(None, "d/n03.md", "note 3, edited\n"), NO_ATTRS)  # a version row
    store.defer(MoveDir("d", "e"))
    assert store.flush_changes()
    assert paths(db) == [f"e/n{n:02}.md" for n in range(10)]
    with sqlite3.connect(db) as conn:  # the sidecars went along, IronClaw's JSON rewritten
        sidecars = conn.execute(
            "SELECT path, indexed FROM root_filesystem_entries WHERE path LIKE ? "
            "AND kind != 'memory_document'", (S + "/%",)).fetchall()  # fmt: skip
    assert sorted(p.removeprefix(S + "/") for p, _ in sidecars) == sorted(
        [f"e/n{n:02}.md.chunks/0" for n in range(10)] + ["e/n03.md.versions/1"]
    )
    assert all('"doc_relative_path":"e/' in keys for _, keys in sidecars)
    assert opened.per_transaction == [3, 3, 3, 1]
    moved = store.take_moved()
    assert {store.path_of(d) for d in moved} == {f"e/n{n:02}.md" for n in range(10)}
    assert opened.deleted.moves_begun(S) == []  # the log forgets a finished move
    assert [d.path for d in store.load_documents()] == [f"e/n{n:02}.md" for n in range(10)]


def test_a_small_folder_still_moves_in_one_transaction(opened: Opened, db: Path) -> None:
    fill(opened.store, "d", LIMIT)
    opened.store.defer(MoveDir("d", "e"))
    assert opened.store.flush_changes()
    assert opened.per_transaction == [LIMIT]
    assert paths(db) == [f"e/n{n:02}.md" for n in range(LIMIT)]


def test_a_move_stopped_halfway_is_finished_by_the_next_start(db: Path) -> None:
    first = Opened(db)
    fill(first.store, "d", 10)

    def the_mount_stops(n: int) -> None:
        if first.changed and n > max(first.changed):  # the part after the first one
            raise KeyboardInterrupt("the mount stops")

    first.store.defer(MoveDir("d", "e"))
    first.before_begin = the_mount_stops
    with pytest.raises(KeyboardInterrupt):
        first.store.flush_changes()
    first.close()
    assert paths(db) == [f"d/n{n:02}.md" for n in range(3, 10)] + [
        f"e/n{n:02}.md" for n in range(3)
    ]  # half made: the first part committed
    second = Opened(db)
    try:
        assert second.deleted.moves_begun(S) == [(f"{S}/d", f"{S}/e")]
        listed = [d.path for d in second.store.load_documents()]
        assert listed == [f"e/n{n:02}.md" for n in range(10)]
        assert paths(db) == listed
        assert second.deleted.moves_begun(S) == []
        assert second.per_transaction == [3, 3, 1]
    finally:
        second.close()


def test_a_document_another_writer_put_at_the_new_path_stays_put(opened: Opened, db: Path) -> None:
    store = opened.store
    fill(store, "d", 10)

    def agent_puts_between_parts(n: int) -> None:
        if len(opened.changed) == 1 and n > max(opened.changed):
            with sqlite3.connect(db) as agent:  # IronClaw's put, between two parts
                agent.execute(
                    "INSERT INTO root_filesystem_entries (path, contents, kind, content_type, "
                    "indexed, version) VALUES (?, ?, 'memory_document', 'application/json', "
                    "'{}', 1)", (f"{S}/f/n05.md", b"the agent's\n"),
                )  # fmt: skip

    opened.before_begin = agent_puts_between_parts
    store.defer(MoveDir("d", "f"))
    assert store.flush_changes()
    assert paths(db) == ["d/n05.md"] + [f"f/n{n:02}.md" for n in range(10)]
    assert [reason for _, reason in store.take_skipped()] == [
        "another writer's row is at 'f/n05.md'"
    ]
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT contents FROM root_filesystem_entries WHERE path = ?",
                            (f"{S}/f/n05.md",)).fetchone() == (b"the agent's\n",)  # fmt: skip


def test_a_large_folder_is_not_moved_onto_another_writers_folder(opened: Opened, db: Path) -> None:
    store = opened.store
    fill(store, "d", 10)
    store.commit_document(Write(None, "e/theirs.md", "here first\n"), NO_ATTRS)
    opened.changed.clear()
    store.defer(MoveDir("d", "e"))
    assert store.flush_changes()
    assert [reason for _, reason in store.take_skipped()] == [
        "another writer's rows are at the new name"
    ]
    assert opened.per_transaction == []
    assert paths(db) == [f"d/n{n:02}.md" for n in range(10)] + ["e/theirs.md"]
    assert opened.deleted.moves_begun(S) == []


def test_rm_rf_removes_a_few_documents_per_transaction(opened: Opened, db: Path) -> None:
    store = opened.store
    fill(store, "d", 8)
    opened.changed.clear()
    store.defer(*[Delete(store.id_of(f"d/n{n:02}.md")) for n in range(8)])
    assert store.flush_changes()
    assert paths(db) == []
    assert opened.per_transaction == [3, 3, 2]


def test_a_rename_made_at_once_moves_in_parts_too(opened: Opened, db: Path) -> None:
    """Without the background sender (the model driven directly) a folder rename is made
    in the call: the same parts."""
    store = opened.store
    fill(store, "d", 7)
    opened.changed.clear()
    moved = store.rename_directory("d", "e", None)
    assert {store.path_of(d) for d in moved} == {f"e/n{n:02}.md" for n in range(7)}
    assert opened.per_transaction == [3, 3, 1]
    fill(store, "g", 4)
    with pytest.raises(WriteRefused):
        store.rename_directory("g", "e", None)  # onto another folder: refused, as at once
    assert paths(db)[:4] == [f"e/n{n:02}.md" for n in range(4)]
    assert [p for p in paths(db) if p.startswith("g/")] == [f"g/n{n:02}.md" for n in range(4)]


def test_an_rm_rf_stopped_halfway_is_finished_by_the_next_start(db: Path) -> None:
    """A batch of removals that goes in parts is noted first: a mount stopped after its
    first part makes the rest at its next start, except a document the agent changed
    meanwhile, which stays."""
    first = Opened(db)
    fill(first.store, "d", 8)
    shown = {d.path: d.updated_at for d in first.store.load_documents()}
    first.changed.clear()

    def the_mount_stops(n: int) -> None:
        if first.changed and n > max(first.changed):  # the part after the first one
            raise KeyboardInterrupt("the mount stops")

    first.store.defer(*[Delete(first.store.id_of(p), at, p) for p, at in shown.items()])
    first.before_begin = the_mount_stops
    with pytest.raises(KeyboardInterrupt):
        first.store.flush_changes()
    first.close()
    assert paths(db) == [f"d/n{n:02}.md" for n in range(3, 8)]  # the first part went
    with sqlite3.connect(db) as agent:  # IronClaw's overwrite of one of them meanwhile
        agent.execute(
            "UPDATE root_filesystem_entries SET contents = ?, version = version + 1, "
            "updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '+1 second') WHERE path = ?",
            (b"the agent's\n", f"{S}/d/n07.md"),
        )
    second = Opened(db)
    try:
        assert len(second.deleted.removals_begun(S)) == 5  # the first part made
        listed = [d.path for d in second.store.load_documents()]
        assert listed == ["d/n07.md"] and paths(db) == listed
        assert second.deleted.removals_begun(S) == []
        assert second.per_transaction == [3, 2]  # the five not made yet, one kept
    finally:
        second.close()
