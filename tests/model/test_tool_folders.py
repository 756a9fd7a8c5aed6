"""Tool folders between two mounts, without a mount (``memfs.vfs.tool_folders``).

The defect this names (CI at e1fbe00, ``test_two_mounts_of_a_workspace_share_tool_folders
_while_both_run[legacy]``, about 1 run in 50 under load): another mount's change to a file
that was open here when this mount looked, and closed while it waited for the database,
was never taken in: ``pending`` was decided by whether the file was *still* open, and no
other event came to make the mount look again."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio

from memfs.config import Settings
from memfs.db import open_database
from memfs.db.calls import DatabaseCalls
from memfs.errors import FsError
from memfs.kernel import RecordingNotifier
from memfs.tree import ROOT_INODE
from memfs.vfs import Filesystem, OtherWriters, ToolFolders
from memfs.vfs.content import DOCUMENT_MAX_BYTES
from memfs.vfs.tool_folders import TOOL_FILE_MAX_BYTES
from tests.engines import Engine
from tests.model.test_feed_races import held


@pytest.fixture
async def two(engine: Engine, database_url: str) -> AsyncIterator[tuple[Filesystem, Filesystem]]:
    """Two mounts of one workspace with its tool folders, on each of the four engines."""
    url = engine.mount_url(database_url)
    databases = [open_database(Settings(database_url=url)) for _ in range(2)]
    mounts = []
    for database in databases:
        calls = DatabaseCalls()
        settings = Settings(database_url=url, user_id="default")
        settings.given.add("user_id")
        workspace = database.workspace(settings, "t")
        fs = Filesystem(
            workspace.documents, uid=1000, gid=1000, calls=calls, kept=workspace.kept,
            kernel=RecordingNotifier(), tools=ToolFolders(workspace.tool_files, calls),
        )  # fmt: skip
        await fs.load()
        mounts.append(fs)
    yield mounts[0], mounts[1]
    for database in databases:
        database.close()


async def write(fs: Filesystem, parent: int, name: str, data: bytes) -> int:
    try:
        node = await fs.lookup(parent, name)
        fh, _ = await fs.open(node.ino, os.O_WRONLY | os.O_TRUNC)
    except Exception as exc:
        if getattr(exc, "errno", None) != errno.ENOENT:
            raise
        fh, node = await fs.create(parent, name, 0o644, os.O_WRONLY)
    await fs.write(fh, 0, data)
    await fs.flush(fh)
    await fs.release(fh)
    return node.ino


def content(fs: Filesystem, path: str) -> bytes:
    node = fs.state.tree.resolve(path)
    assert node is not None
    return bytes(fs.state.buffers[node.ino].snapshot())


async def both_changed_by_the_other(one: Filesystem, other: Filesystem) -> Any:
    """``.obsidian/app.json`` and ``other.json`` made here, seen there, then changed
    there; returns this mount's ``.obsidian`` folder."""
    folder = await one.mkdir(ROOT_INODE, ".obsidian", 0o755)
    await write(one, folder.ino, "app.json", b'{"theme": "dark"}')
    await write(one, folder.ino, "other.json", b"{}")
    await other.names.refresh_tools()
    assert content(other, ".obsidian/app.json") == b'{"theme": "dark"}'
    theirs = other.state.tree.resolve(".obsidian")
    assert theirs is not None
    await write(other, theirs.ino, "app.json", b'{"theme": "light"}')
    await write(other, theirs.ino, "other.json", b'{"x": 1}')
    return folder


async def test_a_change_to_a_file_open_during_the_look_is_taken_once_closed(
    two: tuple[Filesystem, Filesystem],
) -> None:
    one, other = two
    await both_changed_by_the_other(one, other)

    app = one.state.tree.resolve(".obsidian/app.json")
    assert app is not None
    fh, _ = await one.open(app.ino, os.O_RDONLY)  # open here when the mount looks ...
    tools = one.lookups.tools
    assert tools is not None
    reads = tools.store.contents

    def contents_closing_meanwhile(paths: Any) -> Any:
        # ... and closed while the look waits for the other files' contents.
        app.open_count -= 1
        return reads(paths)

    tools.store.contents = contents_closing_meanwhile  # type: ignore[method-assign]
    await one.names.refresh_tools()
    tools.store.contents = reads  # type: ignore[method-assign]
    app.open_count += 1
    await one.release(fh)
    assert content(one, ".obsidian/other.json") == b'{"x": 1}'
    assert tools.pending, "the file open at the look must be looked at again"
    await one.names.retry_tools()  # the upkeep loop's next round: no other event comes
    assert content(one, ".obsidian/app.json") == b'{"theme": "light"}'


