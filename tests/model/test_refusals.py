"""A refusal is not an outage (issue 26, defect 4).

A deferred ``mkdir`` of a path too long for a btree index (12 nested 224-byte names: 2.7 kB,
under PATH_MAX) returned 0, then failed at every later transaction: every save of any file
answered EIO until unmount.  Paths too long for the engine's indexes are refused up front
(ENAMETOOLONG), and a queued change the database refuses anyway (here: a trigger that
raises, as a constraint would) is dropped with a log line, never retried, never failing
another file's save.
"""

from __future__ import annotations

import errno
import logging
from typing import Any

import psycopg
import pytest
import trio

from memfs.errors import FsError
from memfs.tree import ROOT_INODE
from memfs.vfs import Filesystem
from tests.engines import ENGINES, Engine
from tests.model.conftest import settle
from tests.model.test_round_trips import write_file


async def test_nested_long_names_are_refused_up_front_and_saves_go_on(
    engine: Engine,
    two: tuple[Filesystem, Filesystem],
    sql_conn: psycopg.Connection[Any],
) -> None:
    fs, _ = two
    parent, made = ROOT_INODE, 0
    with pytest.raises(FsError) as refused:
        for depth in range(12):
            parent = (await fs.mkdir(parent, f"{depth:02d}" + "d" * 222, 0o755)).ino
            made += 1
    assert refused.value.errno == errno.ENAMETOOLONG
    assert 9 <= made < 12  # refused where the path passes the engine's index limit
    await settle(fs)
    await write_file(fs, parent, "deep.md", b"deep\n")  # the deepest folder made still works
    await write_file(fs, ROOT_INODE, "after.md", b"saved\n")
    await settle(fs)
    assert engine.contents(sql_conn)["after.md"] == "saved\n"


async def test_a_folder_rename_that_would_push_a_path_past_the_limit_is_refused(
    engine: Engine,
    two: tuple[Filesystem, Filesystem],
) -> None:
    fs, _ = two
    top = await fs.mkdir(ROOT_INODE, "a", 0o755)
    parent = top.ino
    for depth in range(10):  # 2,516 bytes at x.md: under both engines' limits
        parent = (await fs.mkdir(parent, f"{depth}" + "d" * 250, 0o755)).ino
    await write_file(fs, parent, "x.md", b"x\n")
    with pytest.raises(FsError) as refused:
        await fs.rename(ROOT_INODE, "a", ROOT_INODE, "b" * 250)
    assert refused.value.errno == errno.ENAMETOOLONG
    assert sorted(fs.state.tree.get_dir(ROOT_INODE).children) == ["a"]


# PostgreSQL only: the refusal is planted as a PostgreSQL constraint on memfs's table.
@pytest.mark.parametrize("engine", ENGINES, indirect=True, ids=str)
async def test_a_refused_queued_change_is_dropped_and_other_saves_go_on(
    engine: Engine, two: tuple[Filesystem, Filesystem], sql_conn: psycopg.Connection[Any],
    caplog: pytest.LogCaptureFixture,
) -> None:  # fmt: skip
    fs, _ = two
    table = "memfs.directories" if engine.name == "legacy" else "memfs.reborn_directories"
    sql_conn.execute(
        "CREATE FUNCTION refuse_dir() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "IF NEW.path LIKE '%refused' THEN RAISE EXCEPTION 'no' USING ERRCODE = '23514'; "
        "END IF; RETURN NEW; END $$"
    )
    sql_conn.execute(
        f"CREATE TRIGGER refuse_dir BEFORE INSERT ON {table} "  # type: ignore[arg-type]
        "FOR EACH ROW EXECUTE FUNCTION refuse_dir()"
    )
    caplog.set_level(logging.WARNING)
    await fs.mkdir(ROOT_INODE, "refused", 0o755)  # queued: returns at once
    for n in range(3):  # the saves that carry (then no longer carry) the refused change
        await write_file(fs, ROOT_INODE, f"f{n}.md", f"{n}\n".encode())
    with trio.fail_after(10):  # the background sender drops it by itself
        while not any("refused the folder" in r.getMessage() for r in caplog.records):
            await trio.sleep(0.05)
    await settle(fs)
    assert sorted(engine.contents(sql_conn)) == ["f0.md", "f1.md", "f2.md"]
    assert any("refused the folder 'refused'" in r.getMessage() for r in caplog.records)
    assert not fs.store.deferred.pending()  # dropped: never sent again
