"""Versions: what a save replaces is kept, and ``.versions/`` shows it."""

from __future__ import annotations

import errno

from tests.contract.conftest import Workspace
from tests.contract.helpers import refused


async def version_files(ws: Workspace, path: str) -> list[str]:
    return [e.name for e in await ws.ops.list(f".versions/{path}") if e.name[0].isdigit()]


async def test_a_changed_save_keeps_the_replaced_content(ws: Workspace) -> None:
    await ws.ops.save("v.md", b"first\n")
    await ws.ops.save("v.md", b"second\n")
    kept = await version_files(ws, "v.md")
    assert len(kept) == 1
    assert await ws.ops.read(f".versions/v.md/{kept[0]}") == b"first\n"


async def test_each_change_adds_one_version_oldest_first(ws: Workspace) -> None:
    for i in range(5):
        await ws.ops.save("v.md", f"content {i}\n".encode())
    kept = await version_files(ws, "v.md")
    assert kept == sorted(kept) and len(kept) == 4
    contents = [await ws.ops.read(f".versions/v.md/{name}") for name in kept]
    assert contents == [f"content {i}\n".encode() for i in range(4)]


async def test_an_unchanged_save_adds_no_version(ws: Workspace) -> None:
    await ws.ops.save("v.md", b"same\n")
    await ws.ops.save("v.md", b"changed\n")
    await ws.ops.save("v.md", b"changed\n")
    assert len(await version_files(ws, "v.md")) == 1


async def test_current_shows_the_committed_content(ws: Workspace) -> None:
    await ws.ops.save("c.md", b"one\n")
    await ws.ops.save("c.md", b"two\n")
    assert await ws.ops.read(".versions/c.md/current.md") == b"two\n"


async def test_versions_are_read_only(ws: Workspace) -> None:
    await ws.ops.save("r.md", b"one\n")
    await ws.ops.save("r.md", b"two\n")
    kept = await version_files(ws, "r.md")
    await refused(errno.EROFS, ws.ops.save(f".versions/r.md/{kept[0]}", b"x"))
    await refused(errno.EROFS, ws.ops.remove(f".versions/r.md/{kept[0]}"))


async def test_restoring_a_version_is_an_ordinary_save(ws: Workspace) -> None:
    await ws.ops.save("x.md", b"good\n")
    await ws.ops.save("x.md", b"bad\n")
    kept = await version_files(ws, "x.md")
    await ws.ops.copy(f".versions/x.md/{kept[0]}", "x.md")
    assert await ws.stored("x.md") == b"good\n"
    assert len(await version_files(ws, "x.md")) == 2


async def test_versions_of_a_folder_list_its_documents(ws: Workspace) -> None:
    await ws.ops.mkdir("f")
    await ws.ops.save("f/a.md", b"a")
    assert "a.md" in [e.name for e in await ws.ops.list(".versions/f")]


async def test_versions_seen_by_a_fresh_workspace(ws: Workspace) -> None:
    await ws.ops.save("p.md", b"one\n")
    await ws.ops.save("p.md", b"two\n")
    async with ws.fresh() as other:
        kept = [e.name for e in await other.list(".versions/p.md") if e.name[0].isdigit()]
        assert [await other.read(f".versions/p.md/{n}") for n in kept] == [b"one\n"]


async def test_a_deleted_document_is_not_shown_in_versions(ws: Workspace) -> None:
    await ws.ops.save("d.md", b"one\n")
    await ws.ops.save("d.md", b"two\n")
    await ws.ops.remove("d.md")
    await ws.fs.flush_changes()
    await refused(errno.ENOENT, ws.ops.list(".versions/d.md"))


async def test_the_recent_folder_lists_a_fresh_save(ws: Workspace) -> None:
    await ws.ops.save("fresh.md", b"new\n")
    names = [e.name for e in await ws.ops.list(".recent")]
    assert any("fresh.md" in name for name in names), names