async def test_a_file_opened_while_the_look_waits_keeps_this_mounts_content(
    two: tuple[Filesystem, Filesystem],
) -> None:
    """The other way round: closed at the look, opened here while the look waits for the
    contents.  Taking the other mount's content then would swap the buffer under the open
    file (what it writes next would go to a buffer nobody keeps); it is left instead, and
    this mount's next write keeps theirs beside it."""
    one, other = two
    folder = await both_changed_by_the_other(one, other)

    app = one.state.tree.resolve(".obsidian/app.json")
    assert app is not None
    tools = one.lookups.tools
    assert tools is not None
    reads = tools.store.contents

    def contents_opening_meanwhile(paths: Any) -> Any:
        app.open_count += 1  # an editor opens it while the look waits
        return reads(paths)

    tools.store.contents = contents_opening_meanwhile  # type: ignore[method-assign]
    await one.names.refresh_tools()
    tools.store.contents = reads  # type: ignore[method-assign]
    app.open_count -= 1
    assert content(one, ".obsidian/other.json") == b'{"x": 1}'
    assert content(one, ".obsidian/app.json") == b'{"theme": "dark"}', "swapped under it"
    assert tools.pending
    await write(one, folder.ino, "app.json", b'{"theme": "mine"}')  # what the editor saves
    assert content(one, ".obsidian/app.json") == b'{"theme": "mine"}'
    copies = [n for n in one.state.tree.resolve(".obsidian").children if ".conflict-" in n]  # type: ignore[union-attr]
    assert len(copies) == 1
    assert content(one, f".obsidian/{copies[0]}") == b'{"theme": "light"}'


