"""What memfs keeps beside IronClaw's tables (``KeptHistory``), on every engine, without a
mount: a deleted document with every version IronClaw had kept, only when the delete
happened, and every move with its time."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memfs.config import Settings
from memfs.db import open_database
from memfs.db.capabilities import KeptHistory
from memfs.db.interface import DocumentStore, FileAttrs
from memfs.db.records import Rename, SaveOptions, Write
from tests.engines import ENGINES_WITH_LIBSQL, Engine


@pytest.fixture(params=ENGINES_WITH_LIBSQL, ids=str)
def stores(
    request: pytest.FixtureRequest, database_url: str
) -> Iterator[tuple[DocumentStore, KeptHistory]]:
    engine: Engine = request.param
    engine.prepare(database_url)
    database = open_database(Settings(database_url=engine.mount_url(database_url)))
    workspace = database.workspace(Settings(database_url=engine.mount_url(database_url)), "t")
    assert workspace.kept is not None
    yield workspace.documents, workspace.kept
    database.close()


def test_a_deleted_document_is_kept_with_its_versions(stores: Any) -> None:
    store, kept = stores
    started = kept.start()
    assert kept.start() == started  # recorded once
    first = store.commit_document(Write(None, "notes/a.md", "one\n"), FileAttrs())
    second = store.commit_document(
        Write(first.doc_id, "notes/a.md", "two\n"),
        FileAttrs(),
        SaveOptions(expected=first.updated_at),
    )
    store.commit_document(
        Write(second.doc_id, "notes/a.md", "three\n"),
        FileAttrs(),
        SaveOptions(expected=second.updated_at),
    )
    assert kept.deletions() == []
    row = store.find_document("notes/a.md")
    assert store.delete_document(row.id, [], row.updated_at)
    (deletion,) = kept.deletions()
    assert deletion.path == "notes/a.md" and deletion.deleted_by == "mount"
    assert deletion.size == len("three\n")
    document = kept.kept_document(deletion.id)
    assert document is not None and document.content == "three\n"
    assert [v.content for v in document.versions] == ["one\n", "two\n"]
    assert [v.number for v in document.versions] == [1, 2]
    assert all(v.created_at <= deletion.deleted_at for v in document.versions)
    assert kept.deletions("notes/a.md") == [deletion] and kept.deletions("other.md") == []


def test_a_delete_whose_guard_fails_keeps_nothing(stores: Any) -> None:
    store, kept = stores
    made = store.commit_document(Write(None, "b.md", "bee\n"), FileAttrs())
    store.commit_document(
        Write(made.doc_id, "b.md", "changed by another\n"),
        FileAttrs(),
        SaveOptions(expected=made.updated_at),
    )
    assert not store.delete_document(made.doc_id, [], made.updated_at)  # seen: the old version
    assert kept.deletions() == []
    assert store.find_document("b.md") is not None


def test_moves_are_recorded_with_their_time(stores: Any) -> None:
    store, kept = stores
    before = datetime.now(UTC) - timedelta(seconds=5)
    made = store.commit_document(Write(None, "x/one.md", "1\n"), FileAttrs())
    store.rename_document(Rename(made.doc_id, "x/two.md", "x/one.md"), FileAttrs(), None)
    store.rename_directory("x", "y", None)
    moves = kept.moves(before)
    assert [(m.old_path, m.new_path, m.folder) for m in moves] == [
        ("x/one.md", "x/two.md", False),
        ("x/two.md", "y/two.md", False),
    ]  # fmt: skip  (a folder's move: each document's, never the folder's)
    assert moves[0].moved_at <= moves[1].moved_at
    assert kept.moves(moves[1].moved_at) == []


def test_memfs_trigger_never_fails_ironclaws_delete(database_url: str, sql_conn: Any) -> None:
    """Legacy, memfs's trigger installed (an empty database memfs set up): a delete by SQL
    is kept; when keeping it fails, the delete goes on (a warning, never an error)."""
    database = open_database(Settings(database_url=database_url))
    try:
        store = database.workspace(Settings(database_url=database_url), "t").documents
        store.commit_document(Write(None, "kept.md", "by sql\n"), FileAttrs())
        store.commit_document(Write(None, "lost.md", "not kept\n"), FileAttrs())
    finally:
        database.close()
    sql_conn.execute("DELETE FROM memory_documents WHERE path = 'kept.md'")
    kept = sql_conn.execute(
        "SELECT path, content, deleted_by FROM memfs.deleted_documents"
    ).fetchall()
    assert kept == [("kept.md", "by sql\n", "sql")]
    sql_conn.execute(  # memfs's table refuses every row now
        "ALTER TABLE memfs.deleted_documents ADD CONSTRAINT refuse CHECK (false) NOT VALID"
    )
    deleted = sql_conn.execute("DELETE FROM memory_documents WHERE path = 'lost.md'").rowcount
    assert deleted == 1, "IronClaw's delete went through"
    assert sql_conn.execute("SELECT count(*) FROM memory_documents").fetchone() == (0,)


def test_the_libsql_deleted_file_is_private(tmp_path: Any) -> None:
    from tests.ironclaw_libsql import reborn_local_dev

    path = reborn_local_dev(tmp_path / "reborn-local-dev.db")
    database = open_database(Settings(database_url=f"sqlite:{path}"))
    try:
        workspace = database.workspace(Settings(database_url=f"sqlite:{path}"), "t")
        made = workspace.documents.commit_document(Write(None, "a.md", "x\n"), FileAttrs())
        assert workspace.documents.delete_document(made.doc_id, [], made.updated_at)
    finally:
        database.close()
    kept = tmp_path / "reborn-local-dev.db.memfs-deleted"
    assert kept.exists() and (kept.stat().st_mode & 0o777) == 0o600


def test_saver_copies_are_kept_listed_read_and_purged(stores: Any) -> None:
    """The safety net's storage: a save's bytes as written, by path, oldest first;
    an unknown id reads nothing; purged with the deletions."""
    store, kept = stores
    before = datetime.now(UTC) - timedelta(seconds=5)
    assert kept.saver_copies("a.md") == []
    kept.keep_saver_copy("a.md", b"mine\n", "merged")
    kept.keep_saver_copy("a.md", "caf\u00e9\n".encode(), "merged again")
    kept.keep_saver_copy("b.md", b"other\n", "merged")
    first, second = kept.saver_copies("a.md")
    assert (first.reason, first.size, second.size) == ("merged", 5, 6)
    assert first.kept_at <= second.kept_at and first.kept_at > before
    assert kept.saver_copy(first.id) == b"mine\n"
    assert kept.saver_copy(second.id) == "caf\u00e9\n".encode()
    assert kept.saver_copy(10**9) is None
    kept.purge(before)  # older than every copy: all stay
    assert len(kept.saver_copies("a.md")) == 2
    kept.purge(datetime.now(UTC) + timedelta(seconds=5))
    assert kept.saver_copies("a.md") == [] and kept.saver_copies("b.md") == []
    assert store.find_document("a.md") is None  # never a document


def test_a_purge_forgets_deletions_moves_and_copies_older_than_its_cut(stores: Any) -> None:
    """Every table of memfs's kept history ages out by its own column, on every engine;
    the answer is the deletions forgotten."""
    store, kept = stores
    before = datetime.now(UTC) - timedelta(seconds=5)
    made = store.commit_document(Write(None, "p/one.md", "1\n"), FileAttrs())
    moved = store.rename_document(Rename(made.doc_id, "p/two.md", "p/one.md"), FileAttrs(), None)
    gone = store.commit_document(Write(None, "gone.md", "bye\n"), FileAttrs())
    assert store.delete_document(gone.doc_id, [], gone.updated_at)
    kept.keep_saver_copy("p/two.md", b"mine\n", "merged")
    assert moved is not None
    assert kept.purge(before) == 0  # older than everything: all stay
    assert len(kept.deletions()) == 1 and len(kept.moves(before)) == 1
    assert kept.purge(datetime.now(UTC) + timedelta(seconds=5)) == 1
    assert kept.deletions() == [] and kept.moves(before) == []
    assert kept.saver_copies("p/two.md") == []
    assert store.find_document("p/two.md") is not None  # the live document stays
