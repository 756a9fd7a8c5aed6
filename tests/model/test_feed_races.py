"""Other writers' changes read while this mount saves the same document.

The change feed (and a resync) read rows first and apply them afterwards, under the
namespace lock.  A save made here in between is newer than the row read: applying that row
would roll the file back to the other writer's version, its older size and its cached
content, and the next program to read and save the file would erase the save (the save race
test lost rsync's line that way).  The store calls are held open with a real database
underneath; only their timing is arranged.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from typing import Any
from uuid import UUID

import psycopg
import pytest
import trio

from memfs.db.reborn.store import RebornStore
from memfs.errors import FsError
from memfs.tree import ROOT_INODE, FileNode
from memfs.vfs import Filesystem, OtherWriters
from tests.engines import ENGINES
from tests.model.conftest import Solo
from tests.model.test_vfs import WRITE, write_file


def held(
    fn: Callable[..., Any], release: threading.Event, entered: threading.Event | None = None
) -> Callable[..., Any]:
    """``fn``, whose answer is held back (already read) until ``release`` is set;
    ``entered`` is set once it has been called (the race was run, not passed by)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        if entered is not None:
            entered.set()
        answer = fn(*args, **kwargs)
        assert release.wait(10), "the test never released the held call"
        return answer

    return call


def feed_event(fs: Filesystem, doc_id: UUID | None, path: str) -> dict[str, Any]:
    """The change feed's event of another writer's update of ``path``, as the engine's
    trigger sends it (legacy: the row's id and owner; Reborn: the row's whole path)."""
    if isinstance(fs.store, RebornStore):
        return {"op": "UPDATE", "path": f"{fs.store.scope.prefix}/{path}",
                "origin": "another-writer"}  # fmt: skip
    return {"op": "UPDATE", "id": str(doc_id), "path": path, "user": "default",
            "agent": None, "origin": "another-writer"}  # fmt: skip


#: The engines with a change feed (PostgreSQL's): the libSQL file is polled.
with_feed = pytest.mark.parametrize("engine", ENGINES, indirect=True, ids=str)


async def read_all(fs: Filesystem, ino: int) -> bytes:
    fh, _ = await fs.open(ino, os.O_RDONLY)
    try:
        return await fs.read(fh, 0, 1 << 16)
    finally:
        await fs.release(fh)


async def save_by_rename(fs: Filesystem, text: bytes) -> None:
    """rsync's save: a temporary written and renamed over the document."""
    fh, _ = await fs.create(ROOT_INODE, ".doc.md.Xa1b2c", 0o644, WRITE)
    await fs.write(fh, 0, text)
    await fs.release(fh)
    await fs.rename(ROOT_INODE, ".doc.md.Xa1b2c", ROOT_INODE, "doc.md")


async def save_in_place(fs: Filesystem, text: bytes) -> None:
    node = await fs.lookup(ROOT_INODE, "doc.md")
    fh, _ = await fs.open(node.ino, os.O_WRONLY | os.O_TRUNC)
    await fs.write(fh, 0, text)
    await fs.release(fh)


@with_feed
@pytest.mark.parametrize("save", [save_by_rename, save_in_place])
async def test_a_feed_row_read_before_a_save_here_does_not_roll_the_file_back(
    solo: Solo,
    sql_conn: psycopg.Connection[Any],
    monkeypatch: pytest.MonkeyPatch,
    save: Callable[[Filesystem, bytes], Any],
) -> None:
    fs, docs = solo.fs, solo.engine.contents
    ino = await write_file(fs, ROOT_INODE, "doc.md", b"# shared\n")
    node = fs.state.tree.get_file(ino)
    assert node.doc_id is not None
    assert solo.engine.agent_appends(sql_conn, "doc.md", "agent 0\n")
    await read_all(fs, ino)  # this mount has seen the agent's version (rsync --checksum)
    release, entered = threading.Event(), threading.Event()
    monkeypatch.setattr(fs.store, "document_rows", held(fs.store.document_rows, release, entered))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(OtherWriters(fs).apply_changes, [feed_event(fs, node.doc_id, "doc.md")])
        await trio.sleep(0.2)  # the feed has read the agent's row and waits
        assert entered.is_set(), "the feed never asked for the row"
        mine = b"# shared\nagent 0\nhuman rsync\n"
        with trio.fail_after(10):
            await save(fs, mine)
        release.set()
    assert docs(sql_conn) == {"doc.md": mine.decode()}
    shown = await fs.lookup(ROOT_INODE, "doc.md")
    assert isinstance(shown, FileNode)
    assert fs.getattr(shown.ino).size == len(mine), "the kernel would cut reads short"
    assert await read_all(fs, shown.ino) == mine, "the next saver would erase this save"