async def test_the_facades_hook_refuses_a_tool_file_past_its_bound_before_the_write(
    two: tuple[Filesystem, Filesystem],
) -> None:
    """A write or a truncation that would take a tool-folder file past the bound is EFBIG
    and changes nothing; a document is bound by its own limit, not the hook's."""
    fs, _ = two
    folder = await fs.mkdir(ROOT_INODE, ".obsidian", 0o755)
    ino = await write(fs, folder.ino, "app.json", b"{}")
    fh, _ = await fs.open(ino, os.O_WRONLY)
    with pytest.raises(FsError) as refused:
        await fs.write(fh, TOOL_FILE_MAX_BYTES, b"x")
    assert refused.value.errno == errno.EFBIG
    with pytest.raises(FsError) as truncated:
        await fs.setattr(ino, size=TOOL_FILE_MAX_BYTES + 1)
    assert truncated.value.errno == errno.EFBIG
    await fs.release(fh)
    assert content(fs, ".obsidian/app.json") == b"{}"
    big = b"y\n" * (DOCUMENT_MAX_BYTES // 2)  # a document's own bound, not the hook's
    await write(fs, ROOT_INODE, "big.md", big)
    assert len(big) == fs.state.tree.get_file(fs.state.tree.resolve("big.md").ino).size
    with pytest.raises(FsError) as document:
        await write(fs, ROOT_INODE, "bigger.md", big + b"y\n")
    assert document.value.errno == errno.EFBIG and "document" in document.value.reason


async def test_a_document_moved_into_a_tool_folder_leaves_memory_once_kept_there(
    two: tuple[Filesystem, Filesystem],
) -> None:
    """Obsidian's delete (``mv note.md .trash/``): the hook keeps it as a tool file, then
    deletes its row; the other mount finds it in ``.trash`` and not in memory."""
    one, other = two
    await write(one, ROOT_INODE, "note.md", b"a note\n")
    trash = await one.mkdir(ROOT_INODE, ".trash", 0o755)
    await one.rename(ROOT_INODE, "note.md", trash.ino, "note.md")
    assert [row.path for row in one.store.load_documents()] == []
    await other.names.refresh_tools()
    assert content(other, ".trash/note.md") == b"a note\n"


async def test_a_document_moved_into_the_trash_while_a_poll_reads_stays_out_of_memory(
    two: tuple[Filesystem, Filesystem], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Obsidian's delete (a note renamed into ``.trash``) while a poll's read of every row
    is on its way: the row waits until the trash has the note, and the poll, finding it
    still there, showed the note again beside the trash (CI, ``ironclaw.db``, about 1 run
    in 30 of ``test_obsidian_vault_state_persists_and_never_becomes_memory``)."""
    fs, _ = two
    await write(fs, ROOT_INODE, "deleted note.md", b"the launch code\n")
    trash = await fs.mkdir(ROOT_INODE, ".trash", 0o755)
    read_rows = threading.Event()
    kept_in_trash = threading.Event()
    for name in ("document_versions", "load_documents"):
        monkeypatch.setattr(fs.store, name, held(getattr(fs.store, name), read_rows))
    tools = fs.lookups.tools
    assert tools is not None
    monkeypatch.setattr(tools.store, "apply_checked",
                        held(tools.store.apply_checked, kept_in_trash))  # fmt: skip
    async with trio.open_nursery() as nursery:
        nursery.start_soon(OtherWriters(fs).resync)
        await trio.sleep(0.2)  # the poll has read the rows (the note among them) and waits
        nursery.start_soon(fs.rename, ROOT_INODE, "deleted note.md", trash.ino, "deleted note.md")
        await trio.sleep(0.2)  # renamed in the tree; the trash's write waits
        read_rows.set()
        await trio.sleep(0.2)  # the poll re-reads the note's row: still there
        kept_in_trash.set()
    assert sorted(fs.state.tree.get_dir(ROOT_INODE).children) == [".trash"]
    assert "deleted note.md" in fs.state.tree.get_dir(trash.ino).children


async def test_a_temporary_renamed_away_while_the_look_reads_is_not_brought_back(
    two: tuple[Filesystem, Filesystem], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Obsidian's save (``app.json.tmp`` renamed over ``app.json``) while this mount's look
    at the table is on its way, the other mount having changed the temporary: the look
    read the table with the temporary in it, then looked at the tree without it, took it
    for one the other mount made and brought it back (on ``ironclaw.db``, where every
    tool file looked changed, a leftover ``app.json.tmp`` in about 1 run in 20).  The
    rename is this mount's own change: the temporary stays gone, and the other mount's
    bytes are kept beside it, once."""
    one, other = two
    folder = await one.mkdir(ROOT_INODE, ".obsidian", 0o755)
    await write(one, folder.ino, "app.json.tmp", b"mine")
    await other.names.refresh_tools()
    theirs = other.state.tree.resolve(".obsidian")
    assert theirs is not None
    await write(other, theirs.ino, "app.json.tmp", b"theirs")
    tools = one.lookups.tools
    assert tools is not None
    read = threading.Event()
    monkeypatch.setattr(tools.store, "digests", held(tools.store.digests, read))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(one.names.refresh_tools)
        await trio.sleep(0.2)  # the look has read the table (their temporary in it)
        nursery.start_soon(one.rename, folder.ino, "app.json.tmp", folder.ino, "app.json")
        await trio.sleep(0.2)  # renamed in the tree; the rename's write waits for the look
        read.set()
    await one.names.sync_tools()
    await one.names.refresh_tools()
    names = sorted(folder.children)
    assert "app.json.tmp" not in names, names
    assert content(one, ".obsidian/app.json") == b"mine"
    copies = [n for n in names if ".conflict-" in n]
    assert len(copies) == 1, names
    assert content(one, f".obsidian/{copies[0]}") == b"theirs"
    await other.names.refresh_tools()
    assert sorted(theirs.children) == names  # type: ignore[attr-defined]
