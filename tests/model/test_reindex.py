"""The reindex queue and worker: chunks follow commits, survive crashes, never go stale."""

from __future__ import annotations

import os
from typing import Any
from uuid import UUID

import psycopg
import trio

from memfs.db import Database, FileAttrs, Scope
from memfs.db.calls import DatabaseCalls
from memfs.db.records import SaveOptions, Write
from memfs.ironclaw.chunker import chunk_document
from memfs.reindex import Reindexer
from memfs.tree import ROOT_INODE
from memfs.vfs import Filesystem

LONG = " ".join(f"word{i}" for i in range(1500)) + "\n"  # two chunks


def chunks_of(conn: psycopg.Connection[Any], path: str, user: str = "default") -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT c.content FROM memory_chunks c JOIN memory_documents d "
            "ON d.id = c.document_id WHERE d.path = %s AND d.user_id = %s "
            "ORDER BY c.chunk_index",
            (path, user),
        )
    ]


def queued(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM memfs.reindex_queue").fetchone()
    assert row is not None
    return int(row[0])


async def test_mount_commit_queues_and_worker_rechunks(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    announced: list[UUID] = []
    reindexer = Reindexer(
        database.reindex_store(Scope("default")), DatabaseCalls(), announced.append
    )
    fs = Filesystem(
        database.store(Scope("default")), reindexer=reindexer, on_changed=announced.append
    )
    await fs.load()
    async with trio.open_nursery() as nursery:
        await nursery.start(reindexer.run)
        fh, node = await fs.create(ROOT_INODE, "notes.md", 0o644, os.O_WRONLY)
        await fs.write(fh, 0, LONG.encode())
        await fs.release(fh)
        assert await reindexer.settled(timeout=10)
        assert chunks_of(sql_conn, "notes.md") == chunk_document(LONG)
        assert queued(sql_conn) == 0
        assert reindexer.indexed == 1  # the worker did it, not the commit
        assert announced == [node.doc_id]  # the embedding worker hears of it once re-chunked
        # An edit touches only the chunk that changed, and is announced again.
        fh, _ = await fs.open(node.ino, os.O_WRONLY | os.O_APPEND)
        await fs.write(fh, len(LONG), b"tail\n")
        await fs.release(fh)
        assert await reindexer.settled(timeout=10)
        assert chunks_of(sql_conn, "notes.md") == chunk_document(LONG + "tail\n")
        assert announced == [node.doc_id, node.doc_id]
        nursery.cancel_scope.cancel()
    assert not reindexer.running


async def test_commit_without_running_worker_chunks_in_its_transaction(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    scope = Scope("default")
    reindexer = Reindexer(database.reindex_store(scope), DatabaseCalls(), lambda _: None)
    fs = Filesystem(database.store(scope), reindexer=reindexer)  # created, never started
    await fs.load()
    fh, _ = await fs.create(ROOT_INODE, "a.md", 0o644, os.O_WRONLY)
    await fs.write(fh, 0, b"alpha beta\n")
    await fs.release(fh)
    assert chunks_of(sql_conn, "a.md") == ["alpha beta\n"]
    assert queued(sql_conn) == 0 and reindexer.indexed == 0


async def test_a_crashed_mounts_queue_is_finished_by_the_next(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    store = database.store(Scope("default"))
    # A mount committed content, then died before re-chunking.
    first = store.commit_document(
        Write(None, "x.md", "first text\n"), FileAttrs(), SaveOptions(index_now=False)
    )
    store.commit_document(
        Write(first.doc_id, "x.md", LONG), FileAttrs(), SaveOptions(index_now=False)
    )
    assert chunks_of(sql_conn, "x.md") == [] and queued(sql_conn) == 1
    # An entry whose document IronClaw deleted meanwhile is dropped, not retried forever.
    gone = store.commit_document(
        Write(None, "gone.md", "bye\n"), FileAttrs(), SaveOptions(index_now=False)
    )
    sql_conn.execute("DELETE FROM memory_documents WHERE id = %s", (gone.doc_id,))
    reindexer = Reindexer(database.reindex_store(Scope("default")), DatabaseCalls(), lambda _: None)
    fs = Filesystem(store, uid=1000, gid=1000, reindexer=reindexer)
    await fs.load()
    async with trio.open_nursery() as nursery:
        await nursery.start(reindexer.run)
        with trio.fail_after(10):
            while queued(sql_conn):
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert chunks_of(sql_conn, "x.md") == chunk_document(LONG)  # the newest content's
    assert reindexer.indexed == 1


async def test_reindex_batch_honours_scope_and_skip_indexing(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    mine = database.store(Scope("alice"))
    theirs = database.store(Scope("bob"))
    mine.commit_document(Write(None, "p/.config", ""), FileAttrs())
    sql_conn.execute(
        "UPDATE memory_documents SET metadata = '{\"skip_indexing\": true}' "
        "WHERE path = 'p/.config' AND user_id = 'alice'"
    )
    mine.commit_document(
        Write(None, "p/secret.md", "hidden words\n"), FileAttrs(), SaveOptions(index_now=False)
    )
    mine.commit_document(
        Write(None, "open.md", "open words\n"), FileAttrs(), SaveOptions(index_now=False)
    )
    theirs.commit_document(
        Write(None, "bob.md", "bob words\n"), FileAttrs(), SaveOptions(index_now=False)
    )
    batch = database.reindex_store(Scope("alice")).reindex_queued()
    assert len(batch.done) == 2 and batch.waiting == 0
    assert chunks_of(sql_conn, "open.md", "alice") == ["open words\n"]
    assert chunks_of(sql_conn, "p/secret.md", "alice") == []  # folder says skip_indexing
    assert chunks_of(sql_conn, "bob.md", "bob") == []  # another user's: not touched
    alice, bob = database.reindex_store(Scope("alice")), database.reindex_store(Scope("bob"))
    assert alice.queued_for_reindex() == 0 and bob.queued_for_reindex() == 1
    assert len(bob.reindex_queued().done) == 1
    assert chunks_of(sql_conn, "bob.md", "bob") == ["bob words\n"]


def test_reindex_never_waits_for_a_writer_nor_a_writer_for_it(
    database: Database, database_url: str, sql_conn: psycopg.Connection[Any]
) -> None:
    """Chunks are written under a chunk lock of their own, not the document's row lock."""
    store = database.store(Scope("default"))
    indexer = database.reindex_store(Scope("default"))
    result = store.commit_document(
        Write(None, "held.md", "old\n"), FileAttrs(), SaveOptions(index_now=False)
    )
    with psycopg.connect(database_url) as writer:
        writer.execute("SET lock_timeout = '1s'")
        writer.execute(  # a save in progress: row locked, content changed, not committed
            "UPDATE memory_documents SET content = 'new\n' WHERE id = %s", (result.doc_id,)
        )
        batch = indexer.reindex_queued()
        assert batch.done == [result.doc_id] and batch.waiting == 0
        assert chunks_of(sql_conn, "held.md") == ["old\n"]  # the committed content's
        writer.rollback()
    # Another mount re-chunking the same document: this one leaves it and keeps the entry.
    store.commit_document(
        Write(result.doc_id, "held.md", "newer\n"), FileAttrs(), SaveOptions(index_now=False)
    )
    with psycopg.connect(database_url) as other:
        other.execute(
            "SELECT pg_advisory_xact_lock(hashtextextended('memfs-chunks ' || %s::text, 0))",
            (result.doc_id,),
        )
        assert indexer.reindex_queued().done == []
        assert queued(sql_conn) == 1
    assert indexer.reindex_queued().done == [result.doc_id]
    assert chunks_of(sql_conn, "held.md") == ["newer\n"]


def test_a_document_queued_again_while_being_chunked_stays_queued(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    store = database.store(Scope("default"))
    indexer = database.reindex_store(Scope("default"))
    result = store.commit_document(
        Write(None, "q.md", "one\n"), FileAttrs(), SaveOptions(index_now=False)
    )
    # A save that re-queues the document while its chunks are being written (a trigger on
    # the chunk insert stands in for the concurrent commit).
    sql_conn.execute(
        """
        CREATE FUNCTION test_requeue() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            UPDATE memfs.reindex_queue SET queued_at = clock_timestamp()
                WHERE document_id = NEW.document_id;
            RETURN NEW;
        END $$;
        CREATE TRIGGER test_requeue BEFORE INSERT ON memory_chunks
            FOR EACH ROW EXECUTE FUNCTION test_requeue();
        """
    )
    assert indexer.reindex_queued().done == [result.doc_id]
    assert queued(sql_conn) == 1, "the newer request must survive the older re-chunk"
    sql_conn.execute("DROP TRIGGER test_requeue ON memory_chunks")
    # The next batch chunks what is stored by then (here: an SQL writer's content).
    sql_conn.execute(
        "UPDATE memory_documents SET content = 'two\n' WHERE id = %s", (result.doc_id,)
    )
    assert indexer.reindex_queued().done == [result.doc_id]
    assert chunks_of(sql_conn, "q.md") == ["two\n"]
    assert queued(sql_conn) == 0
