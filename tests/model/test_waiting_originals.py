"""A renamed-away original (vim's and emacs's ``x -> x~``) is claimed only where its row is.

The row of a document renamed to a scratch name waits, untouched, for the next file created
at the path it left (``memfs.vfs.saves``).  It was remembered by that path string alone: when
the folder holding the backup moved, the row moved with it, yet a new file at the *old* path
still took the row over and wrote its content into the document now at the new path; and when
another writer's change showed the row again (and then moved it) the old path still claimed
it.  The new file's save then landed in another document, which a later removal of that other
document took with it: the history checker's ``lost: ... save e/z.md`` after ``mv e b``
(legacy seed 58 of stop 38).  Both layouts, on the model with a real database.
"""

from __future__ import annotations

from typing import Any

import psycopg

from memfs.tree import ROOT_INODE, DirNode
from memfs.vfs import Filesystem, OtherWriters
from tests.engines import Engine
from tests.model.conftest import settle
from tests.model.test_round_trips import write_file


def folder(fs: Filesystem, name: str) -> DirNode:
    node = fs.state.tree.get_dir(ROOT_INODE).children[name]
    assert isinstance(node, DirNode)
    return node


async def test_a_waiting_original_moves_with_its_folder(
    engine: Engine, two: tuple[Filesystem, Filesystem], sql_conn: psycopg.Connection[Any]
) -> None:
    fs, _ = two
    e = await fs.mkdir(ROOT_INODE, "e", 0o755)
    await write_file(fs, e.ino, "z.md", b"first\n")
    await fs.rename(e.ino, "z.md", e.ino, "z.md~")  # the editor's backup; the row waits
    await fs.rename(ROOT_INODE, "e", ROOT_INODE, "b")  # the row moves to b/z.md with it
    await settle(fs)
    again = await fs.mkdir(ROOT_INODE, "e", 0o755)
    await write_file(fs, again.ino, "z.md", b"a new document\n")
    await settle(fs)
    assert engine.contents(sql_conn) == {"b/z.md": "first\n", "e/z.md": "a new document\n"}
    # The new file at the path the row moved to is the one that takes it over.
    await write_file(fs, folder(fs, "b").ino, "z.md", b"second\n")
    await settle(fs)
    assert engine.contents(sql_conn) == {"b/z.md": "second\n", "e/z.md": "a new document\n"}
    assert engine.versions(sql_conn, "b/z.md") == ["first\n"]


async def test_an_original_another_writer_shows_again_is_not_claimed(
    engine: Engine, two: tuple[Filesystem, Filesystem], sql_conn: psycopg.Connection[Any]
) -> None:
    fs, other = two
    await write_file(fs, ROOT_INODE, "z.md", b"first\n")
    await other.load()
    await fs.rename(ROOT_INODE, "z.md", ROOT_INODE, "z.md~")  # the row waits for a new z.md
    # Meanwhile the other mount moves the document away and writes to it.
    await other.rename(ROOT_INODE, "z.md", ROOT_INODE, "moved.md")
    await settle(other)
    await write_file(other, ROOT_INODE, "moved.md", b"first\nthe other writer's line\n")
    await OtherWriters(fs).resync()  # this mount shows moved.md: the row is live again
    assert "moved.md" in fs.state.tree.get_dir(ROOT_INODE).children
    await write_file(fs, ROOT_INODE, "z.md", b"a new document\n")
    await settle(fs)
    assert engine.contents(sql_conn) == {
        "moved.md": "first\nthe other writer's line\n",
        "z.md": "a new document\n",
    }
    await fs.unlink(ROOT_INODE, "z.md~")  # the backup goes; the live document stays
    await settle(fs)
    assert engine.contents(sql_conn) == {
        "moved.md": "first\nthe other writer's line\n",
        "z.md": "a new document\n",
    }


async def test_a_backup_removed_after_another_writer_saved_the_waiting_row_keeps_it(
    engine: Engine, two: tuple[Filesystem, Filesystem], sql_conn: psycopg.Connection[Any]
) -> None:
    """Removing the backup with no new file deletes the document, but only as this mount
    showed it: another mount's save into the waiting row, not seen here yet, stays."""
    fs, other = two
    await write_file(fs, ROOT_INODE, "z.md", b"first\n")
    await other.load()
    await fs.rename(ROOT_INODE, "z.md", ROOT_INODE, "z.md~")
    await write_file(other, ROOT_INODE, "z.md", b"first\nthe other writer's save\n")
    await fs.unlink(ROOT_INODE, "z.md~")  # this mount has not seen the other's save
    await settle(fs)
    assert engine.contents(sql_conn) == {"z.md": "first\nthe other writer's save\n"}


async def test_a_backup_renamed_over_another_document_keeps_a_change_to_its_row(
    engine: Engine, two: tuple[Filesystem, Filesystem], sql_conn: psycopg.Connection[Any]
) -> None:
    """``a -> a~`` (the row waits), the agent appends to the row, then ``a~ -> b`` over
    another document: b takes the backup's bytes and a's row goes.  The row was deleted
    whatever it held (the agent's line gone with it, no version); it is deleted only as
    this mount showed it, and otherwise kept (Reborn) or kept as a version of b (legacy)."""
    fs, _ = two
    await write_file(fs, ROOT_INODE, "a.md", b"first\n")
    await write_file(fs, ROOT_INODE, "b.md", b"bee\n")
    await settle(fs)
    await fs.rename(ROOT_INODE, "a.md", ROOT_INODE, "a.md~")  # the row waits at a.md
    assert engine.agent_appends(sql_conn, "a.md", "the agent's line")
    await fs.rename(ROOT_INODE, "a.md~", ROOT_INODE, "b.md")
    await settle(fs)
    assert engine.contents(sql_conn)["b.md"] == "first\n"
    kept = [*engine.contents(sql_conn).values(), *engine.versions(sql_conn, "b.md"),
            *engine.versions(sql_conn, "a.md")]  # fmt: skip
    assert any("the agent's line" in text for text in kept), kept
