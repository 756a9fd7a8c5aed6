"""``.search/<query>/``: IronClaw's ranking over the workspace, as files."""

from __future__ import annotations

import errno

from tests.contract.conftest import Workspace
from tests.contract.helpers import refused


async def results(ws: Workspace, query: str) -> list[str]:
    return [e.name for e in await ws.ops.list(f".search/{query}")]


async def test_a_saved_document_is_found_by_a_word(ws: Workspace) -> None:
    await ws.ops.save("animals.md", b"the capybara sleeps by the river\n")
    await ws.ops.save("other.md", b"nothing to see here\n")
    found = await results(ws, "capybara")
    assert any("animals.md" in name for name in found), found
    assert not any("other.md" in name for name in found), found


async def test_results_are_ranked_files_named_by_rank_and_path(ws: Workspace) -> None:
    await ws.ops.mkdir("daily")
    await ws.ops.save("daily/day.md", b"ocelot ocelot ocelot\n")
    found = await results(ws, "ocelot")
    rank, _, shown = found[0].partition("-")
    assert int(rank) == 1 and shown.endswith("day.md") and "daily" in shown, found


async def test_a_result_file_holds_the_matching_text(ws: Workspace) -> None:
    await ws.ops.save("wombat.md", b"a wombat digs burrows\n")
    found = await results(ws, "wombat")
    assert b"wombat" in await ws.ops.read(f".search/wombat/{found[0]}")


async def test_a_changed_document_is_found_by_its_new_words(ws: Workspace) -> None:
    await ws.ops.save("change.md", b"before narwhal\n")
    await ws.ops.save("change.md", b"after pangolin\n")
    assert any("change.md" in n for n in await results(ws, "pangolin"))
    assert not any("change.md" in n for n in await results(ws, "narwhal"))


async def test_a_deleted_document_is_not_found(ws: Workspace) -> None:
    await ws.ops.save("lost.md", b"axolotl\n")
    await ws.ops.remove("lost.md")
    await ws.fs.flush_changes()
    assert not any("lost.md" in n for n in await results(ws, "axolotl"))


async def test_a_limit_bounds_the_results(ws: Workspace) -> None:
    for i in range(6):
        await ws.ops.save(f"k{i}.md", f"kinkajou number {i}\n".encode())
    assert len(await results(ws, "kinkajou --limit=2")) == 2


async def test_an_unknown_option_is_einval(ws: Workspace) -> None:
    await refused(errno.EINVAL, ws.ops.list(".search/word --bogus"))


async def test_search_results_are_read_only(ws: Workspace) -> None:
    await ws.ops.save("ro.md", b"tapir\n")
    found = await results(ws, "tapir")
    await refused(errno.EROFS, ws.ops.save(f".search/tapir/{found[0]}", b"x"))


async def test_a_word_nobody_wrote_finds_nothing(ws: Workspace) -> None:
    await ws.ops.save("a.md", b"plain words\n")
    assert await results(ws, "zzyzxqwv") == []
