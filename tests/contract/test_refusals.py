"""Refusals and the rooms beside memory: read-only workspaces, scratch names, the root's
synthetic files.  A refusal fails one operation and the database keeps its content."""

from __future__ import annotations

import errno

import pytest

from memfs.errors import FsError
from tests.contract.conftest import Workspace
from tests.contract.helpers import means, refused


async def test_a_read_only_workspace_reads(ws: Workspace) -> None:
    await ws.ops.save("shared.md", b"shared\n")
    async with ws.read_only() as reader:
        assert await reader.read("shared.md") == b"shared\n"


async def test_a_read_only_workspace_refuses_every_change(ws: Workspace) -> None:
    await ws.ops.save("keep.md", b"keep\n")
    async with ws.read_only() as reader:
        await refused(errno.EROFS, reader.save("keep.md", b"changed\n"))
        await refused(errno.EROFS, reader.save("new.md", b"new\n"))
        await refused(errno.EROFS, reader.mkdir("folder"))
        await refused(errno.EROFS, reader.remove("keep.md"))
        await refused(errno.EROFS, reader.move("keep.md", "moved.md"))
    assert await ws.stored("keep.md") == b"keep\n"


async def test_an_editor_swap_file_never_becomes_a_document(ws: Workspace) -> None:
    await ws.ops.save(".notes.md.swp", b"\x00binary swap")
    assert await ws.ops.read(".notes.md.swp") == b"\x00binary swap"
    assert ".notes.md.swp" not in await ws.stored_names()


async def test_a_temporary_renamed_into_place_saves_the_document(ws: Workspace) -> None:
    await ws.ops.save("doc.md", b"old\n")
    identity = await ws.identity("doc.md")
    await ws.ops.save(".doc.md.tmp123", b"new\n")
    await ws.ops.move(".doc.md.tmp123", "doc.md")
    assert await ws.stored("doc.md") == b"new\n"
    assert await ws.identity("doc.md") == identity


async def test_a_git_folder_is_refused(ws: Workspace) -> None:
    await refused(errno.EPERM, ws.ops.mkdir(".git"))


async def test_the_synthetic_folders_cannot_be_replaced(ws: Workspace) -> None:
    await refused(errno.EEXIST, ws.ops.mkdir(".search"))
    await refused(errno.EROFS, ws.ops.save(".versions/x.md", b"x"))


async def test_the_status_file_reports_the_workspace(ws: Workspace) -> None:
    status = await ws.ops.read(".status")
    assert status and b"\n" in status


async def test_a_refused_save_leaves_the_workspace_usable(ws: Workspace) -> None:
    await refused(errno.EILSEQ, ws.ops.save("bad.md", b"\xff"))
    await ws.ops.save("good.md", b"fine\n")
    assert await ws.stored("good.md") == b"fine\n"


async def test_a_path_longer_than_the_database_takes_is_refused(ws: Workspace) -> None:
    name = "n" * 250
    folder = ""
    with pytest.raises(FsError) as info:
        for _ in range(400):  # 100 kB: past every engine's path index
            folder = f"{folder}/{name}" if folder else name
            await ws.ops.mkdir(folder)
            await ws.ops.save(f"{folder}/doc.md", b"x")
    assert means(info.value, errno.ENAMETOOLONG), info.value


async def test_symbolic_links_cannot_be_documents(ws: Workspace) -> None:
    root = ws.fs.state.tree.root
    await refused(errno.EPERM, ws.fs.symlink(root.ino, "link.md", b"target.md"))


async def test_moving_a_document_into_the_search_tree_is_refused(ws: Workspace) -> None:
    await ws.ops.save("m.md", b"m\n")
    await refused(errno.EPERM, ws.ops.move("m.md", ".search"))
