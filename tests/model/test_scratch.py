"""The scratch overlay in the model on the legacy layout: what each editor's save costs in
statements, attributes through a temporary, tentative names, links, git.  The patterns
themselves, on every engine and front: ``tests/contract/test_editor_saves.py``."""

from __future__ import annotations

import errno
import os
from typing import Any

import psycopg
import pytest

from memfs.db import Database, Scope
from memfs.errors import FsError
from memfs.tree import ROOT_INODE, DirNode, FileNode
from memfs.vfs import Filesystem
from tests.conftest import StatementLog

WRITE = os.O_WRONLY


def docs(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    return dict(conn.execute("SELECT path, id FROM memory_documents").fetchall())


def content(conn: psycopg.Connection[Any], path: str) -> str | None:
    row = conn.execute("SELECT content FROM memory_documents WHERE path = %s", (path,)).fetchone()
    return row[0] if row else None


async def write_file(fs: Filesystem, parent: int, name: str, data: bytes) -> FileNode:
    fh, node = await fs.create(parent, name, 0o644, WRITE)
    await fs.write(fh, 0, data)
    await fs.release(fh)
    assert isinstance(node, FileNode)
    return node


async def test_vim_save_is_one_update_and_keeps_identity(
    fs: Filesystem, sql_conn: psycopg.Connection[Any], statements: StatementLog
) -> None:
    await write_file(fs, ROOT_INODE, "MEMORY.md", b"old\n")
    original = docs(sql_conn)["MEMORY.md"]
    statements.take()
    swap = await write_file(fs, ROOT_INODE, ".MEMORY.md.swp", b"b0VIM\x00\x00binary")
    probe = await write_file(fs, ROOT_INODE, "4913", b"")
    await fs.unlink(ROOT_INODE, "4913")
    await fs.rename(ROOT_INODE, "MEMORY.md", ROOT_INODE, "MEMORY.md~")
    assert "MEMORY.md" not in fs.state.tree.root.children  # vim checks that the name is free
    assert content(sql_conn, "MEMORY.md") == "old\n"  # ...but the agent still sees it
    fh, _ = await fs.create(ROOT_INODE, "MEMORY.md", 0o644, WRITE)
    await fs.write(fh, 0, b"new\n")
    await fs.fsync(fh)
    await fs.release(fh)
    await fs.unlink(ROOT_INODE, "MEMORY.md~")
    await fs.unlink(ROOT_INODE, ".MEMORY.md.swp")
    assert statements.take() == ["UPDATE"]
    assert docs(sql_conn) == {"MEMORY.md": original}
    assert content(sql_conn, "MEMORY.md") == "new\n"
    versions = sql_conn.execute("SELECT content FROM memory_document_versions").fetchall()
    assert versions == [("old\n",)]
    assert swap.scratch and probe.scratch


async def test_rsync_temp_rename_commits_into_the_existing_row(
    database: Database, fs: Filesystem, sql_conn: psycopg.Connection[Any], statements: StatementLog
) -> None:
    await write_file(fs, ROOT_INODE, "notes.md", b"v1")
    original = docs(sql_conn)["notes.md"]
    statements.take()
    temp = await write_file(fs, ROOT_INODE, ".notes.md.Ab12Cd", b"v2")
    await fs.setattr(temp.ino, mode=0o600, mtime_ns=1_600_000_000_000_000_000)
    await fs.rename(ROOT_INODE, ".notes.md.Ab12Cd", ROOT_INODE, "notes.md")
    assert statements.take() == ["UPDATE"]
    assert docs(sql_conn) == {"notes.md": original}
    assert content(sql_conn, "notes.md") == "v2"
    fresh = Filesystem(database.store(Scope("default")))
    await fresh.load()
    node = fresh.state.tree.resolve("notes.md")
    assert node is not None
    attrs = fresh.attributes(node)
    assert (attrs.mode & 0o777, attrs.mtime_ns) == (0o600, 1_600_000_000_000_000_000)


async def test_tentative_files_are_promoted_after_grace(
    fs: Filesystem, sql_conn: psycopg.Connection[Any]
) -> None:
    await write_file(fs, ROOT_INODE, ".github.action", b"real dotfile\n")
    await write_file(fs, ROOT_INODE, ".blob.Xy12Ab", b"\x00binary")
    assert docs(sql_conn) == {}
    assert (
        await fs.patterns.promote_due(fs.lookups.monotonic() + 1) == 0
    )  # still within the grace period
    assert await fs.patterns.promote_due(fs.lookups.monotonic() + 10) == 1
    assert content(sql_conn, ".github.action") == "real dotfile\n"
    assert fs.state.tree.root.children[".blob.Xy12Ab"].scratch  # binary stays in memory


async def test_unison_temp_directory_commits_its_subtree(
    fs: Filesystem, sql_conn: psycopg.Connection[Any], statements: StatementLog
) -> None:
    tmp = await fs.mkdir(ROOT_INODE, ".unison.proj.8f3a.unison.tmp", 0o755)
    assert tmp.scratch
    sub = await fs.mkdir(tmp.ino, "sub", 0o755)
    await write_file(fs, tmp.ino, "a.md", b"A")
    await write_file(fs, sub.ino, "b.md", b"B")
    await write_file(fs, sub.ino, "b.md~", b"backup")
    assert docs(sql_conn) == {}
    await fs.rename(ROOT_INODE, ".unison.proj.8f3a.unison.tmp", ROOT_INODE, "proj")
    assert sorted(docs(sql_conn)) == ["proj/a.md", "proj/sub/b.md"]
    assert statements.take() == ["INSERT", "INSERT"]
    proj = fs.state.tree.resolve("proj")
    assert isinstance(proj, DirNode) and not proj.scratch
    assert fs.state.tree.resolve("proj/sub/b.md~").scratch  # type: ignore[union-attr]


async def test_links_only_inside_the_overlay(fs: Filesystem) -> None:
    await write_file(fs, ROOT_INODE, "em.md", b"x")
    lock = await fs.symlink(ROOT_INODE, ".#em.md", b"user@host.1234")
    assert fs.readlink(lock.ino) == b"user@host.1234"
    with pytest.raises(FsError) as info:
        await fs.symlink(ROOT_INODE, "link.md", b"em.md")
    assert info.value.errno == errno.EPERM
    nonce = await write_file(fs, ROOT_INODE, ".#-emacs123abc", b"lock")
    linked = await fs.link(nonce.ino, ROOT_INODE, ".#other.md")
    assert linked is nonce and fs.attributes(nonce).nlink == 2
    await fs.unlink(ROOT_INODE, ".#-emacs123abc")
    assert fs.attributes(nonce).nlink == 1
    fh, _ = await fs.open(nonce.ino, os.O_RDONLY)
    assert await fs.read(fh, 0, 10) == b"lock"
    await fs.release(fh)
    doc = fs.state.tree.resolve("em.md")
    assert doc is not None
    with pytest.raises(FsError) as info:
        await fs.link(doc.ino, ROOT_INODE, "em2.md")
    assert info.value.errno == errno.EPERM


async def test_git_directories_are_refused(
    fs: Filesystem, sql_conn: psycopg.Connection[Any]
) -> None:
    with pytest.raises(FsError) as info:
        await fs.mkdir(ROOT_INODE, ".git", 0o755)
    assert info.value.errno == errno.EPERM
    with pytest.raises(FsError) as info:
        await fs.create(ROOT_INODE, ".git", 0o644, WRITE)
    assert info.value.errno == errno.EPERM
    assert docs(sql_conn) == {}
