"""The reindex queue and worker: chunks follow commits, survive crashes, never go stale."""

from __future__ import annotations

import time
from typing import Any

import psycopg

from memfs.ironclaw.chunker import chunk_document
from tests.model.test_reindex import LONG, chunks_of, queued
from tests.mounting import wait_reindex_queue_empty


def test_unmount_drains_the_queue(
    database_url: str, mount_factory: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    mount = mount_factory(database_url)
    for i in range(40):  # a burst: the worker batches it
        (mount.path() / f"n{i}.md").write_text(f"note {i}\n" + LONG)
    mount.stop()  # right away: the worker must finish before the daemon exits
    assert queued(sql_conn) == 0
    for i in range(40):
        assert chunks_of(sql_conn, f"n{i}.md") == chunk_document(f"note {i}\n" + LONG)


def test_an_unexpected_reindex_error_never_ends_the_mount(
    database_url: str, mount_factory: Any, sql_conn: psycopg.Connection[Any]
) -> None:
    mount = mount_factory(database_url)
    sql_conn.execute(
        """
        CREATE FUNCTION test_refuse_chunks() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN RAISE EXCEPTION 'injected chunk failure'; END $$;
        CREATE TRIGGER test_refuse_chunks BEFORE INSERT ON memory_chunks
            FOR EACH ROW EXECUTE FUNCTION test_refuse_chunks();
        """
    )
    (mount.path() / "a.md").write_text("text\n")
    deadline = time.monotonic() + 10
    while "injected chunk failure" not in mount.log():
        assert time.monotonic() < deadline, "the reindex never ran"
        time.sleep(0.05)
    assert mount.proc.poll() is None, "the daemon ended"
    (mount.path() / "b.md").write_text("still serving\n")
    sql_conn.execute("DROP TRIGGER test_refuse_chunks ON memory_chunks")
    wait_reindex_queue_empty(sql_conn, timeout=30)
    assert chunks_of(sql_conn, "a.md") == ["text\n"]
