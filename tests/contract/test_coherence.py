"""Other writers: what the agent (IronClaw itself) and another workspace change shows up,
and nothing either saved is lost."""

from __future__ import annotations

import errno
from typing import Any

import psycopg

from tests.contract.conftest import Workspace
from tests.contract.helpers import refused


async def test_a_document_the_agent_writes_appears(
    ws: Workspace, sql_conn: psycopg.Connection[Any]
) -> None:
    ws.engine.agent_writes(sql_conn, ws.url, {"agent.md": "from the agent\n"})
    await ws.apply_others()
    assert await ws.ops.read("agent.md") == b"from the agent\n"


async def test_a_document_the_agent_overwrites_shows_the_new_content(
    ws: Workspace, sql_conn: psycopg.Connection[Any]
) -> None:
    await ws.ops.save("shared.md", b"mine\n")
    ws.engine.agent_overwrites(sql_conn, "shared.md", "the agent's\n")
    await ws.apply_others()
    assert await ws.ops.read("shared.md") == b"the agent's\n"


async def test_a_document_the_agent_deletes_disappears(
    ws: Workspace, sql_conn: psycopg.Connection[Any]
) -> None:
    await ws.ops.save("doomed.md", b"x\n")
    ws.engine.agent_deletes(sql_conn, "doomed.md")
    await ws.apply_others()
    await refused(errno.ENOENT, ws.ops.read("doomed.md"))


async def test_an_agents_append_is_merged_with_a_stale_save(
    ws: Workspace, sql_conn: psycopg.Connection[Any]
) -> None:
    body = "".join(f"line {i}\n" for i in range(10))
    await ws.ops.save("journal.md", body.encode())
    mine = await ws.ops.read("journal.md")
    assert ws.engine.agent_appends(sql_conn, "journal.md", "agent line")
    lines = mine.decode().splitlines(keepends=True)
    lines[0] = "edited here\n"
    await ws.ops.save("journal.md", "".join(lines).encode())
    stored = (await ws.stored("journal.md")).decode()
    assert "agent line" in stored and "edited here" in stored


async def test_another_workspaces_new_document_appears(ws: Workspace) -> None:
    async with ws.fresh() as other:
        await other.save("theirs.md", b"theirs\n")
    await ws.apply_others()
    assert await ws.ops.read("theirs.md") == b"theirs\n"


async def test_another_workspaces_rename_is_seen(ws: Workspace) -> None:
    await ws.ops.save("before.md", b"b\n")
    async with ws.fresh() as other:
        await other.move("before.md", "after.md")
        await other.fs.flush_changes()
    await ws.apply_others()
    assert await ws.ops.read("after.md") == b"b\n"
    await refused(errno.ENOENT, ws.ops.read("before.md"))


async def test_another_workspaces_delete_is_seen(ws: Workspace) -> None:
    await ws.ops.save("gone.md", b"g\n")
    async with ws.fresh() as other:
        await other.remove("gone.md")
        await other.fs.flush_changes()
    await ws.apply_others()
    assert not await ws.ops.exists("gone.md")


async def test_a_save_over_a_document_deleted_elsewhere_saves_it_anew(ws: Workspace) -> None:
    await ws.ops.save("phoenix.md", b"one\n")
    async with ws.fresh() as other:
        await other.remove("phoenix.md")
        await other.fs.flush_changes()
    await ws.ops.save("phoenix.md", b"two\n")
    assert await ws.stored("phoenix.md") == b"two\n"


async def test_alternating_saves_of_two_workspaces_lose_nothing(ws: Workspace) -> None:
    """Each writer appends its own line, twenty rounds, on a stale view each time."""
    await ws.ops.save("race.md", b"start\n")
    async with ws.fresh() as other:
        for i in range(20):
            here = await ws.ops.read("race.md")
            there = await other.read("race.md")
            await other.save("race.md", there + f"there {i}\n".encode())
            await ws.ops.save("race.md", here + f"here {i}\n".encode())
    stored = (await ws.stored("race.md")).decode()
    for i in range(20):
        assert f"here {i}\n" in stored
    kept = [e.name for e in await ws.ops.list(".versions/race.md")]
    texts = b"".join([await ws.ops.read(f".versions/race.md/{n}") for n in kept])
    for i in range(20):
        assert f"there {i}\n".encode() in texts + stored.encode()


async def test_another_users_documents_are_never_seen(
    ws: Workspace, sql_conn: psycopg.Connection[Any]
) -> None:
    ws.engine.agent_writes(sql_conn, ws.url, {"private.md": "not yours\n"}, user="someone-else")
    await ws.apply_others()
    assert not await ws.ops.exists("private.md")
    assert "private.md" not in await ws.stored_names()


async def test_rows_the_workspace_cannot_show_are_passed_over_and_left_alone(
    ws: Workspace, sql_conn: psycopg.Connection[Any]
) -> None:
    """The agent's rows at paths no file can have (under a synthetic folder; on the
    legacy layout also absolute, with an empty or ``..`` segment, a control character)
    are not shown, and nothing of memfs's touches them; the rest of the workspace loads."""
    unshowable = [".search/x.md"]
    if ws.engine.layout == "legacy":  # the Reborn layout's own path rules refuse these
        unshowable += ["/abs.md", "a//b.md", "dir/../up.md", "ctl\x07.md"]
    ws.engine.agent_writes(sql_conn, ws.url, {p: "x\n" for p in [*unshowable, "ok.md"]})
    await ws.apply_others()
    assert await ws.ops.read("ok.md") == b"x\n"
    async with ws.fresh() as other:  # the synthetic folders beside it: ``.search`` and the like
        assert [e.name for e in await other.list() if not e.name.startswith(".")] == ["ok.md"]
        assert not await other.exists("a") and not await other.exists("dir")
    await ws.ops.save("mine.md", b"mine\n")
    await ws.fs.flush_changes()
    assert set(unshowable) <= set(ws.engine.rows(sql_conn)), "left as the agent wrote them"
