"""Polling (no change feed: IronClaw's Reborn layouts, ``--no-trigger``): once the
workspace's fingerprint moves, a listing of row versions is diffed against the last one and
only the rows that changed are read; the whole workspace is read again only when there is
no base to diff against.  The result must be what a whole reload shows."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import trio

from memfs.db.reborn.layout import RebornScope
from memfs.db.reborn.sqlite import SqliteRows, open_file
from memfs.db.reborn.store import RebornStore
from memfs.tree import ROOT_INODE, FileNode
from memfs.vfs import Filesystem, OtherWriters
from tests.ironclaw_libsql import reborn_local_dev
from tests.model.conftest import settle


async def write_file(fs: Filesystem, parent: int, name: str, data: bytes) -> None:
    fh, _ = await fs.create(parent, name, 0o644, os.O_WRONLY)
    await fs.write(fh, 0, data)
    await fs.release(fh)


async def shown(fs: Filesystem) -> dict[str, bytes]:
    """Every document ``fs`` shows, by path, with its content."""
    found = {}
    for doc_id, path in fs.tree.document_paths().items():
        node = fs.tree.docs[doc_id]
        assert isinstance(node, FileNode)
        fh, _ = await fs.open(node.ino, os.O_RDONLY)
        found[path] = await fs.read(fh, 0, 1 << 20)
        await fs.release(fh)
    return found


async def until(check: Callable[[], bool], what: str) -> None:
    with trio.move_on_after(10):
        while not check():
            await trio.sleep(0.02)
        return
    raise AssertionError(f"not within 10 s: {what}")


@pytest.fixture
async def two_on_libsql(tmp_path: Path) -> AsyncIterator[tuple[Filesystem, Filesystem]]:
    """Two mounts of one IronClaw libSQL file (two connections), as ``two`` is on
    PostgreSQL."""
    db = reborn_local_dev(tmp_path / "reborn-local-dev.db")
    files = [open_file(db) for _ in range(2)]
    mounts = [Filesystem(RebornStore(f, RebornScope(), origin=f"m{n}", rows=SqliteRows(f)),
                         uid=1000, gid=1000) for n, f in enumerate(files)]  # fmt: skip
    try:
        async with trio.open_nursery() as nursery:
            for fs in mounts:
                await fs.load()
                await nursery.start(fs.send_changes)
            yield mounts[0], mounts[1]
            nursery.cancel_scope.cancel()
    finally:
        for f in files:
            f.close()


async def test_a_poll_reads_only_what_changed(two: tuple[Filesystem, Filesystem]) -> None:
    """Saves, a new document, a rename, a removal and a folder's documents by another
    mount all show on the polling mount, with no whole reload, and it then shows what a
    whole reload of the workspace shows."""
    await polls_only_what_changed(*two)


async def test_a_poll_reads_only_what_changed_on_libsql(
    two_on_libsql: tuple[Filesystem, Filesystem],
) -> None:
    await polls_only_what_changed(*two_on_libsql)


async def polls_only_what_changed(polling: Filesystem, other: Filesystem) -> None:
    for n in range(5):
        await write_file(other, ROOT_INODE, f"n{n}.md", f"first {n}\n".encode())
    await settle(other)
    writers = OtherWriters(polling)
    await writers.baseline()
    await polling.load()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(writers.poll_changes, 0.05)
        await until(lambda: polling.tree.resolve("n4.md") is not None, "the first documents")
        await write_file(other, ROOT_INODE, "n0.md", b"saved again\n")
        await write_file(other, ROOT_INODE, "new.md", b"new\n")
        await other.rename(ROOT_INODE, "n1.md", ROOT_INODE, "moved.md")
        await other.unlink(ROOT_INODE, "n2.md")
        folder = await other.mkdir(ROOT_INODE, "folder", 0o755)
        await write_file(other, folder.ino, "inside.md", b"inside\n")
        await settle(other)
        expected = await shown(other)
        await until(lambda: set(polling.tree.document_paths().values()) == set(expected),
                    "the other mount's paths")  # fmt: skip
        assert await shown(polling) == expected
        assert writers.reloads == 0, "a poll read the whole workspace again"
        assert writers.external_changes >= 5  # a rename is one change, or two on Reborn
        nursery.cancel_scope.cancel()
    await writers.resync()  # a whole reload changes nothing more
    assert await shown(polling) == expected