async def test_a_resync_read_before_changes_here_neither_hides_nor_rolls_them_back(
    solo: Solo, sql_conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    fs, docs = solo.fs, solo.engine.contents
    await write_file(fs, ROOT_INODE, "doc.md", b"old\n")
    release, entered = threading.Event(), threading.Event()
    # The read the resync starts with: every version where the engine lists them (the
    # polled engines and Reborn), else every row.
    first = "load_documents" if fs.store.document_versions() is None else "document_versions"
    monkeypatch.setattr(fs.store, first, held(getattr(fs.store, first), release, entered))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(OtherWriters(fs).resync)
        await trio.sleep(0.2)  # the resync has read the rows and waits
        assert entered.is_set(), "the resync never read the rows"
        with trio.fail_after(10):
            await write_file(fs, ROOT_INODE, "new.md", b"new\n")
            await save_in_place(fs, b"changed here\n")
        release.set()
    assert docs(sql_conn) == {"doc.md": "changed here\n", "new.md": "new\n"}
    assert sorted(fs.state.tree.get_dir(ROOT_INODE).children) == ["doc.md", "new.md"]
    node = await fs.lookup(ROOT_INODE, "doc.md")
    assert fs.getattr(node.ino).size == len(b"changed here\n")
    assert await read_all(fs, node.ino) == b"changed here\n"


async def test_a_read_answered_after_a_save_here_does_not_roll_the_file_back(
    solo: Solo, sql_conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    fs, docs = solo.fs, solo.engine.contents
    ino = await write_file(fs, ROOT_INODE, "doc.md", b"# shared\n")
    node = fs.state.tree.get_file(ino)
    assert node.doc_id is not None
    fs.lookups.cache.drop(node.doc_id)
    release, entered = threading.Event(), threading.Event()
    monkeypatch.setattr(fs.store, "read_contents", held(fs.store.read_contents, release, entered))
    read: list[bytes] = []

    async def reader() -> None:
        read.append(await read_all(fs, ino))

    mine = b"# shared\nsaved while a reader waited\n"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.sleep(0.2)  # the reader's row (the old content) is read and waits
        assert entered.is_set(), "the reader never read the row"
        with trio.fail_after(10):
            await save_in_place(fs, mine)
        release.set()
    assert read == [mine], "the open returned after the save: it reads the save"
    assert docs(sql_conn) == {"doc.md": mine.decode()}
    assert fs.getattr(ino).size == len(mine)
    assert await read_all(fs, ino) == mine


@with_feed
@pytest.mark.parametrize("sender", [False, True], ids=["immediate", "deferred"])
async def test_a_feed_row_read_before_a_removal_or_folder_move_here_is_not_applied(
    solo: Solo, sql_conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch,
    sender: bool,
) -> None:  # fmt: skip
    """The removal and the folder rename ride on the next transaction when the sender runs
    (``memfs.db.deferred``): the rows read meanwhile still show the old state."""
    fs, docs = solo.fs, solo.engine.contents
    folder = await fs.mkdir(ROOT_INODE, "a", 0o755)
    x = await write_file(fs, folder.ino, "x.md", b"x\n")
    gone = await write_file(fs, ROOT_INODE, "gone.md", b"gone\n")
    ids = [fs.state.tree.get_file(ino).doc_id for ino in (x, gone)]
    # (Only x.md changes: a removal of a row changed after the mount showed it is not made,
    # see test_deferred_guards.py; gone.md's event is a touch that left the row as shown.)
    assert solo.engine.agent_appends(sql_conn, "a/x.md", "agent\n")
    release, entered = threading.Event(), threading.Event()
    monkeypatch.setattr(fs.store, "document_rows", held(fs.store.document_rows, release, entered))
    async with trio.open_nursery() as nursery:
        if sender:
            await nursery.start(fs.send_changes)
        events = [feed_event(fs, d, p) for d, p in zip(ids, ["a/x.md", "gone.md"], strict=True)]
        nursery.start_soon(OtherWriters(fs).apply_changes, events)
        await trio.sleep(0.2)  # the feed has read both rows at their old paths and waits
        assert entered.is_set(), "the feed never asked for the rows"
        with trio.fail_after(10):
            await fs.rename(ROOT_INODE, "a", ROOT_INODE, "b")
            await fs.unlink(ROOT_INODE, "gone.md")
        release.set()
        await trio.sleep(0.2)
        await fs.flush_changes()
        nursery.cancel_scope.cancel()
    assert sorted(fs.state.tree.get_dir(ROOT_INODE).children) == ["b"], "moved back or revived"
    moved = await fs.lookup(folder.ino, "x.md")
    assert await read_all(fs, moved.ino) == b"x\nagent\n"
    assert docs(sql_conn) == {"b/x.md": "x\nagent\n"}


@pytest.mark.parametrize("move", ["file", "folder"])
async def test_a_rename_here_after_another_writers_change_does_not_serve_the_old_content(
    solo: Solo, sql_conn: psycopg.Connection[Any], move: str
) -> None:
    """The rename's new row version is adopted with the cached content only if the row was
    still at the version this mount showed: otherwise the next read served the content
    from before the other writer's change, and a save of it overwrote that change with no
    version kept (the save's version check passed)."""
    fs = solo.fs
    folder = await fs.mkdir(ROOT_INODE, "a", 0o755)
    ino = await write_file(fs, folder.ino, "x.md", b"mine\n")
    assert solo.engine.agent_appends(sql_conn, "a/x.md", "agent\n")
    if move == "file":
        await fs.rename(folder.ino, "x.md", folder.ino, "y.md")
    else:
        await fs.rename(ROOT_INODE, "a", ROOT_INODE, "b")
    assert await read_all(fs, ino) == b"mine\nagent\n"
    assert fs.getattr(ino).size == len(b"mine\nagent\n")


async def test_a_file_deleted_elsewhere_while_written_here_can_be_renamed_and_flushed_at_once(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    """The Reborn soak's hang (emacs's rename waited 22 minutes): another writer deleted
    x.md while it was open for writing here, so its next commit places a new row by path.
    That commit took the namespace lock inside the buffer's; a rename holds the namespace
    lock and commits its source under it, taking the buffer's.  A flush and a rename
    started together (trio orders each batch at random: both orders come up in 20 rounds)
    deadlocked, or the rename re-took the lock it held (EIO)."""
    fs, docs = solo.fs, solo.engine.contents
    for round_ in range(20):
        name = f"x{round_}.md"
        ino = await write_file(fs, ROOT_INODE, name, b"old\n")
        node = fs.state.tree.get_file(ino)
        assert node.doc_id is not None
        fh, _ = await fs.open(ino, WRITE)
        await fs.write(fh, 0, b"new\n")
        solo.engine.agent_deletes(sql_conn, name)
        async with fs.state.ns_lock:
            fs.lookups.apply_deletion(node.doc_id)  # as the change feed applies it
        assert node.doc_id is None and node.parent is not None
        with trio.fail_after(10):  # a deadlock fails here, not at the suite's timeout
            async with trio.open_nursery() as nursery:
                nursery.start_soon(fs.flush, fh)
                nursery.start_soon(fs.rename, ROOT_INODE, name, ROOT_INODE, name + "~")  # emacs
        await fs.release(fh)
        assert docs(sql_conn)[name] == "new\n"  # saved anew; the backup name is scratch
        assert name not in fs.state.tree.get_dir(ROOT_INODE).children


async def test_a_rename_commits_a_file_without_a_row_under_the_lock_it_holds(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    """Without the race: the rename's own commit of such a file re-took the namespace lock
    its rename held (trio's lock is not reentrant): EIO."""
    fs, docs = solo.fs, solo.engine.contents
    ino = await write_file(fs, ROOT_INODE, "x.md", b"old\n")
    node = fs.state.tree.get_file(ino)
    fh, _ = await fs.open(ino, WRITE)
    await fs.write(fh, 0, b"new\n")
    solo.engine.agent_deletes(sql_conn, "x.md")
    assert node.doc_id is not None
    async with fs.state.ns_lock:
        fs.lookups.apply_deletion(node.doc_id)
    with trio.fail_after(10):
        await fs.rename(ROOT_INODE, "x.md", ROOT_INODE, "x.md~")
    await fs.release(fh)
    assert docs(sql_conn) == {"x.md": "new\n"}


async def test_a_row_moved_onto_a_name_being_written_here_leaves_no_phantom(
    fs: Filesystem, sql_conn: psycopg.Connection[Any]
) -> None:
    """Found by the history checker's ``.at/`` snapshots (seed 2, legacy): another writer
    renamed ``.z.md.tmp`` to ``z.md`` while this mount was writing a new ``z.md``; the
    move could not be shown (the name was taken), the local ``z.md`` then saved into that
    row, and the old name stayed as an empty unsaved file: ``cp -r`` opening it created an
    empty document nobody wrote."""
    await write_file(fs, ROOT_INODE, ".z.md.tmp", b"theirs\n")
    fh, _ = await fs.create(ROOT_INODE, "z.md", 0o644, WRITE)
    await fs.write(fh, 0, b"mine\n")
    sql_conn.execute("UPDATE memory_documents SET path = 'z.md' WHERE path = '.z.md.tmp'")
    await OtherWriters(fs).resync()  # the move is seen while z.md is being written here
    await fs.release(fh)  # saved into the row now at z.md (merged or kept beside)
    assert ".z.md.tmp" not in fs.state.tree.root.children, "a name no row is at"
    rows = [r[0] for r in sql_conn.execute("SELECT path FROM memory_documents ORDER BY path")]
    assert ".z.md.tmp" not in rows and "z.md" in rows, rows


async def test_a_save_into_a_row_moved_here_unseen_leaves_no_phantom(
    fs: Filesystem, sql_conn: psycopg.Connection[Any]
) -> None:
    """Found by the history checker's ``.at/`` snapshots (seed 6, legacy): another writer
    renamed ``.x.md.tmp`` to ``x.md``; before its event arrived, a new ``x.md`` saved here
    found that row at its name and merged into it.  The row's old node stayed at
    ``.x.md.tmp`` bound to nothing, and ``cp -r`` opening it created an empty document."""
    await write_file(fs, ROOT_INODE, ".x.md.tmp", b"theirs\n")
    sql_conn.execute("UPDATE memory_documents SET path = 'x.md' WHERE path = '.x.md.tmp'")
    await write_file(fs, ROOT_INODE, "x.md", b"mine\n")  # the event has not come yet
    with pytest.raises(FsError) as gone:
        await fs.lookup(ROOT_INODE, ".x.md.tmp")
    assert gone.value.errno == errno.ENOENT
    assert ".x.md.tmp" not in [name for _, name, _ in fs.readdir(fs.opendir(ROOT_INODE), 0)]
    rows = [r[0] for r in sql_conn.execute("SELECT path FROM memory_documents ORDER BY path")]
    assert rows == ["x.md"], rows
