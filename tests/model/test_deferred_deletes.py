"""Deletes left for the next transaction (``memfs.db.deferred``): ``rm -rf`` in a handful
of round trips, with what every process sees kept consistent.

Model tests run the filesystem with its background sender, as a mount does; mount tests
use real ``rm``, ``rm -rf`` and a second connection looking at the rows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
import trio

from memfs.db import Database, FileAttrs, Scope
from memfs.db.deferred import Delete, DropDir, KeepDir
from memfs.db.records import SaveOptions, Write
from memfs.errors import DatabaseUnavailable
from memfs.tree import ROOT_INODE
from memfs.vfs import Filesystem
from tests.engines import ENGINES
from tests.model.conftest import Solo
from tests.model.test_round_trips import write_file
from tests.netproxy import DelayProxy


def names(fs: Filesystem, ino: int = ROOT_INODE) -> list[str]:
    return sorted(fs.state.tree.get_dir(ino).children)


def rows(conn: psycopg.Connection[Any]) -> list[str]:
    return [r[0] for r in conn.execute("SELECT path FROM memory_documents ORDER BY path")]


@pytest.fixture
async def sending_fs(database: Database) -> AsyncIterator[Filesystem]:
    """The model with its background sender of deletes running (as in a mount)."""
    filesystem = Filesystem(database.store(Scope("default")), uid=1000, gid=1000)
    await filesystem.load()
    async with trio.open_nursery() as nursery:
        await nursery.start(filesystem.send_changes)
        yield filesystem
        nursery.cancel_scope.cancel()


async def test_unlink_hides_the_row_at_once_and_deletes_it_soon(
    solo_sending: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    fs, engine = solo_sending.fs, solo_sending.engine
    await write_file(fs, ROOT_INODE, "a.md", b"one\n")
    await write_file(fs, ROOT_INODE, "b.md", b"two\n")
    await fs.unlink(ROOT_INODE, "a.md")
    assert names(fs) == ["b.md"]
    with trio.fail_after(5):
        while list(engine.contents(sql_conn)) != ["b.md"]:
            await trio.sleep(0.01)
    assert not fs.store.deferred.hidden()


async def test_a_reload_before_the_delete_is_sent_does_not_bring_the_file_back(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    fs, contents = solo.fs, solo.engine.contents
    store = fs.store
    await write_file(fs, ROOT_INODE, "a.md", b"one\n")
    node = await fs.lookup(ROOT_INODE, "a.md")
    assert node.doc_id is not None
    store.defer(Delete(node.doc_id))  # as unlink leaves it while a batch is on its way
    assert list(contents(sql_conn)) == ["a.md"]
    assert [row.path for row in store.load_documents()] == []
    assert store.document_rows([node.doc_id]) == {}
    store.flush_changes()
    assert contents(sql_conn) == {}
    assert not store.flush_changes(), "nothing left to send"


async def test_a_new_file_at_a_deleted_path_goes_after_the_delete(
    solo_sending: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    """``rm x; echo new > x``: the delete and the insert share a transaction, in order."""
    fs, engine = solo_sending.fs, solo_sending.engine
    await write_file(fs, ROOT_INODE, "x.md", b"old\n")
    old = engine.identity(sql_conn, "x.md")
    for n in range(20):
        await fs.unlink(ROOT_INODE, "x.md")
        await write_file(fs, ROOT_INODE, "x.md", f"new {n}\n".encode())
    await fs.flush_changes()
    assert engine.contents(sql_conn) == {"x.md": "new 19\n"}  # one row: the last one made
    assert engine.identity(sql_conn, "x.md") != old  # a new document, not the old one
    assert (await solo_sending.fresh()).state.tree.root.children.keys() == {"x.md"}


async def test_a_failed_batch_is_sent_again(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    """A transaction that carried deletes and failed leaves them queued (a trigger that
    raises makes the save fail; the next transaction sends the deletes)."""
    store = database.store(Scope("default"))
    kept = store.commit_document(
        Write(None, "a.md", "one\n"), FileAttrs(), SaveOptions(index_now=False)
    )
    store.defer(Delete(kept.doc_id))
    sql_conn.execute(
        "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.path = 'refused.md' THEN RAISE EXCEPTION 'refused by test'; END IF; "
        "RETURN NEW; END $$; CREATE TRIGGER refuse BEFORE INSERT ON memory_documents "
        "FOR EACH ROW EXECUTE FUNCTION refuse()"
    )
    with pytest.raises(psycopg.errors.RaiseException):
        store.commit_document(
            Write(None, "refused.md", "x\n"), FileAttrs(), SaveOptions(index_now=False)
        )
    assert rows(sql_conn) == ["a.md"], "the failed transaction's delete rolled back"
    assert store.deferred.hidden() == {kept.doc_id}, "and is still queued"
    store.commit_document(Write(None, "b.md", "two\n"), FileAttrs(), SaveOptions(index_now=False))
    assert rows(sql_conn) == ["b.md"]


async def test_unlink_while_the_database_does_not_answer_fails_at_once(
    solo_sending: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    """With the breaker open a delete is not left for later: the caller gets EIO and the
    file stays (what the mount shows and what the database holds stay the same)."""
    fs = solo_sending.fs
    await write_file(fs, ROOT_INODE, "a.md", b"one\n")
    fs.lookups.calls.unresponsive_since = fs.lookups.calls._clock()
    fs.lookups.calls._next_probe = fs.lookups.calls._clock() + 3600
    with pytest.raises(DatabaseUnavailable):
        await fs.unlink(ROOT_INODE, "a.md")
    assert names(fs) == ["a.md"]
    assert list(solo_sending.engine.contents(sql_conn)) == ["a.md"]
    assert not fs.store.deferred.hidden()


async def test_rm_rf_of_a_tree_costs_a_few_round_trips(
    far: tuple[Database, DelayProxy], sql_conn: psycopg.Connection[Any]
) -> None:
    db, proxy = far
    fs = Filesystem(db.store(Scope("default")), uid=1000, gid=1000)
    await fs.load()
    top = await fs.mkdir(ROOT_INODE, "top", 0o755)
    folders = [await fs.mkdir(top.ino, name, 0o755) for name in ("a", "b")]
    for folder in folders:
        for i in range(20):
            await write_file(fs, folder.ino, f"{i}.md", b"deploy\n")
    async with trio.open_nursery() as nursery:
        await nursery.start(fs.send_changes)
        proxy.reset()
        for folder, name in zip(folders, ("a", "b"), strict=True):  # rm -rf top
            for i in range(20):
                await fs.unlink(folder.ino, f"{i}.md")
            await fs.rmdir(top.ino, name)
        await fs.rmdir(ROOT_INODE, "top")
        await fs.flush_changes()
        trips = proxy.round_trips
        nursery.cancel_scope.cancel()
    # Per entry this was 43 (40 unlinks, 3 rmdirs of explicit folders); now the deletes and
    # rmdirs go in batches: the first alone, the rest piled up while it was on its way.
    print("rm -rf of 40 documents in 3 folders:", trips, "round trips")
    assert trips <= 3
    assert rows(sql_conn) == []
    assert sql_conn.execute("SELECT count(*) FROM memfs.directories").fetchone() == (0,)


async def test_a_folder_emptied_and_removed_in_one_batch_is_gone(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    """``rm d/x; rmdir d``: the emptied folder is kept, then forgotten, in that order;
    ``rmdir d; mkdir d`` leaves it (the mkdir sends the batch first)."""
    store = database.store(Scope("default"))
    doc = store.commit_document(
        Write(None, "d/x.md", "x\n"), FileAttrs(), SaveOptions(index_now=False)
    )
    store.create_directory("e")
    store.defer(Delete(doc.doc_id), KeepDir("d"))
    store.defer(DropDir("d"))
    store.defer(DropDir("e"))
    assert store.load_directories() == []
    store.create_directory("e")
    assert rows(sql_conn) == []
    assert [r[0] for r in sql_conn.execute("SELECT path FROM memfs.directories")] == ["e"]


class DeleteCommitsAfterTheRead:
    """The store's pool, with a delete committing just after the next read on it ended
    and before the reader looked at what was still queued: what the mount's sender does
    from another thread (the CI failure of ``test_feed_races``, once in about 1,500 runs)."""

    def __init__(self, store: Any, removal: Delete, *, queued_before: bool) -> None:
        self.store = store
        self.pool = store.pool
        self.removal: Delete | None = removal
        self.armed = True
        if queued_before:
            store.defer(removal)
            self.removal = None

    @contextmanager
    def connection(self) -> Iterator[Any]:
        armed, self.armed = self.armed, False
        with self.pool.connection() as conn:
            yield conn
        if armed:
            if self.removal is not None:
                self.store.defer(self.removal)
            assert self.store.flush_changes(), "the delete committed"


# PostgreSQL only: the delete is made to commit inside the read by wrapping the pool's
# ``connection()``; the libSQL store reads through its thread's own connection, which gives
# this harness no such hook.  The rule under test (``DeferredChanges.deletions_during``)
# is the same code on every engine.
@pytest.mark.parametrize("engine", ENGINES, indirect=True, ids=str)
@pytest.mark.parametrize("queued_before", [True, False], ids=["queued-before", "queued-during"])
@pytest.mark.parametrize("read", ["document_rows", "load_documents"])
async def test_a_read_does_not_show_a_row_whose_delete_committed_while_it_ran(
    two: tuple[Filesystem, Filesystem],
    monkeypatch: pytest.MonkeyPatch,
    read: str,
    queued_before: bool,
) -> None:
    fs, _ = two
    ino = await write_file(fs, ROOT_INODE, "gone.md", b"gone\n")
    node = fs.state.tree.get_file(ino)
    assert node.doc_id is not None
    store = fs.store
    removal = Delete(node.doc_id, node.updated_at, "gone.md")
    pool = DeleteCommitsAfterTheRead(store, removal, queued_before=queued_before)
    monkeypatch.setattr(store, "pool", pool)
    found = store.document_rows([node.doc_id]) if read == "document_rows" else {
        row.id: row for row in store.load_documents()
    }  # fmt: skip
    assert not pool.armed
    assert node.doc_id not in found, "a row this mount deleted came back"
    assert not store.deferred.hidden()
