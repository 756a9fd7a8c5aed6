"""The filesystem model, driven directly (no kernel), against a real database."""

from __future__ import annotations

import errno
import os
from typing import Any

import psycopg
import pytest

from memfs.db import Database, Scope
from memfs.errors import FsError
from memfs.ironclaw.hashing import bytes_hash
from memfs.kernel import RecordingNotifier
from memfs.tree import ROOT_INODE, DirNode, FileNode
from memfs.vfs import Filesystem, OtherWriters
from tests.model.conftest import Solo

WRITE = os.O_WRONLY
TRUNC = os.O_WRONLY | os.O_TRUNC


def docs(conn: psycopg.Connection[Any]) -> dict[str, str]:
    return dict(
        conn.execute(
            "SELECT path, content FROM memory_documents WHERE user_id = 'default'"
        ).fetchall()
    )


async def write_file(fs: Filesystem, parent: int, name: str, data: bytes) -> int:
    fh, node = await fs.create(parent, name, 0o644, WRITE)
    await fs.write(fh, 0, data)
    await fs.release(fh)
    return node.ino


async def expect(code: int, coro: Any) -> FsError:
    with pytest.raises(FsError) as info:
        await coro
    assert info.value.errno == code, info.value
    return info.value


async def test_create_write_close_commits(solo: Solo, sql_conn: psycopg.Connection[Any]) -> None:
    fs, docs = solo.fs, solo.engine.contents
    fh, node = await fs.create(ROOT_INODE, "MEMORY.md", 0o644, WRITE)
    assert docs(sql_conn) == {}  # nothing before flush
    await fs.write(fh, 0, "hello ✓\n".encode())
    await fs.flush(fh)
    assert docs(sql_conn) == {"MEMORY.md": "hello ✓\n"}
    assert fs.getattr(node.ino).size == len("hello ✓\n".encode())
    await fs.release(fh)
    fh, _ = await fs.open(node.ino, os.O_RDONLY)
    assert await fs.read(fh, 0, 100) == "hello ✓\n".encode()
    await fs.release(fh)


async def test_two_descriptors_share_one_buffer(solo: Solo) -> None:
    fs = solo.fs
    ino = await write_file(fs, ROOT_INODE, "a.md", b"one\n")
    writer, _ = await fs.open(ino, os.O_WRONLY)
    reader, _ = await fs.open(ino, os.O_RDONLY)
    await fs.write(writer, 4, b"two\n")
    assert await fs.read(reader, 0, 100) == b"one\ntwo\n"
    await fs.release(writer)
    await fs.release(reader)


