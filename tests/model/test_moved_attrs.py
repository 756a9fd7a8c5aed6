"""Client attributes (chmod, utime) follow a moved document, on every engine.

A move is not an edit: a folder's documents keep their mode and mtime (a document with no
client attributes keeps the mtime it showed, its ``updated_at`` before the move; on the
Reborn layout both were lost at the next load: the move changes ``updated_at``, which the
attributes were trusted against).  The Reborn layout keys memfs's attributes by path, and
IronClaw's delete (SQL, no trigger of memfs's sees it) leaves them behind: a rename onto
that path must still be made (it was ``EIO``: the attributes' move met the stale row, a
unique violation on both Reborn engines), and the stale attributes are never shown on the
document moved there.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from memfs.config import Settings
from memfs.db import open_database
from memfs.db.interface import DocumentStore, FileAttrs
from memfs.db.records import Rename, Write
from memfs.tree import to_ns
from tests.engines import Engine
from tests.model.conftest import filesystem_of


@pytest.fixture
def store(engine: Engine, database_url: str) -> Iterator[DocumentStore]:
    database = open_database(Settings(database_url=engine.mount_url(database_url)))
    try:
        yield filesystem_of(engine, database).store
    finally:
        database.close()


def test_a_rename_onto_a_path_whose_document_the_agent_deleted(
    engine: Engine, store: DocumentStore, sql_conn: psycopg.Connection[Any]
) -> None:
    gone = store.commit_document(Write(None, "e/z.md", "the agent deletes this\n"),
                                 FileAttrs(0o600, 1_000_000_000))  # fmt: skip
    assert gone.created
    engine.agent_deletes(sql_conn, "e/z.md")
    own = FileAttrs(0o640, 2_000_000_000)  # rsync's chmod and utime
    moving = store.commit_document(Write(None, "x.md", "moved\n"), own)
    moved = store.rename_document(Rename(moving.doc_id, "e/z.md", "x.md"), own, None)
    assert moved is not None
    rows = {row.path: row for row in store.load_documents()}
    assert set(rows) == {"e/z.md"}
    assert rows["e/z.md"].id == moving.doc_id
    assert rows["e/z.md"].attrs == own  # its own, not the deleted document's


def test_a_folder_moved_onto_paths_whose_documents_the_agent_deleted(
    engine: Engine, store: DocumentStore, sql_conn: psycopg.Connection[Any]
) -> None:
    store.commit_document(Write(None, "b/y.md", "deleted by the agent\n"), FileAttrs(0o600, 10**9))
    engine.agent_deletes(sql_conn, "b/y.md")
    own = FileAttrs(0o640, 2_000_000_000)
    store.commit_document(Write(None, "a/y.md", "moved with its folder\n"), own)
    moved = store.rename_directory("a", "b", None)
    assert len(moved) == 1
    rows = {row.path: row for row in store.load_documents()}
    assert set(rows) == {"b/y.md"}
    assert rows["b/y.md"].attrs == own


def test_a_folder_move_is_not_an_edit(store: DocumentStore) -> None:
    own = FileAttrs(0o640, 1_795_935_639_610_021_001)  # to the nanosecond
    store.commit_document(Write(None, "a/chmodded.md", "chmod and utime\n"), own)
    store.commit_document(Write(None, "a/plain.md", "no client attributes\n"), FileAttrs())
    before = {row.path: row for row in store.load_documents()}
    moved = store.rename_directory("a", "b", None)
    assert len(moved) == 2
    rows = {row.path: row for row in store.load_documents()}
    assert rows["b/chmodded.md"].attrs == own
    assert rows["b/plain.md"].attrs == FileAttrs(None, to_ns(before["a/plain.md"].updated_at))
    assert rows["b/plain.md"].updated_at != before["a/plain.md"].updated_at  # IronClaw's rule


def test_times_are_kept_to_the_nanosecond_through_saves_renames_and_moves(
    store: DocumentStore,
) -> None:
    """What ``cp -a``, ``rsync -t`` and ``touch`` set is a time to the nanosecond, beyond
    32 bits, where a driver that binds such an int as a REAL rounds it to 256 ns (the
    libsql package does: tool files written through IronClaw's libSQL engine came back
    so, ``test_libsql_legacy_writes``).  The tests above use small times (10**9), which
    no rounding shows."""
    now = 1_796_641_636_632_431_763
    first = store.commit_document(Write(None, "a/x.md", "x\n"), FileAttrs(0o640, now))
    second = store.commit_document(Write(None, "y.md", "y\n"), FileAttrs(None, now + 1))
    assert {r.path: r.attrs for r in store.load_documents()} == {
        "a/x.md": FileAttrs(0o640, now), "y.md": FileAttrs(None, now + 1)}  # fmt: skip
    assert store.set_attrs(second.doc_id, FileAttrs(0o600, now + 2))
    moved = store.rename_document(
        Rename(first.doc_id, "b/x.md", "a/x.md"), FileAttrs(0o640, now + 3), None
    )
    assert moved is not None
    assert {r.path: r.attrs for r in store.load_documents()} == {
        "b/x.md": FileAttrs(0o640, now + 3), "y.md": FileAttrs(0o600, now + 2)}  # fmt: skip
