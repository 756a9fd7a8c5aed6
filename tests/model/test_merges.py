"""A save over another writer's change merges the two (``memfs.merge``), on both layouts.

The mount hears of the other change (the change feed, a poll: here a resync) while the file
is open for writing; the save then reads the row and merges line by line, based on what the
file was opened with.  Where the changes overlap the save wins and the other change is kept
as a version, as before.
"""

from __future__ import annotations

import os
from typing import Any

import psycopg

from memfs.tree import ROOT_INODE
from memfs.vfs import Filesystem, OtherWriters
from tests.engines import Engine
from tests.model.test_round_trips import write_file


async def read_all(fs: Filesystem, ino: int) -> bytes:
    fh, _ = await fs.open(ino, os.O_RDONLY)
    try:
        return fs.read(fh, 0, 1 << 16)
    finally:
        await fs.release(fh)


async def test_an_append_while_the_agent_appended_keeps_both_lines(
    engine: Engine, two: tuple[Filesystem, Filesystem], sql_conn: psycopg.Connection[Any]
) -> None:
    fs, _ = two
    ino = await write_file(fs, ROOT_INODE, "MEMORY.md", b"a\n")
    fh, _ = await fs.open(ino, os.O_WRONLY | os.O_APPEND)
    assert engine.agent_appends(sql_conn, "MEMORY.md", "agent\n")
    await OtherWriters(fs).resync()  # the change feed, or a poll
    await fs.write(fh, 2, b"mine\n")
    await fs.release(fh)
    assert engine.contents(sql_conn) == {"MEMORY.md": "a\nagent\nmine\n"}
    assert engine.versions(sql_conn, "MEMORY.md")[-1] == "a\nagent\n"
    assert await read_all(fs, ino) == b"a\nagent\nmine\n"
    assert fs.getattr(ino).size == len(b"a\nagent\nmine\n")


async def test_an_edit_of_line_one_while_another_mount_appended_keeps_both(
    engine: Engine, two: tuple[Filesystem, Filesystem], sql_conn: psycopg.Connection[Any]
) -> None:
    first, second = two
    ino = await write_file(first, ROOT_INODE, "notes.md", b"titel\nbody\n")
    await second.load()
    fh, _ = await first.open(ino, os.O_RDWR)
    await write_file(second, ROOT_INODE, "notes.md", b"titel\nbody\nsecond mount\n")
    await OtherWriters(first).resync()
    await first.write(fh, 0, b"title")  # a typo fixed in place, same length
    await first.release(fh)
    assert engine.contents(sql_conn) == {"notes.md": "title\nbody\nsecond mount\n"}


async def test_overlapping_changes_keep_the_save_and_the_other_as_a_version(
    engine: Engine, two: tuple[Filesystem, Filesystem], sql_conn: psycopg.Connection[Any]
) -> None:
    fs, _ = two
    ino = await write_file(fs, ROOT_INODE, "MEMORY.md", b"one\n")
    fh, _ = await fs.open(ino, os.O_RDWR)
    engine.agent_overwrites(sql_conn, "MEMORY.md", "agent's one\n")
    await OtherWriters(fs).resync()
    await fs.write(fh, 0, b"ONE\n")
    await fs.release(fh)
    assert engine.contents(sql_conn) == {"MEMORY.md": "ONE\n"}
    assert "agent's one\n" in engine.versions(sql_conn, "MEMORY.md")


async def test_a_save_with_no_other_change_costs_no_extra_round_trip(
    engine: Engine, two: tuple[Filesystem, Filesystem], sql_conn: psycopg.Connection[Any]
) -> None:
    fs, _ = two
    ino = await write_file(fs, ROOT_INODE, "MEMORY.md", b"one\n")
    calls = []
    real = fs.store.read_content
    fs.store.read_content = lambda *a: calls.append(a) or real(*a)  # type: ignore[method-assign]
    fh, _ = await fs.open(ino, os.O_WRONLY | os.O_APPEND)
    await fs.write(fh, 4, b"two\n")
    await fs.release(fh)
    assert engine.contents(sql_conn) == {"MEMORY.md": "one\ntwo\n"}
    assert calls == [], "no merge check without another writer's change"