async def test_refused_write_keeps_database_content(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    fs = solo.fs
    ino = await write_file(fs, ROOT_INODE, "MEMORY.md", b"precious\n")
    fh, _ = await fs.open(ino, TRUNC)  # `printf 'a\0b' > MEMORY.md`
    await expect(errno.EILSEQ, fs.write(fh, 0, b"a\x00b"))
    await expect(errno.EILSEQ, fs.flush(fh))  # close reports it too
    await fs.release(fh)
    assert solo.engine.contents(sql_conn) == {"MEMORY.md": "precious\n"}
    assert fs.getattr(ino).size == len(b"precious\n")
    fh, _ = await fs.open(ino, os.O_RDONLY)
    assert await fs.read(fh, 0, 100) == b"precious\n"
    await fs.release(fh)


async def test_truncated_trailing_character_fails_at_flush(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    fs = solo.fs
    fh, _ = await fs.create(ROOT_INODE, "bad.md", 0o644, WRITE)
    await fs.write(fh, 0, b"caf\xc3")
    await expect(errno.EILSEQ, fs.flush(fh))
    await fs.release(fh)
    assert solo.engine.contents(sql_conn) == {}
    assert "bad.md" not in fs.state.tree.root.children  # never stored, so not shown either
    await expect(errno.ENOENT, fs.rename(ROOT_INODE, "bad.md", ROOT_INODE, "x.md"))


async def test_unlink_keeps_emptied_directory(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    fs, contents = solo.fs, solo.engine.contents
    projects = await fs.mkdir(ROOT_INODE, "projects", 0o755)
    beta = await fs.mkdir(projects.ino, "beta", 0o755)
    await write_file(fs, beta.ino, "notes.md", b"n")
    assert contents(sql_conn) == {"projects/beta/notes.md": "n"}
    await fs.unlink(beta.ino, "notes.md")
    assert contents(sql_conn) == {}
    assert isinstance((await solo.fresh()).state.tree.resolve("projects/beta"), DirNode)
    await expect(errno.ENOTEMPTY, fs.rmdir(ROOT_INODE, "projects"))
    await fs.rmdir(projects.ino, "beta")
    await fs.rmdir(ROOT_INODE, "projects")
    assert (await solo.fresh()).state.tree.root.children == {}


async def test_errnos_of_namespace_operations(solo: Solo) -> None:
    fs = solo.fs
    d = await fs.mkdir(ROOT_INODE, "d", 0o755)
    await write_file(fs, ROOT_INODE, "f.md", b"f")
    await write_file(fs, d.ino, "inner.md", b"i")
    e = await fs.mkdir(ROOT_INODE, "e", 0o755)
    await expect(errno.EEXIST, fs.mkdir(ROOT_INODE, "d", 0o755))
    await expect(errno.EEXIST, fs.create(ROOT_INODE, "f.md", 0o644, WRITE | os.O_EXCL))
    await expect(errno.EPERM, fs.mkdir(ROOT_INODE, ".search", 0o755))
    await expect(errno.EPERM, fs.create(ROOT_INODE, ".search", 0o644, WRITE))
    await expect(errno.EINVAL, fs.create(ROOT_INODE, "ctl\x01.md", 0o644, WRITE))
    await expect(errno.ENAMETOOLONG, fs.create(ROOT_INODE, "n" * 300, 0o644, WRITE))
    await expect(errno.EISDIR, fs.unlink(ROOT_INODE, "d"))
    await expect(errno.ENOTDIR, fs.rmdir(ROOT_INODE, "f.md"))
    await expect(errno.ENOTEMPTY, fs.rmdir(ROOT_INODE, "d"))
    await expect(errno.ENOENT, fs.unlink(ROOT_INODE, "missing.md"))
    await expect(errno.EEXIST, fs.rename(ROOT_INODE, "f.md", d.ino, "inner.md", noreplace=True))
    await expect(errno.EINVAL, fs.rename(ROOT_INODE, "f.md", d.ino, "inner.md", exchange=True))
    await expect(errno.EINVAL, fs.rename(ROOT_INODE, "d", d.ino, "sub"))
    await expect(errno.EISDIR, fs.rename(ROOT_INODE, "f.md", ROOT_INODE, "e"))
    await expect(errno.ENOTDIR, fs.rename(ROOT_INODE, "e", ROOT_INODE, "f.md"))
    await expect(errno.ENOTEMPTY, fs.rename(ROOT_INODE, "e", ROOT_INODE, "d"))
    await expect(errno.EPERM, fs.rename(ROOT_INODE, "f.md", ROOT_INODE, ".search"))
    await expect(errno.EPERM, fs.setattr(ROOT_INODE, uid=12345))
    assert (
        await fs.setattr(ROOT_INODE, uid=fs.lookups.uid, gid=fs.lookups.gid)
    ).uid == fs.lookups.uid
    assert e.ino in fs.state.tree.inodes


async def test_write_temp_then_rename_keeps_document_identity(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    fs, engine = solo.fs, solo.engine
    await write_file(fs, ROOT_INODE, "notes.md", b"v1")
    original = engine.identity(sql_conn, "notes.md")
    # Committed temp, renamed over the document: the row at the target is replaced.
    fh, _ = await fs.create(ROOT_INODE, "tmp1", 0o644, WRITE)
    await fs.write(fh, 0, b"v2")
    await fs.rename(ROOT_INODE, "tmp1", ROOT_INODE, "notes.md")  # renamed while still open
    await fs.release(fh)
    assert engine.contents(sql_conn) == {"notes.md": "v2"}
    assert engine.identity(sql_conn, "notes.md") == original  # the temp adopted the row
    assert engine.versions(sql_conn, "notes.md") == ["v1"]


async def test_directory_rename_moves_rows_in_one_go(
    fs: Filesystem, sql_conn: psycopg.Connection[Any]
) -> None:
    p = await fs.mkdir(ROOT_INODE, "projects", 0o755)
    beta = await fs.mkdir(p.ino, "beta", 0o755)
    await write_file(fs, beta.ino, "a.md", b"a")
    sub = await fs.mkdir(beta.ino, "sub", 0o755)
    await write_file(fs, sub.ino, "b.md", b"b")
    ids = dict(sql_conn.execute("SELECT path, id FROM memory_documents").fetchall())
    mtime = fs.getattr(fs.state.tree.resolve("projects/beta/a.md").ino).mtime_ns  # type: ignore[union-attr]
    await fs.rename(p.ino, "beta", p.ino, "gamma")
    moved = dict(sql_conn.execute("SELECT path, id FROM memory_documents").fetchall())
    assert moved == {
        "projects/gamma/a.md": ids["projects/beta/a.md"],
        "projects/gamma/sub/b.md": ids["projects/beta/sub/b.md"],
    }
    node = fs.state.tree.resolve("projects/gamma/a.md")
    assert isinstance(node, FileNode) and fs.getattr(node.ino).mtime_ns == mtime
    dirs = {r[0] for r in sql_conn.execute("SELECT path FROM memfs.directories")}
    assert dirs == {"projects", "projects/gamma", "projects/gamma/sub"}


async def test_truncate_by_path_commits(solo: Solo, sql_conn: psycopg.Connection[Any]) -> None:
    fs = solo.fs
    ino = await write_file(fs, ROOT_INODE, "t.md", "héllo".encode())
    await fs.setattr(ino, size=1)
    assert solo.engine.contents(sql_conn) == {"t.md": "h"}
    await expect(errno.EILSEQ, fs.setattr(ino, size=50))


async def test_mode_and_mtime_persist(solo: Solo) -> None:
    ino = await write_file(solo.fs, ROOT_INODE, "m.md", b"x")
    await solo.fs.setattr(ino, mode=0o600, mtime_ns=1_000_000_000_000)
    fresh = await solo.fresh()
    node = fresh.state.tree.resolve("m.md")
    assert node is not None
    attrs = fresh.attributes(node)
    assert (attrs.mode & 0o7777, attrs.mtime_ns) == (0o600, 1_000_000_000_000)


async def test_readdir_snapshot_is_stable(solo: Solo) -> None:
    fs = solo.fs
    for name in ["a.md", "b.md", "c.md"]:
        await write_file(fs, ROOT_INODE, name, b"x")
    fh = fs.opendir(ROOT_INODE)
    first = list(fs.readdir(fh, 0))[:3]
    assert [name for _, name, _ in first] == [".", "..", "a.md"]
    await write_file(fs, ROOT_INODE, "aa.md", b"x")  # added mid-listing
    await fs.unlink(ROOT_INODE, "c.md")  # removed mid-listing
    rest = list(fs.readdir(fh, first[-1][0]))
    assert [name for _, name, _ in rest] == ["b.md"]
    fs.releasedir(fh)


async def test_a_listing_the_kernel_may_cache_is_dropped_at_every_change(
    fs: Filesystem,
) -> None:
    """A folder opened with ``cache_readdir`` is dropped from the kernel when its names
    change, whoever changes them (here the tree directly, as other writers' events and
    the mount's own merges do); a synthetic folder is never let be cached.  The open after
    a change does not let the kernel keep what it holds (``keep_cache``): the queued
    invalidation may land after that open, and the listing then read would be stale."""
    kernel = fs.lookups.kernel
    assert isinstance(kernel, RecordingNotifier)
    folder = fs.state.tree.new_dir("f", 0o755, fs.lookups.clock())
    fs.state.tree.attach(fs.state.tree.root, folder)
    fh = fs.opendir(folder.ino, kernel_caches=True)
    assert fs.listing_cached(fh) and not fs.listing_kept(fh)  # the kernel holds nothing yet
    list(fs.readdir(fh, 0))
    fs.releasedir(fh)
    assert ("inode", folder.ino, "") not in kernel.calls  # nothing changed: kept
    fh = fs.opendir(folder.ino, kernel_caches=True)
    assert fs.listing_kept(fh)  # unchanged since the kernel was given it
    fs.releasedir(fh)
    fs.state.tree.attach(folder, fs.state.tree.new_file("a.md", 0o644, fs.lookups.clock()))
    assert kernel.calls.count(("inode", folder.ino, "")) == 1
    fh = fs.opendir(folder.ino, kernel_caches=True)
    assert fs.listing_cached(fh) and not fs.listing_kept(fh)  # dropped in the open itself
    fs.releasedir(fh)
    assert fs.listing_kept(fs.opendir(folder.ino, kernel_caches=True))  # given anew since
    fs.state.tree.attach(folder, fs.state.tree.new_file("a2.md", 0o644, fs.lookups.clock()))
    assert kernel.calls.count(("inode", folder.ino, "")) == 2
    fs.state.tree.attach(folder, fs.state.tree.new_file("b.md", 0o644, fs.lookups.clock()))
    assert kernel.calls.count(("inode", folder.ino, "")) == 2  # not cached since: no call
    assert not fs.listing_cached(fs.opendir(folder.ino))  # the kernel was not offered it
    search = fs.state.tree.new_synthetic_dir("s", fs.lookups.clock())
    fs.state.tree.attach(fs.state.tree.root, search)
    assert not fs.listing_cached(fs.opendir(search.ino, kernel_caches=True))


async def test_a_listing_read_while_its_folder_changed_is_dropped_at_its_close(
    fs: Filesystem,
) -> None:
    """The kernel may fill its cache from a snapshot after it was told to drop the
    folder (the change came between the reply and the kernel's filling): a handle whose
    folder changed while it was open drops the folder again when it closes."""
    kernel = fs.lookups.kernel
    assert isinstance(kernel, RecordingNotifier)
    folder = fs.state.tree.new_dir("f", 0o755, fs.lookups.clock())
    fs.state.tree.attach(fs.state.tree.root, folder)
    fh = fs.opendir(folder.ino, kernel_caches=True)
    list(fs.readdir(fh, 0))
    fs.state.tree.attach(folder, fs.state.tree.new_file("a.md", 0o644, fs.lookups.clock()))
    assert kernel.calls.count(("inode", folder.ino, "")) == 1
    fs.releasedir(fh)
    assert kernel.calls.count(("inode", folder.ino, "")) == 2


async def test_a_cached_listing_asked_from_its_middle_goes_on_where_the_kernels_stopped(
    fs: Filesystem,
) -> None:
    """The kernel serves a folder it cached without asking; when a cache page goes (an
    invalidation, memory pressure) it asks this handle from the position it reached, and
    the handle had read nothing.  It answered nothing: ``find`` missed 115 of 100,000 files
    (bench_scale).  The rest must come, at the positions of the listing the kernel cached."""
    folder = fs.state.tree.new_dir("f", 0o755, fs.lookups.clock())
    fs.state.tree.attach(fs.state.tree.root, folder)
    for n in range(10):
        fs.state.tree.attach(folder, fs.state.tree.new_file(f"n{n}.md", 0o644, fs.lookups.clock()))
    first = fs.opendir(folder.ino, kernel_caches=True)
    cached = [name for _, name, _ in fs.readdir(first, 0)]  # what the kernel keeps
    fs.releasedir(first)
    second = fs.opendir(folder.ino, kernel_caches=True)  # served from the cache...
    rest = [name for _, name, _ in fs.readdir(second, 7)]  # ...until a page went
    assert rest == cached[7:] and rest


async def test_readdir_in_batches_lists_each_entry_once(solo: Solo) -> None:
    fs = solo.fs
    names = [f"n{i:03d}.md" for i in range(120)]
    for name in names:
        fs.state.tree.attach(
            fs.state.tree.root, fs.state.tree.new_file(name, 0o644, fs.lookups.clock())
        )
    fh = fs.opendir(ROOT_INODE)
    seen: list[str] = []
    offset = 0
    while True:  # as the kernel does: a batch at a time, resuming at the last next_id
        batch = []
        for entry in fs.readdir(fh, offset):
            batch.append(entry)
            if len(batch) == 25:
                break
        if not batch:
            break
        seen += [name for _, name, _ in batch]
        offset = batch[-1][0]
    fs.releasedir(fh)
    assert seen == [".", "..", *names]


async def test_other_users_rows_are_invisible(
    database: Database, sql_conn: psycopg.Connection[Any]
) -> None:
    sql_conn.execute(
        "INSERT INTO memory_documents (user_id, path, content) VALUES ('bob', 'bob.md', 'b'),"
        " ('default', 'mine.md', 'm')"
    )
    alice = Filesystem(database.store(Scope("alice")))
    await alice.load()
    assert alice.state.tree.root.children == {}
    await write_file(alice, ROOT_INODE, "bob.md", b"alice's own")
    rows = sql_conn.execute("SELECT user_id, content FROM memory_documents WHERE path = 'bob.md'")
    assert sorted(rows.fetchall()) == [("alice", "alice's own"), ("bob", "b")]


async def test_new_empty_file_is_committed_once_at_release(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    """bash's `echo x > new.md` flushes before writing; that must not insert an empty row."""
    fs, docs = solo.fs, solo.engine.contents
    fh, _ = await fs.create(ROOT_INODE, "new.md", 0o644, WRITE)
    await fs.flush(fh)
    assert docs(sql_conn) == {}
    await fs.write(fh, 0, b"x\n")
    await fs.flush(fh)
    await fs.release(fh)
    assert docs(sql_conn) == {"new.md": "x\n"}
    fh, _ = await fs.create(ROOT_INODE, "touched.md", 0o644, WRITE)  # `touch`
    await fs.flush(fh)
    await fs.release(fh)
    assert docs(sql_conn) == {"new.md": "x\n", "touched.md": ""}


async def test_create_without_o_excl_of_a_name_that_just_appeared_opens_it(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    """Another mount's file reached this tree between the kernel's lookup and its CREATE:
    plain O_CREAT opens it (as on a local disk); O_EXCL still says EEXIST."""
    fs, docs = solo.fs, solo.engine.contents
    ino = await write_file(fs, ROOT_INODE, "x.md", b"theirs\n")
    await expect(errno.EEXIST, fs.create(ROOT_INODE, "x.md", 0o644, WRITE | os.O_EXCL))
    fh, node = await fs.create(ROOT_INODE, "x.md", 0o644, WRITE | os.O_TRUNC)
    assert node.ino == ino
    await fs.write(fh, 0, b"mine\n")
    await fs.release(fh)
    assert docs(sql_conn) == {"x.md": "mine\n"}


async def test_times_beyond_2262_are_refused_not_an_eio(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    fs, docs = solo.fs, solo.engine.contents
    ino = await write_file(fs, ROOT_INODE, "t.md", b"t\n")
    year_2300 = 10_413_792_000 * 10**9
    error = await expect(errno.EINVAL, fs.setattr(ino, mtime_ns=year_2300))
    assert "1677-2262" in error.reason
    assert fs.getattr(ino).mtime_ns != year_2300
    assert docs(sql_conn) == {"t.md": "t\n"}


async def test_reading_another_writers_newer_version_drops_the_kernels_cached_size(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    """A read that finds a version the change feed has not announced yet must tell the
    kernel, or it keeps the old size (and ``cat`` a short read) until its attr timeout.
    The size goes before ``open`` answers (the queued invalidation of pages may come after
    the opener's ``fstat``: node's ``readFile`` then read a torn last line)."""
    fs = solo.fs
    ino = await write_file(fs, ROOT_INODE, "p.md", b"")
    solo.engine.agent_overwrites(sql_conn, "p.md", "probe 1\n")
    fs.lookups.cache.drop(fs.state.tree.get_file(ino).doc_id)
    fs.state.tree.get_file(
        ino
    ).kernel_version = None  # no pages in the kernel (else the open loads nothing)
    calls = fs.lookups.kernel.calls  # type: ignore[attr-defined]
    calls.clear()
    fh, keep_cache = await fs.open(ino, os.O_RDONLY)
    assert not keep_cache
    assert ("attributes", ino, "") in calls
    assert await fs.read(fh, 0, 100) == b"probe 1\n"
    assert ("inode", ino, "") in calls
    assert fs.getattr(ino).size == 8
    await fs.release(fh)


async def test_o_append_writes_land_at_the_end_the_daemon_holds(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    """The kernel computes an O_APPEND offset from its cached size; after another writer
    changed the file, that offset is wrong (past the end: EILSEQ; short: overwrite)."""
    fs, docs = solo.fs, solo.engine.contents
    ino = await write_file(fs, ROOT_INODE, "log.md", b"one\n")
    fh, _ = await fs.open(ino, os.O_WRONLY | os.O_APPEND)
    await fs.write(fh, 100, b"two\n")  # a stale, too-large offset
    await fs.write(fh, 0, b"three\n")  # a stale, too-small one
    await fs.release(fh)
    assert docs(sql_conn) == {"log.md": "one\ntwo\nthree\n"}


async def test_read_ahead_never_serves_an_older_neighbour(
    solo: Solo, sql_conn: psycopg.Connection[Any]
) -> None:
    """Opening one cold file reads its neighbours too; another writer's later change to a
    neighbour is still what that neighbour's open returns (the cache is keyed by version)."""
    fs = solo.fs
    await write_file(fs, ROOT_INODE, "a.md", b"a1\n")
    await write_file(fs, ROOT_INODE, "b.md", b"b1\n")
    cold = await solo.fresh()
    a = await cold.lookup(ROOT_INODE, "a.md")
    fh, _ = await cold.open(a.ino, os.O_RDONLY)
    await cold.release(fh)
    b = await cold.lookup(ROOT_INODE, "b.md")
    assert isinstance(b, FileNode) and b.doc_id is not None
    assert cold.lookups.cache.holds(b.doc_id, b.updated_at)  # read ahead with a.md
    solo.engine.agent_overwrites(sql_conn, "b.md", "b2, longer\n")
    await OtherWriters(cold).resync()  # what the change feed (or polling) does
    fh, _ = await cold.open(b.ino, os.O_RDONLY)
    assert await cold.read(fh, 0, 100) == b"b2, longer\n"
    await cold.release(fh)


async def test_a_reader_of_pages_the_kernel_holds_loads_nothing_until_it_reads(
    solo: Solo,
) -> None:
    """Once the kernel was given a version's pages, a reader's open of that version costs
    no database read, whatever the content cache holds: the content is read only if the
    kernel asks (it dropped the pages), and then it is the row's."""
    fs = solo.fs
    ino = await write_file(fs, ROOT_INODE, "k.md", b"kept by the kernel\n")
    fh, _ = await fs.open(ino, os.O_RDONLY)  # the kernel is given the pages
    await fs.release(fh)
    node = fs.state.tree.get_file(ino)
    assert node.doc_id is not None
    fs.lookups.cache.drop(node.doc_id)
    fh, keep_cache = await fs.open(ino, os.O_RDONLY, pid=4321)
    assert keep_cache and fs.state.handles[fh].unloaded
    assert not fs.lookups.cache.holds(node.doc_id, node.updated_at), "the open read the row"
    base = fs.lookups.bases.base("k.md", 4321)  # a later save by this process merges over it
    assert base is not None and base.digest == bytes_hash(b"kept by the kernel\n")
    assert await fs.read(fh, 0, 100) == b"kept by the kernel\n"  # the pages went
    assert not fs.state.handles[fh].unloaded
    await fs.release(fh)
