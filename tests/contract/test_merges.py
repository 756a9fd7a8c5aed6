"""Two writers of one document: both edits live when they do not overlap, and the saver's
own bytes are never lost when they do."""

from __future__ import annotations

from memfs.vfs.by_path import PathOperations
from tests.contract.conftest import Workspace

BASE = b"".join(f"line {i}\n".encode() for i in range(12))


def edited(data: bytes, index: int, text: str) -> bytes:
    lines = data.decode().splitlines(keepends=True)
    lines[index] = text + "\n"
    return "".join(lines).encode()


async def test_two_writers_of_distant_lines_both_live(ws: Workspace) -> None:
    await ws.ops.save("m.md", BASE)
    me = PathOperations(ws.fs, pid=4101)
    other = PathOperations(ws.fs, pid=4102)
    mine = await me.read("m.md")
    theirs = await other.read("m.md")
    await other.save("m.md", edited(theirs, 10, "THEIRS"))
    await me.save("m.md", edited(mine, 1, "MINE"))
    stored = (await ws.stored("m.md")).decode()
    assert "MINE" in stored and "THEIRS" in stored


async def test_another_workspaces_change_is_merged_with_a_stale_save(ws: Workspace) -> None:
    await ws.ops.save("m.md", BASE)
    me = PathOperations(ws.fs, pid=4201)
    mine = await me.read("m.md")
    async with ws.fresh() as other:
        await other.save("m.md", edited(await other.read("m.md"), 11, "ELSEWHERE"))
    await me.save("m.md", edited(mine, 0, "HERE"))
    stored = (await ws.stored("m.md")).decode()
    assert "HERE" in stored and "ELSEWHERE" in stored


async def test_an_append_elsewhere_and_an_edit_here_both_live(ws: Workspace) -> None:
    await ws.ops.save("log.md", BASE)
    me = PathOperations(ws.fs, pid=4301)
    mine = await me.read("log.md")
    async with ws.fresh() as other:
        await other.save("log.md", await other.read("log.md") + b"appended\n")
    await me.save("log.md", edited(mine, 3, "edited"))
    stored = (await ws.stored("log.md")).decode()
    assert "appended" in stored and "edited" in stored


async def test_overlapping_edits_keep_both_contents(ws: Workspace) -> None:
    """The same line changed twice: the last save is the document, the other kept."""
    await ws.ops.save("o.md", BASE)
    me = PathOperations(ws.fs, pid=4401)
    mine = await me.read("o.md")
    async with ws.fresh() as other:
        await other.save("o.md", edited(await other.read("o.md"), 5, "THEIRS"))
    await me.save("o.md", edited(mine, 5, "MINE"))
    stored = await ws.stored("o.md")
    assert b"MINE" in stored
    kept = [e.name for e in await ws.ops.list(".versions/o.md")]
    texts = [await ws.ops.read(f".versions/o.md/{n}") for n in kept if n != "current.md"]
    assert any(b"THEIRS" in t for t in texts), kept


async def test_a_merged_save_keeps_its_writers_bytes_in_the_safety_net(ws: Workspace) -> None:
    await ws.ops.save("n.md", BASE)
    me = PathOperations(ws.fs, pid=4501)
    mine = await me.read("n.md")
    async with ws.fresh() as other:
        await other.save("n.md", edited(await other.read("n.md"), 9, "THEIRS"))
    ours = edited(mine, 2, "MINE")
    await me.save("n.md", ours)
    kept = [e.name for e in await ws.ops.list(".versions/n.md") if e.name.startswith("as-saved")]
    assert kept, "a merged save keeps the writer's own bytes"
    assert await ws.ops.read(f".versions/n.md/{kept[-1]}") == ours


async def test_a_writer_that_saw_the_change_overwrites_plainly(ws: Workspace) -> None:
    await ws.ops.save("s.md", BASE)
    async with ws.fresh() as other:
        await other.save("s.md", b"replaced entirely\n")
    await ws.apply_others()
    me = PathOperations(ws.fs, pid=4601)
    assert await me.read("s.md") == b"replaced entirely\n"
    await me.save("s.md", b"mine now\n")
    assert await ws.stored("s.md") == b"mine now\n"
