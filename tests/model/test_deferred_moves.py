"""Directory renames and mkdir left for the next transaction (``memfs.db.deferred``): the
syscall returns before PostgreSQL rewrites the paths below, and nothing the mount does
afterwards can run ahead of it or mistake the moved rows' new versions for another
writer's change."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

import psycopg
import pytest
import trio

from memfs.db import Database, Scope
from memfs.tree import ROOT_INODE
from memfs.vfs import Filesystem
from tests.model.test_deferred_deletes import rows
from tests.model.test_round_trips import write_file
from tests.netproxy import DelayProxy


def kept_dirs(conn: psycopg.Connection[Any]) -> list[str]:
    return [r[0] for r in conn.execute("SELECT path FROM memfs.directories ORDER BY path")]


@pytest.fixture
async def far_fs(far: tuple[Database, DelayProxy]) -> AsyncIterator[tuple[Filesystem, DelayProxy]]:
    """The model 10 ms from its database, its sender running as in a mount."""
    db, proxy = far
    fs = Filesystem(db.store(Scope("default")), uid=1000, gid=1000)
    await fs.load()
    async with trio.open_nursery() as nursery:
        await nursery.start(fs.send_changes)
        yield fs, proxy
        nursery.cancel_scope.cancel()


async def test_a_directory_rename_returns_before_its_round_trip_and_lands_soon(
    far_fs: tuple[Filesystem, DelayProxy], sql_conn: psycopg.Connection[Any]
) -> None:
    fs, proxy = far_fs
    folder = await fs.mkdir(ROOT_INODE, "projects", 0o755)
    for i in range(50):
        await write_file(fs, folder.ino, f"{i}.md", b"deploy\n")
    await fs.flush_changes()
    proxy.reset()
    with trio.fail_after(5):
        await fs.rename(ROOT_INODE, "projects", ROOT_INODE, "archive")
    # Counted, not timed (a busy machine stalls the model itself): the rename's path sent
    # nothing through the proxy before it returned.
    assert proxy.round_trips == 0, "no round trip on the rename's path"
    assert sorted(fs.state.tree.get_dir(ROOT_INODE).children) == ["archive"]
    with trio.fail_after(5):
        while rows(sql_conn)[0] != "archive/0.md":
            await trio.sleep(0.005)
    assert len(rows(sql_conn)) == 50
    assert all(path.startswith("archive/") for path in rows(sql_conn))
    assert kept_dirs(sql_conn) == ["archive"]


async def test_a_save_right_after_a_directory_rename_is_not_a_conflict(
    far_fs: tuple[Filesystem, DelayProxy], sql_conn: psycopg.Connection[Any]
) -> None:
    """The rename bumps every moved row's ``updated_at`` (IronClaw's trigger); a save
    issued before the mount took those in would look like another writer's change."""
    fs, _ = far_fs
    folder = await fs.mkdir(ROOT_INODE, "a", 0o755)
    ino = await write_file(fs, folder.ino, "x.md", b"one\n")
    await fs.flush_changes()
    await fs.rename(ROOT_INODE, "a", ROOT_INODE, "b")
    fh, _ = await fs.open(ino, os.O_WRONLY | os.O_TRUNC)  # at once: the rename is not sent
    await fs.write(fh, 0, b"two\n")
    await fs.release(fh)
    assert rows(sql_conn) == ["b/x.md"], "no conflict copy"
    found = sql_conn.execute(
        "SELECT d.content, (SELECT count(*) FROM memory_document_versions v "
        "WHERE v.document_id = d.id) FROM memory_documents d"
    ).fetchone()
    assert found == ("two\n", 1), "IronClaw's one version of the previous content"


async def test_changes_after_a_rename_keep_their_order(
    far_fs: tuple[Filesystem, DelayProxy], sql_conn: psycopg.Connection[Any]
) -> None:
    """``mv a b; mkdir a; echo > a/new.md; rm -r b`` in one burst: the database ends as the
    mount shows it."""
    fs, _ = far_fs
    a = await fs.mkdir(ROOT_INODE, "a", 0o755)
    await write_file(fs, a.ino, "old.md", b"old\n")
    await fs.flush_changes()
    await fs.rename(ROOT_INODE, "a", ROOT_INODE, "b")
    again = await fs.mkdir(ROOT_INODE, "a", 0o755)
    await write_file(fs, again.ino, "new.md", b"new\n")
    b = await fs.lookup(ROOT_INODE, "b")
    await fs.unlink(b.ino, "old.md")
    await fs.rmdir(ROOT_INODE, "b")
    empty = await fs.mkdir(ROOT_INODE, "empty", 0o755)
    await fs.rmdir(ROOT_INODE, "empty")
    assert empty.ino
    await fs.flush_changes()
    assert rows(sql_conn) == ["a/new.md"]
    assert kept_dirs(sql_conn) == ["a"]
    reloaded = Filesystem(fs.store, uid=1000, gid=1000)
    await reloaded.load()
    assert sorted(reloaded.state.tree.get_dir(ROOT_INODE).children) == ["a"]
